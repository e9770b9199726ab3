"""GPU sharing's invariants over random clusters, three sessions each (every
action; evicted pods leave, bound pods start, between sessions):
- no GPU is ever shared beyond its whole, nor beyond its memory, read off the
  pods themselves (their annotations and runai-gpu-group labels), pods being
  deleted still counted;
- no node holds more GPUs than it has: whole-GPU pods, plus each shared GPU
  once (its reservation pod and its sharers together);
- every bound sharer's GPU is held by a reservation pod on its node;
- the cache's model kept by events equals one rebuilt from scratch;
- the same input gives the same decisions;
and pods that share no GPU are scheduled exactly as with the gpusharing
plugin left out of the config: the feature costs them nothing in decisions.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import attrs
from hypothesis import event, given, settings
from hypothesis import strategies as st

from kaisched.api.clock import ManualClock
from kaisched.api.gpuask import GPU_GROUP, RESERVATION_APP, RESERVATION_NAMESPACE, groups_of
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD
from kaisched.framework import SchedulerConfig, default_config
from kaisched.framework.effects import Evict
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from kaisched.tools.replay import load_cluster
from tests.builders.objects import build_node, build_pod, build_podgroup, build_queue
from tests.builders.strategies import contended, sessions

GPU = "nvidia.com/gpu"
SESSIONS = 3


@attrs.frozen
class Sharer:
    name: str
    queue: str
    priority: int
    fraction: float | None
    memory: int | None
    devices: int = 1
    node: str | None = None
    groups: tuple[str, ...] = ()
    gang: str | None = None


@attrs.frozen
class Shared:
    nodes: dict[str, tuple[int, int | None]]        # name -> (GPUs, MiB per GPU or None)
    sharers: tuple[Sharer, ...]
    whole: tuple[tuple[str, str, int, str | None], ...]   # (name, queue, priority, node or None)
    gangs: dict[str, int]                            # gang -> minMember
    quotas: dict[str, float]

    def objects(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for name, (gpus, memory) in self.nodes.items():
            labels = {"nvidia.com/gpu.memory": str(memory)} if memory else {}
            out.append(build_node(name, cpu=32, gpu=gpus, labels=labels))
        out += [build_queue(q, resources={GPU: {"quota": f"{v:g}"}}) for q, v in self.quotas.items()]
        out += [build_podgroup(g, min_member=m, queue="qa") for g, m in self.gangs.items()]
        held: set[tuple[str, str]] = set()
        for s in self.sharers:
            annotations = {"gpu-fraction": f"{s.fraction:g}"} if s.fraction is not None \
                else {"gpu-memory": str(s.memory)}
            if s.devices > 1:
                annotations["gpu-fraction-num-devices"] = str(s.devices)
            labels = {}
            if s.groups:
                labels = {GPU_GROUP: s.groups[0]} if len(s.groups) == 1 else \
                    {f"{GPU_GROUP}/{g}": g for g in s.groups}
            out.append(build_pod(s.name, cpu=1, node=s.node, priority=s.priority,
                                 queue=None if s.gang else s.queue, group=s.gang,
                                 annotations=annotations, labels=labels))
            held |= {(s.node, g) for g in s.groups if s.node}
        for node, group in sorted(held):
            out.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": f"gpu-reservation-{group}", "namespace": RESERVATION_NAMESPACE,
                "labels": {"app": RESERVATION_APP, GPU_GROUP: group}},
                "spec": {"nodeName": node, "containers": [{"name": "r", "image": "pause", "resources": {
                    "requests": {GPU: "1"}, "limits": {GPU: "1"}}}]}, "status": {"phase": "Running"}})
        for name, queue, priority, node in self.whole:
            out.append(build_pod(name, cpu=1, gpu=1, node=node, priority=priority, queue=queue,
                                 extra=None))
        for obj in out:     # a GPU request needs its limit, as the API server says
            for c in obj.get("spec", {}).get("containers", ()):
                req = c.get("resources", {}).get("requests", {})
                if GPU in req:
                    c["resources"]["limits"] = {GPU: req[GPU]}
        return out


FRACTIONS = [0.1, 0.25, 0.3, 0.5, 0.5, 0.7, 1.0]


@st.composite
def shared(draw: st.DrawFn) -> Shared:
    nodes = {f"n{i}": (draw(st.integers(1, 4)), draw(st.sampled_from([None, 10000, 40960])))
             for i in range(draw(st.integers(1, 3)))}
    quotas = {"qa": draw(st.sampled_from([0.5, 1.0, 2.0, 4.0])),
              "qb": draw(st.sampled_from([0.5, 1.0, 2.0]))}
    sharers: list[Sharer] = []
    whole: list[tuple[str, str, int, str | None]] = []
    for node, (gpus, memory) in nodes.items():          # what runs: each GPU shared, whole, or free
        for d in range(gpus):
            use = draw(st.sampled_from(["free", "shared", "shared", "whole"]))
            if use == "whole":
                whole.append((f"w-{node}-{d}", draw(st.sampled_from(["qa", "qb"])),
                              draw(st.integers(0, 2)), node))
            elif use == "shared":
                left = 1.0
                for k in range(draw(st.integers(1, 3))):
                    f = draw(st.sampled_from(FRACTIONS))
                    if f > left + 1e-9:
                        break
                    left -= f
                    by_memory = memory is not None and draw(st.booleans())
                    sharers.append(Sharer(
                        f"r-{node}-{d}-{k}", draw(st.sampled_from(["qa", "qb"])), draw(st.integers(0, 2)),
                        None if by_memory else f, int(f * memory) if by_memory and memory else None,
                        node=node, groups=(f"{node}-g{d}",)))
    gangs: dict[str, int] = {}
    for j in range(draw(st.integers(1, 6))):                # what waits
        kind = draw(st.sampled_from(["fraction", "fraction", "memory", "several", "gang", "whole"]))
        queue, priority = draw(st.sampled_from(["qa", "qb"])), draw(st.integers(0, 3))
        if kind == "whole":
            whole.append((f"p-whole-{j}", queue, priority, None))
        elif kind == "gang":
            size = draw(st.integers(2, 3))
            gangs[f"gang{j}"] = draw(st.integers(1, size))
            f = draw(st.sampled_from(FRACTIONS))
            sharers += [Sharer(f"p-gang{j}-{i}", "qa", priority, f, None, gang=f"gang{j}")
                        for i in range(size)]
        elif kind == "memory":
            sharers.append(Sharer(f"p-mem-{j}", queue, priority, None,
                                  draw(st.sampled_from([1000, 5000, 9000, 20000, 50000]))))
        else:
            sharers.append(Sharer(f"p-frac-{j}", queue, priority, draw(st.sampled_from(FRACTIONS)),
                                  None, devices=2 if kind == "several" else 1))
    return Shared(nodes, tuple(sharers), tuple(whole), gangs, quotas)


def _share(pod: dict[str, Any], memory: int | None) -> tuple[float, float] | None:
    """What a sharer takes of each of its GPUs: (fraction, MiB) (MiB 0 unlabelled)."""
    ann = pod["metadata"].get("annotations") or {}
    if "gpu-fraction" in ann:
        f = float(ann["gpu-fraction"])
        return f, f * (memory or 0)
    if "gpu-memory" in ann:
        m = int(ann["gpu-memory"])
        return m / memory if memory else 1.0, float(m)
    return None


def check(scenario: Shared, config: SchedulerConfig | None = None) -> list[tuple]:
    registry = register_builtins()
    config = config or default_config(registry)
    clock = ManualClock()
    objects = scenario.objects()
    cluster = load_cluster(objects, clock)
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    decisions = []
    for number in range(SESSIONS):
        if number:
            for pod in cluster.list(POD):
                meta, spec = pod["metadata"], pod.get("spec") or {}
                if meta.get("deletionTimestamp"):
                    cluster.delete(POD, meta["namespace"], meta["name"])
                elif spec.get("nodeName") and (pod.get("status") or {}).get("phase", "Pending") == "Pending":
                    cluster.replace({**pod, "status": {**(pod.get("status") or {}), "phase": "Running"}})
            clock.advance(config.schedule_period)
        result = scheduler.run_once()
        evicts = sorted(e.pod for e in result.effects if isinstance(e, Evict))
        decisions.append((dict(result.placed), evicts, dict(result.reservations)))
        if evicts:
            event("evicted")
        if any(k.startswith("default/p-") for k in result.placed):
            event("a pending sharer or whole-GPU pod bound")
        if result.reservations:
            event("pipelined")
        assert scheduler.cache.check(clock.now()) == []
        pods = cluster.list(POD)
        per_gpu: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
        whole: dict[str, int] = defaultdict(int)
        reserved: dict[str, set[str]] = defaultdict(set)
        for pod in pods:
            node = pod["spec"].get("nodeName")
            if not node:
                continue
            labels = pod["metadata"].get("labels") or {}
            if labels.get("app") == RESERVATION_APP:
                reserved[node].add(labels[GPU_GROUP])
                continue
            req = pod["spec"]["containers"][0].get("resources", {}).get("requests", {})
            whole[node] += int(req.get(GPU, 0))
            share = _share(pod, scenario.nodes[node][1])
            if share is None:
                continue
            groups = groups_of(labels)
            assert groups, f"{pod['metadata']['name']}: a bound sharer names its GPU"
            for group in groups:
                per_gpu[(node, group)].append(share)
                if not pod["metadata"].get("deletionTimestamp"):
                    assert group in reserved_groups(pods, node), (node, group, "no reservation pod")
        for (node, group), shares in per_gpu.items():
            memory = scenario.nodes[node][1]
            assert sum(f for f, _ in shares) <= 1.0 + 1e-6, (node, group, shares)
            if memory:
                assert sum(m for _, m in shares) <= memory + 1e-6, (node, group, shares, memory)
        for node, (gpus, _) in scenario.nodes.items():
            groups = {g for (n, g) in per_gpu if n == node} | reserved[node]
            assert whole[node] + len(groups) <= gpus, (node, whole[node], sorted(groups), gpus)
    return decisions


def reserved_groups(pods: list[dict[str, Any]], node: str) -> set[str]:
    return {p["metadata"]["labels"][GPU_GROUP] for p in pods
            if p["spec"].get("nodeName") == node
            and (p["metadata"].get("labels") or {}).get("app") == RESERVATION_APP}


@settings(max_examples=150, deadline=None)
@given(shared())
def test_no_gpu_is_shared_beyond_its_whole_or_its_memory(scenario: Shared) -> None:
    decisions = check(scenario)
    assert check(scenario) == decisions


def without_gpusharing() -> SchedulerConfig:
    config = default_config(register_builtins())
    tiers = tuple(tuple(p for p in tier if p.name != "gpusharing") for tier in config.tiers)
    return attrs.evolve(config, tiers=tiers)


@settings(max_examples=80, deadline=None)
@given(contended())
def test_pods_without_fractions_are_scheduled_as_before(scenario: Any) -> None:
    """The gpusharing plugin, and the sharing code paths it drives, change
    nothing for clusters where no pod shares a GPU."""

    def decisions(config: SchedulerConfig | None) -> list[tuple]:
        return [(dict(r.placed), sorted(e.pod for e in r.effects if isinstance(e, Evict)),
                 dict(r.reservations), sorted(map(repr, r.effects)))
                for r, _ in sessions(scenario.objects(), config)]

    assert decisions(None) == decisions(without_gpusharing())
