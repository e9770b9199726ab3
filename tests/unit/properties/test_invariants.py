"""The scheduler's invariants over random small clusters, after one cycle of
allocate + backfill: no node over-committed, gangs all-or-nothing, queues
within their limits, and the same input always giving the same decisions."""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from .conftest import build_node, build_pod, build_podgroup, build_queue, run_cycle

GPU = "nvidia.com/gpu"
CPU_STEPS = [0, 250, 500, 1000, 1500, 2000, 3000, 4000]       # millicores


@attrs.frozen
class Pod:
    name: str
    job: str
    cpu: int            # millicores
    gpu: int
    priority: int
    node: str | None    # running there already


@attrs.frozen
class Scenario:
    nodes: dict[str, dict[str, float]]          # name -> allocatable (cpu in millicores)
    queues: dict[str, tuple[str | None, dict[str, float]]]   # name -> (parent, limits)
    jobs: dict[str, tuple[int, str]]            # name -> (minMember, queue)
    pods: list[Pod]

    def objects(self) -> list[dict[str, Any]]:
        out = [build_node(n, cpu=f"{a['cpu']:g}m", gpu=a[GPU]) for n, a in self.nodes.items()]
        for name, (parent, limits) in self.queues.items():
            resources = {"cpu": {"limit": f"{limits['cpu']:g}m"}} if "cpu" in limits else {}
            if GPU in limits:
                resources[GPU] = {"limit": limits[GPU]}
            out.append(build_queue(name, parent=parent, resources=resources))
        for name, (min_member, queue) in self.jobs.items():
            out.append(build_podgroup(name, min_member=min_member, queue=queue))
        for pod in self.pods:
            queue = self.jobs[pod.job][1]
            out.append(build_pod(pod.name, cpu=f"{pod.cpu}m" if pod.cpu else 0, gpu=pod.gpu,
                                 group=pod.job, queue=queue, node=pod.node,
                                 priority=pod.priority))
        return out

    def ancestors(self, queue: str) -> list[str]:
        chain = [queue]
        while self.queues.get(chain[-1], (None, {}))[0]:
            chain.append(self.queues[chain[-1]][0])  # type: ignore[arg-type]
        return chain


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    nodes = {f"n{i}": {"cpu": draw(st.integers(1, 8)) * 1000.0,
                       GPU: float(draw(st.sampled_from([0, 0, 1, 2, 4, 8])))}
             for i in range(draw(st.integers(1, 6)))}
    queues: dict[str, tuple[str | None, dict[str, float]]] = {}
    for i in range(draw(st.integers(0, 2))):
        parent = "q0" if i == 1 and draw(st.booleans()) else None
        limits: dict[str, float] = {}
        if draw(st.booleans()):
            limits["cpu"] = draw(st.integers(0, 16)) * 1000.0
        if draw(st.booleans()):
            limits[GPU] = float(draw(st.integers(0, 8)))
        queues[f"q{i}"] = (parent, limits)
    leaves = ["default", *queues]
    jobs: dict[str, tuple[int, str]] = {}
    pods: list[Pod] = []
    free = {n: dict(a) for n, a in nodes.items()}
    used: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    scenario = Scenario(nodes, queues, jobs, pods)
    for j in range(draw(st.integers(1, 8))):
        job = f"job{j}"
        jobs[job] = (draw(st.integers(1, 4)), draw(st.sampled_from(leaves)))
        for p in range(draw(st.integers(1, 5))):
            cpu = draw(st.sampled_from(CPU_STEPS))
            gpu = draw(st.sampled_from([0, 0, 0, 1, 2]))
            node = draw(st.sampled_from([None, None, *nodes]))
            if node is not None:   # already running: only where it fits, node and queue
                chain = scenario.ancestors(jobs[job][1])
                fits_node = free[node]["cpu"] >= cpu and free[node][GPU] >= gpu
                fits_queues = all(used[q]["cpu"] + cpu <= queues[q][1].get("cpu", 1e18)
                                  and used[q][GPU] + gpu <= queues[q][1].get(GPU, 1e18)
                                  for q in chain if q in queues)
                if fits_node and fits_queues:
                    free[node]["cpu"] -= cpu
                    free[node][GPU] -= gpu
                    for q in chain:
                        used[q]["cpu"] += cpu
                        used[q][GPU] += gpu
                else:
                    node = None
            pods.append(Pod(f"{job}-p{p}", job, cpu, gpu, draw(st.integers(0, 2)), node))
    return scenario


def placements(scenario: Scenario, bindings: dict[str, str]) -> dict[str, str]:
    """pod name -> node, for pods running before and pods bound this cycle."""
    out = {p.name: p.node for p in scenario.pods if p.node}
    for key, node in bindings.items():
        name = key.split("/", 1)[1]
        assert name not in out, f"{name} was bound although it runs already"
        out[name] = node
    return out


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_invariants_hold_after_one_cycle(scenario: Scenario) -> None:
    bindings = run_cycle(scenario.objects()).bindings
    placed = placements(scenario, bindings)
    by_name = {p.name: p for p in scenario.pods}

    # no node is over-committed
    load: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for name, node in placed.items():
        load[node]["cpu"] += by_name[name].cpu
        load[node][GPU] += by_name[name].gpu
        load[node]["pods"] += 1
    for node, amounts in load.items():
        alloc = scenario.nodes[node]
        assert amounts["cpu"] <= alloc["cpu"] + 1e-6, (node, dict(amounts), alloc)
        assert amounts[GPU] <= alloc[GPU] + 1e-6, (node, dict(amounts), alloc)
        assert amounts["pods"] <= 110

    # every gang either got nothing new, or has its minimum (running + newly bound)
    for job, (min_member, _) in scenario.jobs.items():
        new = sum(1 for key in bindings if by_name[key.split("/", 1)[1]].job == job)
        ready = sum(1 for p in scenario.pods if p.job == job and p.name in placed)
        assert new == 0 or ready >= min_member, (job, new, ready, min_member)

    # no queue goes over its limit (a parent's limit covers its children)
    usage: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for name in placed:
        pod = by_name[name]
        for queue in scenario.ancestors(scenario.jobs[pod.job][1]):
            usage[queue]["cpu"] += pod.cpu
            usage[queue][GPU] += pod.gpu
    for queue, (_, limits) in scenario.queues.items():
        for res, limit in limits.items():
            assert usage[queue][res] <= limit + 1e-6, (queue, res, usage[queue][res], limit)

    # jobs in a queue with children are not placed (only leaves hold jobs)
    parents = {p for p, _ in scenario.queues.values() if p}
    for key in bindings:
        assert scenario.jobs[by_name[key.split("/", 1)[1]].job][1] not in parents

    # the same input gives the same decisions
    assert run_cycle(scenario.objects()).bindings == bindings


@settings(max_examples=60, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False))
def test_object_order_does_not_change_decisions(scenario: Scenario, rnd: Any) -> None:
    objects = scenario.objects()
    shuffled = list(objects)
    rnd.shuffle(shuffled)
    assert run_cycle(shuffled).bindings == run_cycle(objects).bindings
