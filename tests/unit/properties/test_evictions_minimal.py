"""Every eviction preempt or reclaim commits is needed: over random small
clusters with a queue at its limit, required anti-affinity and a queue under
its quota, the evictions made for a job are minimal over victim units --
keeping any one unit running leaves the job unplaceable.

A unit is what the victim order takes together: a pod above its job's
minimum, or else the whole gang (for a gang that lost every pod and ran above
its minimum, its minimum of oldest pods -- the surplus goes first, newest
first -- or, for a minimum of one, any one pod). The oracle is worked out here, apart from the actions: with the unit
kept and every other victim being deleted, allocate alone is run on the same
cluster (its placement is the one the actions place over victims with), and
the job must not get as many pods placed as it did (its minimum, or an extra
pod of a running elastic job).

Each cluster has one pending job, so that at the moment preempt or reclaim
looks, nothing else has changed the cluster.
"""
from __future__ import annotations

from typing import Any

import attrs
from hypothesis import event, given, settings
from hypothesis import strategies as st

from kaisched.builtins.catalog import register_builtins
from kaisched.framework import parse_config
from kaisched.tools.replay import replay
from tests.builders.objects import build_node, build_pod, build_podgroup, build_queue

TIERS = """
tiers:
  - plugins: [{name: priority}, {name: gang}, {name: podgroupstatus}]
  - plugins:
    - {name: proportion}
    - {name: predicates}
    - {name: podaffinity}
    - {name: nodeorder, arguments: {strategy: binpack}}
"""
ACTIONS = "actions: [allocate, reclaim, preempt]\n"
ALLOCATE = "actions: [allocate]\n"
WEB = {"app": "web"}
ANTI_WEB = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": WEB}, "topologyKey": "kubernetes.io/hostname"}]}}


@attrs.frozen
class Pod:
    name: str
    job: str
    cpu: int
    node: str | None
    web: bool
    minute: int         # created at, minutes after midnight: the newest goes first


@attrs.frozen
class Cluster:
    nodes: dict[str, int]                   # name -> cpus
    limit: int                              # queue a's cpu limit
    quota: int                              # queue b's cpu quota
    jobs: dict[str, tuple[str, int, int]]   # name -> (queue, priority, minMember)
    pods: tuple[Pod, ...]
    anti: bool                              # the pending job keeps off web pods' hosts

    def objects(self, releasing: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [
            build_node(n, cpu=c, labels={"kubernetes.io/hostname": n}) for n, c in self.nodes.items()]
        out.append(build_queue("a", resources={"cpu": {"limit": str(self.limit)}}))
        out.append(build_queue("b", resources={"cpu": {"quota": str(self.quota)}}))
        for name, (queue, _, min_member) in self.jobs.items():
            out.append(build_podgroup(name, min_member=min_member, queue=queue))
        for pod in self.pods:
            queue, priority, _ = self.jobs[pod.job]
            obj = build_pod(pod.name, cpu=pod.cpu, group=pod.job, queue=queue, node=pod.node,
                            priority=priority, labels=WEB if pod.web else None,
                            creation=f"2026-01-01T{pod.minute // 60:02d}:{pod.minute % 60:02d}:00Z")
            if pod.node is None and self.anti:
                obj["spec"]["affinity"] = ANTI_WEB
            if pod.name in releasing:
                obj["metadata"]["deletionTimestamp"] = "2026-01-01T23:59:59Z"
            out.append(obj)
        return out


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    nodes = {f"n{i}": draw(st.integers(2, 6)) for i in range(draw(st.integers(1, 4)))}
    free = dict(nodes)
    jobs: dict[str, tuple[str, int, int]] = {}
    pods: list[Pod] = []
    minute = 0
    for j in range(draw(st.integers(1, 5))):
        name = f"run{j}"
        count = draw(st.integers(1, 3))
        jobs[name] = (draw(st.sampled_from("ab")), draw(st.integers(0, 1)), draw(st.integers(1, count)))
        placed = []
        for p in range(count):
            cpu = draw(st.integers(1, 2))
            fits = [n for n, c in free.items() if c >= cpu]
            if not fits:
                break
            node = draw(st.sampled_from(fits))
            free[node] -= cpu
            minute += 1
            placed.append(Pod(f"{name}-{p}", name, cpu, node, draw(st.booleans()), minute))
        if len(placed) < jobs[name][2]:     # a gang runs whole or not at all
            del jobs[name]
            for pod in placed:
                free[str(pod.node)] += pod.cpu
            continue
        pods += placed
    used_a = sum(p.cpu for p in pods if jobs[p.job][0] == "a")
    limit = used_a + draw(st.integers(0, 3))
    count = draw(st.integers(1, 2))
    jobs["urgent"] = (draw(st.sampled_from("ab")), 10, draw(st.integers(1, count)))
    cpu = draw(st.integers(1, 3))
    pods += [Pod(f"urgent-{p}", "urgent", cpu, None, False, 600) for p in range(count)]
    return Cluster(nodes, limit, draw(st.integers(0, 8)), jobs, tuple(pods), draw(st.booleans()))


def _run(objects: list[dict[str, Any]], actions: str) -> Any:
    registry = register_builtins()
    return replay(objects, parse_config(actions + TIERS, registry), registry)


def _units(cluster: Cluster, evicted: set[str]) -> list[set[str]]:
    """The victim units among the evicted pods, each as the pods it keeps."""
    units: list[set[str]] = []
    for job, (_, _, min_member) in cluster.jobs.items():
        running = sorted((p for p in cluster.pods if p.job == job and p.node), key=lambda p: p.minute)
        lost = [p.name for p in running if p.name in evicted]
        if not lost:
            continue
        if len(lost) < len(running):
            units += [{name} for name in lost]
        elif len(running) > min_member == 1:      # any one pod kept is its minimum
            units += [{name} for name in lost]
        elif len(running) > min_member:
            units.append({p.name for p in running[:min_member]})
        else:
            units.append(set(lost))
    return units


def _placed(result: Any) -> int:
    return sum(1 for key in [*result.bindings, *result.pipelined] if key.startswith("default/urgent-"))


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_every_committed_eviction_is_needed(cluster: Cluster) -> None:
    result = _run(cluster.objects(), ACTIONS)
    evicted = {key.split("/", 1)[1] for key in result.evictions}
    event("evicted" if evicted else "no eviction")
    if not evicted:
        return
    assert all(not name.startswith("urgent-") for name in evicted)
    placed = _placed(result)
    assert placed >= cluster.jobs["urgent"][2], "evictions are committed only for a job they place"
    for keep in _units(cluster, evicted):
        again = _run(cluster.objects(frozenset(evicted - keep)), ALLOCATE)
        assert _placed(again) < placed, f"{sorted(keep)} need not have been evicted"
