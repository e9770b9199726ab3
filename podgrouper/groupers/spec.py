"""What a grouper decides for one top owner: the PodGroup's metadata, as a value.

Groupers read the raw owner object (a plain dict, the boundary) and return a
GroupSpec; nothing past them looks at the owner's field paths.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

import attrs

from kaisched.api import labels as L
from kaisched.api.job import SubGroup
from kaisched.api.workloadkinds import (
    CHIEF,
    HEAD,
    LAUNCHER,
    LEADER,
    MASTER,
    StartOrder,
    WorkloadKind,
    group_of,
)

Owner = Mapping[str, Any]

# PodGroup names are DNS-1123 subdomains.
_MAX_NAME = 253
# Roles that coordinate the others are placed first (master/launcher/driver before the workers).
# Besides the operators' own, the names users give such roles (a JobSet's driver).
LEADING_ROLES = (MASTER, LAUNCHER, HEAD, CHIEF, "driver", LEADER, "coordinator")


@attrs.frozen(slots=True)
class GroupSpec:
    """PodGroup metadata for one top owner.

    problems: the owner's spec could not be read, so this is the default grouping.
    warnings: an override (annotation, minAvailable, ...) was ignored.
    Both become Warning Events on the pods.
    """

    name: str
    min_member: int = 1
    queue: str | None = None
    priority_class_name: str | None = None
    subgroups: tuple[SubGroup, ...] = ()    # a tree: inner ones are named as others' parent
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    pod_subgroup: str | None = None         # the leaf the grouped pod belongs to, when the
    #                                         grouper knows it (else its role, read from labels)

    def with_min_member(self, min_member: int) -> GroupSpec:
        """Override the gang size; leaf subgroup minima are trimmed in role order
        so that they never ask for more than the whole gang (leading roles keep
        theirs); subgroups that hold subgroups keep asking for all of them."""
        parents = {sg.parent for sg in self.subgroups}
        left, subgroups = min_member, []
        for sg in self.subgroups:
            if sg.name in parents:
                subgroups.append(sg)
                continue
            take = min(sg.min_member, left)
            subgroups.append(attrs.evolve(sg, min_member=take))
            left -= take
        return attrs.evolve(self, min_member=min_member, subgroups=tuple(subgroups))

    def leaves(self) -> frozenset[str]:
        """The subgroups pods belong to (those no other subgroup names as parent)."""
        parents = {sg.parent for sg in self.subgroups}
        return frozenset(sg.name for sg in self.subgroups if sg.name not in parents)

    def warn(self, *messages: str) -> GroupSpec:
        return attrs.evolve(self, warnings=self.warnings + messages)


@attrs.frozen(slots=True)
class Lineage:
    """The pod being grouped and its controller owners, nearest first (the
    last is the top owner). Most kinds are grouped by the top owner alone;
    some need the pod (the gang it belongs to: a LeaderWorkerSet group, a
    JobSet's replicatedJob) or an owner in between (a TrainJob's JobSet)."""

    pod: Owner = attrs.field(factory=dict, repr=False)
    owners: tuple[Owner, ...] = attrs.field(default=(), repr=False)
    # The other pods of the same job that exist (same namespace, same job label
    # of the top owner's kind): what an operator that starts pods in steps has made.
    siblings: tuple[Owner, ...] = attrs.field(default=(), repr=False)
    # The object the pod names by its kind's gang label (Grove's PodGang), as read.
    gang: Owner | None = attrs.field(default=None, repr=False)

    def pod_labels(self) -> Mapping[str, Any]:
        return owner_labels(self.pod)

    def nearest(self, kind: WorkloadKind) -> Owner | None:
        """The nearest owner of a kind (any version), if the pod has one."""
        for obj in self.owners:
            if (group_of(str(obj.get("apiVersion") or "")), obj.get("kind")) == kind.group_kind:
                return obj
        return None


# The pod's lineage is known when the controller groups a pod; a grouper called
# with the owner alone (as the tests of whole-owner rules do) sees no pod.
NO_POD = Lineage()


# Every grouper takes (owner, lineage); lineage defaults to NO_POD.
Grouper = Callable[[Owner, Lineage], GroupSpec]


def podgroup_name(owner: Owner, part: str = "") -> str:
    """pg-<owner-name>-<first 8 chars of the owner uid>[-<part>], cut to a valid
    length; part names one of several gangs of the owner (a group, a stage)."""
    meta = metadata(owner)
    name, uid = str(meta.get("name") or "unnamed"), str(meta.get("uid") or "")[:8]
    suffix = (f"-{uid}" if uid else "") + (f"-{part}" if part else "")
    room = _MAX_NAME - len("pg-") - len(suffix)
    return f"pg-{name[:room].rstrip('-.')}{suffix}"


def dns_part(value: str) -> str:
    """A role or stage name as a DNS label: lower-case, other characters as '-'."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-")
    return cleaned[:63].rstrip("-") or "x"


