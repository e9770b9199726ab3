"""One object never stops a cycle, over random clusters: beside well-formed
gangs, hypothesis throws malformed, half-made and contradictory objects at
the scheduler -- PodGroups without pods (with minResources too large, or
naming a queue that does not exist), pods naming missing queues or missing
PodGroups, queues whose parents are missing (or that are each other's
parent), subgroup trees that contradict the pods (subgroups no pod is in,
pods in subgroups not declared, minimums beyond the pods, a parent that is
not there, minMember 0, -1 or "abc") -- through every action, the enqueue
gate included, on the memory backend. After each of two sessions:
- no cycle raises;
- every well-formed gang is placed whole (the cluster has room for every
  pod of every object, so nothing of the malformed can crowd it out);
- no gang is partly bound, malformed ones included;
- a malformed job that is not placed says why (a condition or its pods').
Errors the guard caught (a job that lost its turn) are reported as events;
they must never be about a well-formed gang, and, once the others are
checked, there must be none: a malformed object is told what is wrong, as a
value.
"""
from __future__ import annotations

from typing import Any

import attrs
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD, PODGROUP
from kaisched.framework import SchedulerConfig, default_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from tests.builders.objects import build_node, build_pod, build_podgroup, build_queue, load_cluster

Obj = dict[str, Any]
NODES, NODE_CPU = 4, 32         # room for every pod the generators can make


def with_enqueue() -> SchedulerConfig:
    config = default_config(register_builtins())
    return attrs.evolve(config, actions=("enqueue", *config.actions, "consolidation"))


CONFIGS = {"default": lambda: default_config(register_builtins()), "enqueue": with_enqueue}


@attrs.frozen
class Case:
    good: dict[str, int]            # well-formed gang -> minMember (all its pods must bind)
    objects: tuple[Obj, ...]
    broken: tuple[str, ...]         # what each malformed object is, for the report

    def all_objects(self) -> list[Obj]:
        return [build_node(f"n{i}", cpu=NODE_CPU) for i in range(NODES)] + list(self.objects)


def _pod(name: str, group: str | None = None, queue: str | None = None,
         subgroup: str | None = None, priority: int | None = None, cpu: str = "1") -> Obj:
    pod = build_pod(name, cpu=cpu, group=group, queue=queue, priority=priority,
                    creation="2025-12-31T12:00:00Z")
    if subgroup is not None:
        pod["metadata"]["labels"]["kaisched.io/subgroup"] = subgroup
    return pod


@st.composite
def broken_objects(draw: st.DrawFn, n: int) -> tuple[str, list[Obj]]:
    """One malformed, half-made or contradictory thing, as objects named b<n>-..."""
    kind = draw(st.sampled_from([
        "podgroup-without-pods", "podgroup-without-pods-min-resources", "podgroups-without-pods-capped",
        "pods-missing-queue",
        "pods-missing-podgroup", "queue-missing-parent", "queue-cycle", "subgroups-no-pods",
        "pods-undeclared-subgroup", "subgroup-min-beyond-pods", "subgroup-missing-parent",
        "inner-subgroup-min-subgroups", "bad-min-member", "podgroup-missing-queue-with-pods",
        "gang-group-missing", "min-resources-contradicts"]))
    name = f"b{n}"
    size = draw(st.integers(1, 3))
    prio = draw(st.sampled_from([None, 0, 10]))
    out: list[Obj] = []
    if kind == "podgroup-without-pods":
        out.append(build_podgroup(name, min_member=draw(st.integers(1, 4)),
                                  queue=draw(st.sampled_from([None, "ghost", "orphan"]))))
    elif kind == "podgroup-without-pods-min-resources":
        cpu = draw(st.sampled_from(["1", "64", "10000"]))
        queue = draw(st.sampled_from([None, "ghost", "team", "capped-a", "capped-b"]))
        out.append(build_podgroup(name, min_member=2, queue=queue, minResources={"cpu": cpu}))
    elif kind == "podgroups-without-pods-capped":     # siblings under one limit, both asking it all
        for side in ("a", "b"):
            out.append(build_podgroup(f"{name}{side}", min_member=1, queue=f"capped-{side}",
                                      minResources={"cpu": draw(st.sampled_from(["1", "2"]))}))
    elif kind == "pods-missing-queue":
        out.append(build_podgroup(name, min_member=size, queue="ghost"))
        out += [_pod(f"{name}-{i}", name, "ghost", priority=prio) for i in range(size)]
    elif kind == "pods-missing-podgroup":
        out += [_pod(f"{name}-{i}", f"{name}-nobody", priority=prio) for i in range(size)]
    elif kind == "queue-missing-parent":
        out.append(build_queue(name, parent=f"{name}-ghost"))
        out.append(build_podgroup(name, min_member=size, queue=name))
        out += [_pod(f"{name}-{i}", name, name) for i in range(size)]
    elif kind == "queue-cycle":
        out.append(build_queue(f"{name}-a", parent=f"{name}-b"))
        out.append(build_queue(f"{name}-b", parent=f"{name}-a"))
        out.append(build_podgroup(name, min_member=size, queue=f"{name}-a"))
        out += [_pod(f"{name}-{i}", name, f"{name}-a") for i in range(size)]
    elif kind == "subgroups-no-pods":
        out.append(build_podgroup(name, min_member=size, subGroups=[
            {"name": "master", "minMember": 1}, {"name": "worker", "minMember": size}]))
        out += [_pod(f"{name}-{i}", name) for i in range(size)]
    elif kind == "pods-undeclared-subgroup":
        out.append(build_podgroup(name, min_member=size, subGroups=[{"name": "worker", "minMember": 1}]))
        out += [_pod(f"{name}-{i}", name, subgroup=draw(st.sampled_from(["worker", "nope"])))
                for i in range(size)]
    elif kind == "subgroup-min-beyond-pods":
        out.append(build_podgroup(name, min_member=1, subGroups=[
            {"name": "worker", "minMember": size + draw(st.integers(1, 3))}]))
        out += [_pod(f"{name}-{i}", name, subgroup="worker") for i in range(size)]
    elif kind == "subgroup-missing-parent":
        out.append(build_podgroup(name, min_member=size, subGroups=[
            {"name": "worker", "minMember": size, "parent": "ghost"}]))
        out += [_pod(f"{name}-{i}", name, subgroup="worker") for i in range(size)]
    elif kind == "inner-subgroup-min-subgroups":
        out.append(build_podgroup(name, min_member=size, subGroups=[
            {"name": "top", "minSubGroup": draw(st.integers(0, 4))},
            {"name": "a", "minMember": 1, "parent": "top"},
            {"name": "b", "minMember": draw(st.integers(0, 2)), "parent": draw(st.sampled_from(["top", "a"]))}]))
        out += [_pod(f"{name}-{i}", name, subgroup=draw(st.sampled_from(["a", "b", "top"])))
                for i in range(size)]
    elif kind == "bad-min-member":
        out.append(build_podgroup(name, min_member=draw(st.sampled_from([0, -1, "abc", None, 2.5]))))
        out += [_pod(f"{name}-{i}", name) for i in range(size)]
    elif kind == "podgroup-missing-queue-with-pods":
        out.append(build_podgroup(name, min_member=size, queue="ghost"))
        out += [_pod(f"{name}-{i}", name) for i in range(size)]
    elif kind == "gang-group-missing":
        out.append(build_podgroup(name, min_member=size, gangGroup=[f"default/{name}", "default/ghost"]))
        out += [_pod(f"{name}-{i}", name) for i in range(size)]
    else:   # minResources larger than the gang's own pods ask, or than the cluster
        out.append(build_podgroup(name, min_member=size, minResources={
            "cpu": draw(st.sampled_from(["0", "1000", "-1"]))}))
        out += [_pod(f"{name}-{i}", name) for i in range(size)]
    return kind, out


