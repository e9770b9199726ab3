"""The top-owner walk: from a pod up its controller ownerReferences.

The walk reads owners through a reader callable and does no other I/O. What
goes wrong on the way is a value (problems on the OwnerWalk), never a crash:
an owner that cannot be read ends the walk at the last one read; a cycle or
several controller owners end it too, and ask for the default grouping.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kaisched.api.workloadkinds import CRON_JOB, JOB
from kaisched.errors import PermanentApiError

Obj = Mapping[str, Any]

# A Job started by a CronJob is one run: users expect a PodGroup per run, so
# the walk stops at the Job instead of climbing to the CronJob.
_STOP_BELOW = frozenset({(JOB.group_kind, CRON_JOB.group_kind)})


@attrs.frozen(slots=True)
class OwnerRef:
    api_version: str
    kind: str
    name: str
    uid: str = ""

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


# Reads one owner in a namespace: the object, or None when it does not exist.
# Raises PermanentApiError when it may not be read (403), TransientApiError to retry later.
Reader = Callable[[str, OwnerRef], Obj | None]


@attrs.frozen(slots=True)
class OwnerWalk:
    """top: the raw top owner (the pod itself when it has no controller owner).
    broken: the ownerReferences are inconsistent (cycle, several controllers),
    so the top owner's own grouper must not be trusted."""

    top: Obj = attrs.field(repr=False)
    chain: tuple[str, ...]
    problems: tuple[str, ...] = ()
    broken: bool = False
    owners: tuple[Obj, ...] = attrs.field(default=(), repr=False)   # read, nearest first


def describe(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{obj.get('kind', '?')}/{meta.get('name', '?')}"


def controller_refs(obj: Obj) -> tuple[list[OwnerRef], list[str]]:
    """The object's controller ownerReferences, and problems with malformed ones."""
    refs, problems = [], []
    meta = obj.get("metadata") or {}
    for i, ref in enumerate(meta.get("ownerReferences") or ()):
        if not isinstance(ref, Mapping) or ref.get("controller") is not True:
            continue
        api_version, kind, name = (ref.get(k) for k in ("apiVersion", "kind", "name"))
        if not (isinstance(api_version, str) and isinstance(kind, str) and isinstance(name, str)
                and api_version and kind and name):
            problems.append(f"{describe(obj)} ownerReferences[{i}] needs apiVersion, kind and name")
            continue
        refs.append(OwnerRef(api_version, kind, name, uid=str(ref.get("uid") or "")))
    return refs, problems


def top_owner(pod: Obj, read: Reader) -> OwnerWalk:
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    current: Obj = pod
    chain = [describe(pod)]
    owners: list[Obj] = []
    seen = {_identity(pod)}
    while True:
        refs, problems = controller_refs(current)
        if problems:
            return _ended(current, chain, owners, problems)
        if not refs:
            return OwnerWalk(current, tuple(chain), owners=tuple(owners))
        if len(refs) > 1:
            names = ", ".join(str(r) for r in refs)
            return _ended(current, chain, owners, [
                f"{describe(current)} has {len(refs)} controller ownerReferences ({names})"],
                broken=True)
        ref = refs[0]
        if (_identity(current)[:2], (ref.group, ref.kind)) in _STOP_BELOW:
            return OwnerWalk(current, tuple(chain), owners=tuple(owners))
        if (ref.group, ref.kind, ref.name) in seen:
            return _ended(current, chain, owners, [
                f"ownerReferences form a cycle: {' -> '.join(chain)} -> {ref}"], broken=True)
        try:
            owner = read(namespace, ref)
        except PermanentApiError as exc:
            reason = "forbidden" if exc.status == 403 else str(exc)
            return _ended(current, chain, owners, [f"cannot read owner {ref}: {reason}"])
        if owner is None:
            return _ended(current, chain, owners, [f"owner {ref} not found"])
        uid = str((owner.get("metadata") or {}).get("uid") or "")
        if ref.uid and uid and uid != ref.uid:
            return _ended(current, chain, owners, [
                f"owner {ref} has uid {uid}, not the referenced {ref.uid} (stale reference)"])
        current = owner
        owners.append(owner)
        chain.append(describe(owner))
        seen.add(_identity(owner))


def _ended(current: Obj, chain: list[str], owners: list[Obj], problems: list[str],
           broken: bool = False) -> OwnerWalk:
    where = f"; grouped by {describe(current)}"
    return OwnerWalk(current, tuple(chain), tuple(p + where for p in problems), broken,
                     tuple(owners))


def _identity(obj: Obj) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return (str(obj.get("apiVersion") or "").rpartition("/")[0], str(obj.get("kind") or ""),
            str(meta.get("name") or ""))
