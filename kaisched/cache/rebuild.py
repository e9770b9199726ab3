"""A model made from scratch from the cache's converted objects: the
reference the incremental model is checked against."""
from __future__ import annotations

from typing import Callable, Mapping

from kaisched.api.clusterinfo import ClusterInfo, ForeignPod
from kaisched.api.gpuask import gpu_memory_label
from kaisched.api.job import JobInfo
from kaisched.api.node import NodeSpec
from kaisched.api.queue import QueueInfo
from kaisched.api.types import JobKey, NodeName, PodKey, TaskStatus
from kaisched.cache.convert import PodFacts
from kaisched.cache.jobs import (
    WORKLOAD_SOURCES,
    Groups,
    Priorities,
    as_bound,
    describe,
    foreign_pod,
    make_task,
)


def rebuild(pods: Mapping[PodKey, PodFacts], nodes: Mapping[str, NodeSpec], groups: Groups,
            queues: Mapping[str, QueueInfo], priority_classes: Mapping[str, tuple[int, bool, bool]],
            namespaces: Mapping[str, Mapping[str, str]], scheduler_name: str,
            now: float, mine: Callable[[PodFacts], bool] | None = None,
            assumed: Mapping[PodKey, NodeName] | None = None) -> ClusterInfo:
    """mine: which pods a shard schedules (None: every pod of scheduler_name);
    a shard counts other pods only on its own nodes. assumed: binds sent whose
    echo has not arrived (see Model.keep): such a pod, still pending without a
    node, is as its echo will show it."""
    priorities = Priorities.of(priority_classes)
    members: dict[JobKey, list[PodFacts]] = {}
    foreign: list[ForeignPod] = []
    strangers: dict[JobKey, dict[PodKey, str]] = {}
    for facts in pods.values():
        if facts.status is None:
            continue
        if facts.scheduler_name != scheduler_name or (mine is not None and not mine(facts)):
            pod = foreign_pod(facts)
            if pod is not None and (mine is None or pod.node_name in nodes):
                foreign.append(pod)
            # Another shard's pod names this scheduler: no stranger (as Model keeps them).
            if facts.scheduler_name != scheduler_name and facts.gang.source in WORKLOAD_SOURCES \
                    and facts.status not in (TaskStatus.SUCCEEDED, TaskStatus.FAILED):
                strangers.setdefault(facts.job, {})[facts.key] = facts.scheduler_name
            continue
        node = (assumed or {}).get(facts.key)
        if node is not None and facts.status is TaskStatus.PENDING and facts.node_name is None:
            facts = as_bound(facts, node)
        members.setdefault(facts.job, []).append(facts)
    def gpu_memory(node: NodeName) -> int | None:
        spec = nodes.get(node)
        return gpu_memory_label(spec.labels) if spec is not None else None

    jobs = []
    for key, facts_list in members.items():
        job = JobInfo(key, groups.single(None))
        for facts in facts_list:
            job.add_task(make_task(facts, priorities, facts.placement, groups, gpu_memory))
        describe(job, facts_list, groups, priorities, strangers.get(key))
        jobs.append(job)
    foreign.sort(key=lambda p: p.key)
    return ClusterInfo.assemble(nodes.values(), jobs, queues.values(), dict(priorities.values),
                                foreign, now, namespaces)
