"""LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): `replicas` groups, each a
leader and size-1 workers that serve one model together.

The LWS controller makes a StatefulSet of leaders; each leader pod owns a
StatefulSet of its workers. Every pod carries its group's index (label
leaderworkerset.sigs.k8s.io/group-index) and its place in the group
(leaderworkerset.sigs.k8s.io/worker-index, 0 for the leader). Each group is
its own gang, PodGroup pg-<lws>-<uid>-<group index>: one group starts when its
size fits, whatever the other replicas do. Its subgroups are the group's
natural parts: the leader and the workers, or, with
leaderWorkerTemplate.subGroupPolicy.subGroupSize, the group's subgroups of
that many pods as the LWS controller numbers them (the leader in the first,
or on its own with subGroupPolicyType LeaderExcluded), each its own minimum.

With startupPolicy LeaderReady the workers are created only once the leader
is ready. The group still needs `size` pods, leader included (as KAI reads
it): until the leader has a node the gang is the leader alone, then the
whole group -- the same PodGroup, its minMember grown.
"""
from __future__ import annotations

from collections.abc import Mapping

import attrs

from kaisched.api.workloadkinds import LEADER, LEADER_WORKER_SET, WORKER
from podgrouper.groupers.spec import (
    NO_POD,
    GroupSpec,
    Lineage,
    Owner,
    SubGroup,
    base,
    count,
    defaulted,
    owner_spec,
    podgroup_name,
    section,
    start_order,
)

GROUP_INDEX_LABEL = LEADER_WORKER_SET.pods.group_label
WORKER_INDEX_LABEL = LEADER_WORKER_SET.pods.index_label
LEADER_EXCLUDED = "LeaderExcluded"
_POLICY_TYPES = ("LeaderWorker", LEADER_EXCLUDED)


@attrs.frozen(slots=True)
class Parts:
    """How a group of `size` pods splits into subgroups; `of(index)` the leaf of a pod."""

    size: int
    every: int = 0                  # subGroupSize; 0: leader and workers
    excluded: bool = False          # LeaderExcluded: the leader on its own

    def of(self, index: int) -> str:
        if not self.every:
            return LEADER if index == 0 else WORKER
        if self.excluded:
            return LEADER if index == 0 else f"subgroup-{(index - 1) // self.every}"
        # As the LWS controller numbers them: when the leader is the one pod
        # beyond whole subgroups, it joins the first.
        extra = (self.size - 1) % self.every == 0 and self.size % self.every != 0
        return f"subgroup-{max(index - 1, 0) // self.every if extra else index // self.every}"

    def subgroups(self) -> tuple[SubGroup, ...]:
        sizes: dict[str, int] = {}
        for index in range(self.size):
            leaf = self.of(index)
            sizes[leaf] = sizes.get(leaf, 0) + 1
        return tuple(SubGroup(name, n) for name, n in sizes.items())


def leader_worker_set(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    spec, problems = owner_spec(owner)
    # replicas only says how many groups there are; each is grouped on its own.
    count(spec.get("replicas"), "spec.replicas", 1, problems)
    template = section(spec, "leaderWorkerTemplate", "spec.leaderWorkerTemplate", problems,
                       required=not problems)
    size = count(template.get("size"), "spec.leaderWorkerTemplate.size", 1, problems)
    if size < 1 and not problems:
        problems.append("spec.leaderWorkerTemplate.size must be at least 1")
    parts = _parts(template, size, problems)
    policy = start_order(spec, LEADER_WORKER_SET.start_order, problems)
    labels = lineage.pod_labels()
    group = str(labels.get(GROUP_INDEX_LABEL) or "")
    if not problems and not group.isdecimal():
        problems.append(f"the pod's label {GROUP_INDEX_LABEL} must be a group index, "
                        f"got {group or 'nothing'}")
    if problems:
        return defaulted(owner, problems)
    index = str(labels.get(WORKER_INDEX_LABEL) or "0")
    mine = parts.of(int(index) if index.isdecimal() else 0)
    named = attrs.evolve(base(owner), name=podgroup_name(owner, group), pod_subgroup=mine)
    if policy == LEADER_WORKER_SET.start_order.staged and mine == parts.of(0) \
            and index in ("", "0") and not _has_node(lineage.pod):
        # The workers come once the leader is ready: first the leader alone.
        return attrs.evolve(named, min_member=1, subgroups=(SubGroup(mine, 1),))
    return attrs.evolve(named, min_member=size, subgroups=parts.subgroups())


def _parts(template: Mapping[str, object], size: int, problems: list[str]) -> Parts:
    policy = section(template, "subGroupPolicy", "spec.leaderWorkerTemplate.subGroupPolicy",
                     problems)
    if not policy or problems:
        return Parts(size)
    where = "spec.leaderWorkerTemplate.subGroupPolicy"
    every = count(policy.get("subGroupSize"), f"{where}.subGroupSize", 0, problems)
    kind = policy.get("subGroupPolicyType", _POLICY_TYPES[0])
    if kind not in _POLICY_TYPES:
        problems.append(f"{where}.subGroupPolicyType must be one of {', '.join(_POLICY_TYPES)}, "
                        f"got {kind!r}")
    if every < 1 or problems:
        return Parts(size)
    return Parts(size, every, kind == LEADER_EXCLUDED)


def _has_node(pod: Owner) -> bool:
    spec = pod.get("spec")
    return isinstance(spec, Mapping) and bool(spec.get("nodeName"))
