"""Fair share with memory changes nothing it should not: over random clusters
(quotas, limits, weights, a queue tree, running and waiting gangs, every
action), a session with usage on but nothing used yet decides exactly what a
session without usageDBConfig decides -- KAI's share weights with no usage are
the plain weights, and among queues of one priority its split is today's
water-filling -- while a session without usageDBConfig never sees usage nor
writes any. (Queues of one priority: with several, usage on also splits the
room by priority first, as KAI does, which today's split does not.)"""
from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import parse_config
from kaisched.framework.effects import Effect, SetQueueStatus, SetQueueUsage
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from plugins.proportion import water_fill
from tests.builders.objects import build_node, build_pod, build_podgroup, build_queue

GPU = "nvidia.com/gpu"
ACTIONS = "actions: [allocate, backfill, reclaim, preempt]\n"
TIERS = """\
tiers:
  - plugins: [{name: priority}, {name: gang}]
  - plugins: [{name: proportion%s}, {name: predicates}, {name: nodeorder}]
"""


@st.composite
def clusters(draw: st.DrawFn, priorities: bool = False) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    nodes = [f"n{i}" for i in range(draw(st.integers(1, 4)))]
    for name in nodes:
        objects.append(build_node(name, cpu=draw(st.integers(2, 8)), gpu=draw(st.sampled_from([2, 4, 8]))))
    queues: list[str] = []
    leaves: list[str] = []
    if draw(st.booleans()):
        objects.append(build_queue("dept", resources={GPU: {"quota": draw(st.integers(0, 8))}}))
    for i in range(draw(st.integers(2, 4))):
        name = f"q{i}"
        resources: dict[str, Any] = {GPU: {"quota": draw(st.integers(0, 4)),
                                           "overQuotaWeight": draw(st.sampled_from([0, 1, 1, 2, 3]))}}
        if draw(st.booleans()):
            resources[GPU]["limit"] = draw(st.integers(1, 12))
        parent = "dept" if any(o["metadata"]["name"] == "dept" for o in objects) \
            and draw(st.booleans()) else None
        objects.append(build_queue(name, parent, resources,
                                   draw(st.sampled_from([50, 100, 200])) if priorities else None))
        queues.append(name)
        leaves.append(name)
    free = {n: o["status"]["allocatable"] for n, o in zip(nodes, objects, strict=False)}
    used = {n: 0 for n in nodes}
    for j in range(draw(st.integers(1, 7))):
        queue = draw(st.sampled_from(leaves))
        size = draw(st.integers(1, 3))
        gpu = draw(st.integers(1, 2))
        priority = draw(st.sampled_from([10, 100, 1000]))
        objects.append(build_podgroup(f"g{j}", min_member=size, queue=queue))
        running = draw(st.booleans())
        for p in range(size):
            node = None
            if running:
                fits = [n for n in nodes if used[n] + gpu <= int(free[n][GPU])]
                node = fits[0] if fits else None
                if node is not None:
                    used[node] += gpu
            objects.append(build_pod(f"g{j}-{p}", cpu=0.5, gpu=gpu, group=f"g{j}", queue=queue,
                                     node=node, priority=priority))
    return objects


def decisions(objects: list[dict[str, Any]], config: str, cycles: int = 2) -> list[list[Effect]]:
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    for obj in objects:
        cluster.create(obj)
    registry = register_builtins()
    scheduler = Scheduler(cluster, parse_config(config, registry), registry, clock,
                          Binder(cluster, clock.now))
    out = []
    for _ in range(cycles):
        result = scheduler.run_once()
        assert result.cluster is not None
        if "usageDBConfig" not in config:
            assert result.cluster.usage is None
        out.append([e for e in result.effects if not isinstance(e, SetQueueUsage)])
        if "usageDBConfig" not in config:
            assert len(out[-1]) == len(result.effects)      # nothing of usage is written
        clock.advance(1.0)
    return out


@settings(max_examples=40, deadline=None)
@given(clusters(), st.sampled_from([0.0, 0.5, 1.0, 3.0]))
def test_usage_on_with_nothing_used_decides_as_usage_off(objects: list[dict[str, Any]],
                                                          k_value: float) -> None:
    off = decisions(objects, ACTIONS + TIERS % "")
    # Nothing used: a usage window no second of which has passed yet.
    on = decisions(objects, ACTIONS + "usageDBConfig: {usageParams: {windowSize: 1h}}\n"
                   + TIERS % f", arguments: {{kValue: {k_value}}}", cycles=1)
    assert on == off[:1]


def reference_fair_shares(objects: list[dict[str, Any]]) -> dict[str, float]:
    """GPU fair shares as they were before usage memory: level by level,
    quota first, the rest by overQuotaWeight up to demand and limit, queue
    priority playing no part."""
    total = sum(float(o["status"]["allocatable"].get(GPU, 0)) for o in objects if o["kind"] == "Node")
    queues = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Queue"}
    demand: dict[str, float] = {}
    for o in objects:
        if o["kind"] == "Pod":
            queue = o["metadata"]["labels"]["kaisched.io/queue"]
            gpus = float(o["spec"]["containers"][0]["resources"]["requests"][GPU])
            while queue:
                demand[queue] = demand.get(queue, 0.0) + gpus
                queue = queues[queue].get("parentQueue")
    shares = {"": total}
    children: dict[str, list[str]] = {}
    for name, spec in queues.items():
        children.setdefault(spec.get("parentQueue") or "", []).append(name)
    children.setdefault("", []).append("default")
    queues["default"] = {}
    for parent in ["", *sorted(n for n in queues if n in children)]:
        kids = sorted(children.get(parent, []))
        res = [(queues[k].get("resources") or {}).get(GPU, {}) for k in kids]
        caps = [min(demand.get(k, 0.0), float(r["limit"])) if "limit" in r else demand.get(k, 0.0)
                for k, r in zip(kids, res, strict=True)]
        got = water_fill(shares[parent], [float(r.get("quota", 0)) for r in res], caps,
                         [float(r.get("overQuotaWeight", 1)) for r in res])
        shares.update(zip(kids, got, strict=True))
    return shares


@settings(max_examples=40, deadline=None)
@given(clusters(priorities=True))
def test_without_usage_fair_shares_are_todays_whatever_the_queue_priorities(
        objects: list[dict[str, Any]]) -> None:
    """The half of the comparison the one above cannot make: usage off, queue
    priorities of every kind, the fair shares written are today's."""
    (first, _) = decisions(objects, ACTIONS + TIERS % "")
    written = {e.queue: dict(e.status.fair_share).get(GPU, 0.0)
               for e in first if isinstance(e, SetQueueStatus)}
    want = reference_fair_shares(objects)
    assert written, "no Queue status was written"
    for queue, share in written.items():
        assert share == round(want[queue] * 1000) / 1000, queue