@st.composite
def cases(draw: st.DrawFn) -> Case:
    # team holds well-formed gangs; capped (2 cpu, inherited by its children)
    # only what is malformed.
    objects: list[Obj] = [build_queue("team", resources={"cpu": {"quota": 8}}),
                          build_queue("capped", resources={"cpu": {"limit": 2}}),
                          build_queue("capped-a", parent="capped"), build_queue("capped-b", parent="capped")]
    good: dict[str, int] = {}
    for j in range(draw(st.integers(1, 4))):
        name, size = f"good{j}", draw(st.integers(1, 4))
        min_member = draw(st.integers(1, size))
        queue = draw(st.sampled_from([None, "team"]))
        objects.append(build_podgroup(name, min_member=min_member, queue=queue))
        objects += [_pod(f"{name}-{i}", name, queue, cpu=draw(st.sampled_from(["500m", "1", "2"])))
                    for i in range(size)]
        good[name] = size
    broken: list[str] = []
    for n in range(draw(st.integers(1, 6))):
        kind, made = draw(broken_objects(n))
        broken.append(kind)
        objects += made
    order = draw(st.permutations(range(len(objects))))
    return Case(good, tuple(objects[i] for i in order), tuple(broken))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.sampled_from(sorted(CONFIGS)))
def test_malformed_objects_never_stop_the_others(case: Case, config_name: str) -> None:
    for kind in case.broken:
        event(f"broken: {kind}")
    registry = register_builtins()
    config = CONFIGS[config_name]()
    clock = ManualClock()
    cluster = load_cluster(case.all_objects(), clock)
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    for number in range(2):
        if number:
            clock.advance(config.schedule_period)
        result = scheduler.run_once()          # never raises
        for error in result.errors:
            event(f"lost its turn: {error.action}: {error.message.split(':')[0]}")
            assert not error.job.startswith("default/good"), error
        errors = list(result.errors)
        pods = cluster.list(POD)
        placed: dict[str, int] = {}
        for pod in pods:
            if pod["spec"].get("nodeName"):
                group = (pod["metadata"].get("annotations") or {}).get("kaisched.io/pod-group")
                key = group or pod["metadata"]["name"]
                placed[key] = placed.get(key, 0) + 1
        # every well-formed gang is placed whole, from the first session on
        for name, size in case.good.items():
            assert placed.get(name, 0) == size, (name, placed, case.broken)
        # no gang partly placed, malformed ones included (their own minimum, where they have one)
        for group in cluster.list(PODGROUP):
            name, min_member = group["metadata"]["name"], group["spec"].get("minMember")
            if isinstance(min_member, int) and min_member > 0 and not group["spec"].get("subGroups"):
                assert placed.get(name, 0) in (0,) or placed[name] >= min_member, (name, placed)
        # a malformed gang left waiting says why
        for pod in pods:
            if not pod["spec"].get("nodeName") and pod["metadata"]["name"].startswith("b"):
                said = [c for c in (pod.get("status") or {}).get("conditions") or ()
                        if c.get("type") == "PodScheduled" and c.get("status") == "False"]
                group = (pod["metadata"].get("annotations") or {}).get("kaisched.io/pod-group")
                pg = cluster.get(PODGROUP, "default", group) if group else None
                told = [c for c in ((pg or {}).get("status") or {}).get("conditions") or ()
                        if c.get("status") == "False"]
                assert said or told, (pod["metadata"]["name"], case.broken)
        # and what is wrong with an object is a value it is told, never an exception
        # (the guard above kept the others scheduled; the bug is still one to fix)
        assert not errors, [(e.job, e.action, e.trace) for e in errors]
