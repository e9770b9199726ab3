"""LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): `replicas` groups, each a
leader and size-1 workers that serve one model together.

The LWS controller makes a StatefulSet of leaders; each leader pod owns a
StatefulSet of its workers. Every pod carries its group's index (label
leaderworkerset.sigs.k8s.io/group-index) and its place in the group
(leaderworkerset.sigs.k8s.io/worker-index, 0 for the leader). Each group is
its own gang, PodGroup pg-<lws>-<uid>-<group index>: one group starts when its
size fits, whatever the other replicas do. With startupPolicy LeaderReady the
workers are created only once the leader is ready, so the leader is a gang of
one and the workers a gang of their own (pg-...-<index>-workers).
"""
from __future__ import annotations

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
    podgroup_name,
    section,
    start_order,
)

GROUP_INDEX_LABEL = LEADER_WORKER_SET.pods.group_label
WORKER_INDEX_LABEL = LEADER_WORKER_SET.pods.index_label


def leader_worker_set(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    problems: list[str] = []
    spec = section(owner, "spec", "spec", problems, required=True)
    # replicas only says how many groups there are; each is grouped on its own.
    count(spec.get("replicas"), "spec.replicas", 1, problems)
    template = section(spec, "leaderWorkerTemplate", "spec.leaderWorkerTemplate", problems,
                       required=not problems)
    size = count(template.get("size"), "spec.leaderWorkerTemplate.size", 1, problems)
    if size < 1 and not problems:
        problems.append("spec.leaderWorkerTemplate.size must be at least 1")
    policy = start_order(spec, LEADER_WORKER_SET.start_order, problems)
    labels = lineage.pod_labels()
    group = str(labels.get(GROUP_INDEX_LABEL) or "")
    if not problems and not group.isdecimal():
        problems.append(f"the pod's label {GROUP_INDEX_LABEL} must be a group index, "
                        f"got {group or 'nothing'}")
    if problems:
        return defaulted(owner, problems)
    leader = str(labels.get(WORKER_INDEX_LABEL) or "0") == "0"
    if policy == LEADER_WORKER_SET.start_order.staged:
        if leader:
            return attrs.evolve(base(owner), name=podgroup_name(owner, group), min_member=1)
        return attrs.evolve(base(owner), name=podgroup_name(owner, f"{group}-workers"),
                            min_member=max(1, size - 1))
    roles = (SubGroup(LEADER, 1),) + ((SubGroup(WORKER, size - 1),) if size > 1 else ())
    return attrs.evolve(base(owner), name=podgroup_name(owner, group), min_member=size,
                        subgroups=roles)
