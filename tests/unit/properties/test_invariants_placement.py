"""Placement rules over random small clusters (hypothesis): after a cycle no
newly placed pod breaks a required rule (inter-pod anti-affinity, its symmetric
form, required affinity, DoNotSchedule spread, host ports, a required
topology level), and a rolled-back statement leaves no trace in what the
session answers."""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import attrs
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kaisched.api.clock import ManualClock
from kaisched.api.types import TaskStatus
from kaisched.builtins.catalog import register_builtins
from kaisched.framework import Session, default_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from tests.builders.objects import build_node, build_pod, build_podgroup, load_cluster, snapshot

HOST, RACK, ZONE = "kubernetes.io/hostname", "rack", "zone"
KEYS = (HOST, RACK, ZONE)
APPS = ("a", "b", "c")


@attrs.frozen
class Pod:
    name: str
    app: str
    cpu: int                       # millicores
    anti: tuple[tuple[str, str], ...] = ()      # (app selected, topology key)
    affinity: tuple[tuple[str, str], ...] = ()
    port: int | None = None
    node: str | None = None        # running there already
    foreign: bool = False          # another scheduler's
    gang: str | None = None


@attrs.frozen
class World:
    nodes: dict[str, dict[str, str]]             # name -> labels
    cpu: dict[str, int]
    pods: list[Pod]
    spread: dict[str, tuple[int, str]]           # app -> (maxSkew, key): every pod of it
    gangs: dict[str, tuple[int, str | None]]     # name -> (minMember, required level)

    def objects(self) -> list[dict[str, Any]]:
        out = [build_node(n, cpu=f"{self.cpu[n]}m", labels=labels) for n, labels in self.nodes.items()]
        for name, (size, level) in self.gangs.items():
            extra = {"topology": {"required": level}} if level else {}
            out.append(build_podgroup(name, min_member=size, **extra))
        for p in self.pods:
            raw = build_pod(p.name, cpu=f"{p.cpu}m", labels={"app": p.app}, node=p.node,
                            group=p.gang, scheduler="other" if p.foreign else "kaisched")
            spec = raw["spec"]
            affinity: dict[str, Any] = {}
            if p.anti:
                affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}}
                    for app, key in p.anti]}
            if p.affinity:
                affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}}
                    for app, key in p.affinity]}
            if affinity:
                spec["affinity"] = affinity
            if p.app in self.spread:
                skew, key = self.spread[p.app]
                spec["topologySpreadConstraints"] = [{
                    "maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": p.app}}}]
            if p.port:
                spec["containers"][0]["ports"] = [{"containerPort": p.port, "hostPort": p.port}]
            out.append(raw)
        return out


@st.composite
def worlds(draw: st.DrawFn) -> World:
    count = draw(st.integers(2, 7))
    nodes = {f"n{i}": {HOST: f"n{i}", RACK: f"r{i // 2}", ZONE: f"z{i // 4}"} for i in range(count)}
    cpu = {n: draw(st.sampled_from([2000, 4000, 8000])) for n in nodes}
    spread = {app: (draw(st.integers(1, 2)), draw(st.sampled_from(KEYS)))
              for app in APPS if draw(st.booleans())}
    pods: list[Pod] = []
    gangs: dict[str, tuple[int, str | None]] = {}
    terms = st.lists(st.tuples(st.sampled_from(APPS), st.sampled_from(KEYS)), max_size=1)
    for i in range(draw(st.integers(0, 3))):          # already running, possibly foreign
        pods.append(Pod(f"old{i}", draw(st.sampled_from(APPS)), 500,
                        anti=tuple(draw(terms)), node=draw(st.sampled_from(sorted(nodes))),
                        foreign=draw(st.booleans()), port=draw(st.sampled_from([None, 80]))))
    for g in range(draw(st.integers(1, 4))):
        size = draw(st.integers(1, 3))
        name = f"g{g}"
        gangs[name] = (size, draw(st.sampled_from([None, None, RACK, ZONE])))
        app = draw(st.sampled_from(APPS))
        anti, affinity = tuple(draw(terms)), tuple(draw(terms))
        port = draw(st.sampled_from([None, None, 80, 81]))
        for t in range(size + draw(st.integers(0, 1))):
            pods.append(Pod(f"{name}-{t}", app, draw(st.sampled_from([250, 1000, 2000])),
                            anti=anti, affinity=affinity, port=port, gang=name))
    return World(nodes, cpu, pods, spread, gangs)