def metadata(owner: Owner) -> Mapping[str, Any]:
    meta = owner.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def owner_labels(owner: Owner) -> Mapping[str, Any]:
    labels = metadata(owner).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def owner_annotations(owner: Owner) -> Mapping[str, Any]:
    annotations = metadata(owner).get("annotations")
    return annotations if isinstance(annotations, Mapping) else {}


def base(owner: Owner) -> GroupSpec:
    """The default grouping: one PodGroup for the owner, minMember 1, its queue label."""
    queue = L.queue_label(owner_labels(owner))
    return GroupSpec(name=podgroup_name(owner), queue=str(queue) if queue else None)


def defaulted(owner: Owner, problems: Iterable[str]) -> GroupSpec:
    """The default grouping for an owner whose spec is malformed."""
    return attrs.evolve(base(owner), problems=tuple(problems))


def section(parent: Mapping[str, Any], key: str, path: str, problems: list[str],
            required: bool = False) -> Mapping[str, Any]:
    """A nested object; absent is {} (a problem when required), anything else a problem."""
    value = parent.get(key)
    if value is None:
        if required:
            problems.append(f"{path} is missing")
        return {}
    if not isinstance(value, Mapping):
        problems.append(f"{path} must be an object, got {type(value).__name__}")
        return {}
    return value


def owner_spec(owner: Owner) -> tuple[Mapping[str, Any], list[str]]:
    """The head of most groupers: the owner's spec, which it must have, and the
    list the grouper gathers its problems in (starting with the spec's own)."""
    problems: list[str] = []
    return section(owner, "spec", "spec", problems, required=True), problems


def an_object(value: object, path: str, problems: list[str]) -> Mapping[str, Any] | None:
    """An item of a list that must be an object (None, and a problem, when not)."""
    if not isinstance(value, Mapping):
        problems.append(f"{path} must be an object")
        return None
    return value


def a_name(obj: Mapping[str, Any], key: str, path: str, problems: list[str]) -> str | None:
    """The name an item gives itself under key (None, and a problem, when it gives none)."""
    name = obj.get(key)
    if not isinstance(name, str) or not name:
        problems.append(f"{path}.{key} is missing")
        return None
    return name


def named_object(value: object, path: str,
                 problems: list[str]) -> tuple[Mapping[str, Any], str] | None:
    """An item of a list that must be an object with a name (None, and a problem, when not)."""
    obj = an_object(value, path, problems)
    name = a_name(obj, "name", path, problems) if obj is not None else None
    return (obj, name) if obj is not None and name is not None else None


def count(value: object, path: str, default: int, problems: list[str]) -> int:
    """A replica-like count: a non-negative integer, or the default when absent."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append(f"{path} must be an integer, got {value!r}")
        return default
    if value < 0:
        problems.append(f"{path} must not be negative, got {value}")
        return default
    return value


def start_order(spec: Mapping[str, Any], order: StartOrder, problems: list[str]) -> object:
    """The start order the spec asks for (its operator's default when unset)."""
    *parents, leaf = order.field.split(".")
    at, path = spec, "spec"
    for part in parents:
        path = f"{path}.{part}"
        at = section(at, part, path, problems)
    value = at.get(leaf, order.default)
    if value not in order.orders:
        problems.append(f"spec.{order.field} must be one of {', '.join(order.orders)}, "
                        f"got {value!r}")
    return value


def positive_override(value: object, path: str, warnings: list[str]) -> int | None:
    """An optional minimum (minAvailable, the min-member annotation): an integer >= 1,
    given as a number or a decimal string; a bad value is a warning and ignored."""
    if value is None:
        return None
    number = value
    digits = value.strip().lstrip("+") if isinstance(value, str) else ""
    if digits.isdecimal():
        number = int(digits)
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        warnings.append(f"{path} must be an integer >= 1, got {value!r}; ignored")
        return None
    return number


class Named(Protocol):
    @property
    def name(self) -> str: ...


R = TypeVar("R", bound=Named)


def in_role_order(subgroups: Iterable[R], rank: tuple[str, ...] = LEADING_ROLES) -> tuple[R, ...]:
    """Ranked roles first in rank order, the others after them in their given order."""
    listed = list(subgroups)
    def key(item: tuple[int, R]) -> tuple[int, int]:
        index, sg = item
        return (rank.index(sg.name), index) if sg.name in rank else (len(rank), index)
    return tuple(sg for _, sg in sorted(enumerate(listed), key=key))