def _run(world: World) -> dict[str, str]:
    """pod name -> node after one allocate + backfill cycle, running pods included."""
    clock = ManualClock()
    cluster = load_cluster(world.objects(), clock)
    registry = register_builtins()
    config = attrs.evolve(default_config(registry), actions=("allocate", "backfill"))
    result = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now)).run_once()
    placed = {p.name: p.node for p in world.pods if p.node}
    placed.update({key.split("/", 1)[1]: node for key, node in result.placed.items()})
    return placed


@settings(max_examples=80, deadline=None)
@given(worlds())
def test_no_placement_breaks_a_required_rule(world: World) -> None:
    placed = _run(world)
    pods = {p.name: p for p in world.pods}
    new = {n for n in placed if pods[n].node is None}

    def dom(node: str, key: str) -> str:
        return world.nodes[node][key]

    def near(name: str, key: str, app: str) -> list[str]:
        return [o for o, n in placed.items() if o != name and pods[o].app == app
                and dom(n, key) == dom(placed[name], key)]

    for name in new:
        pod = pods[name]
        for app, key in pod.anti:                        # its own anti-affinity
            assert not near(name, key, app), (name, app, key, placed)
        for other, node in placed.items():               # the symmetric rule
            if other != name:
                for app, key in pods[other].anti:
                    assert not (app == pod.app and dom(node, key) == dom(placed[name], key)), \
                        (name, other, key, placed)
        for app, key in pod.affinity:                     # affinity (unless it is the first)
            if app != pod.app:
                assert near(name, key, app), (name, app, key, placed)
        if pod.port:                                      # host ports
            assert not [o for o, n in placed.items() if o != name and n == placed[name]
                        and pods[o].port == pod.port], (name, placed)
        if pod.gang and world.gangs[pod.gang][1]:         # a required topology level
            level = world.gangs[pod.gang][1]
            mates = {dom(placed[m], level) for m in new if pods[m].gang == pod.gang}
            assert len(mates) == 1, (pod.gang, mates)
    for app, (skew, key) in world.spread.items():         # DoNotSchedule spread
        if not any(pods[n].app == app for n in new):
            continue
        counts = Counter({dom(n, key): 0 for n in world.nodes})
        counts.update(dom(placed[o], key) for o in placed if pods[o].app == app)
        low = min(counts.values())
        for name in new:
            if pods[name].app == app:
                assert counts[dom(placed[name], key)] <= low + skew, (app, dict(counts), placed)
    # gangs stay whole: a gang is placed to its minimum or not at all
    for gang, (size, _) in world.gangs.items():
        got = sum(1 for n in new if pods[n].gang == gang)
        assert got == 0 or got >= size, (gang, got, size)


def _answers(ssn: Session, tasks: list) -> list:
    table = ssn.cluster.table
    out = [table.used.copy(), table.future.copy()]
    for task in tasks:
        choice = ssn.select_node(task)
        out += [choice, ssn.static_mask(task).copy(), ssn.explain_task(task)]
    return out


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y for x, y in zip(a, b, strict=True))


@settings(max_examples=60, deadline=None)
@given(worlds(), st.randoms(use_true_random=False))
def test_rollback_leaves_no_trace(world: World, rnd: Any) -> None:
    registry = register_builtins()
    config = default_config(registry)
    ssn = Session(snapshot(world.objects()), config, registry.build_plugins(config))
    pending = [t for job in ssn.cluster.jobs.values() for t in job.tasks.values()
               if t.status is TaskStatus.PENDING]
    before = _answers(ssn, pending)
    stmt = ssn.statement()
    mark = stmt.checkpoint()
    moved = defaultdict(int)
    for task in rnd.sample(pending, len(pending)):
        choice = ssn.select_node(task)
        if choice is not None:                 # every rule counts it at once ...
            stmt.allocate(task, choice.node)
            moved[choice.node] += 1
    if moved:
        assert not _same(before, _answers(ssn, pending)) or not pending
    stmt.rollback(mark)                        # ... and forgets it on rollback
    assert _same(before, _answers(ssn, pending))
