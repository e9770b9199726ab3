"""Node selection decides as it did when it scanned every node, bit for bit.

NodeSelection keeps, per class of tasks, its answers ranked and refreshed
only on the rows touched since the class last asked. The reference
(tests/unit/reference_selection.py, the scanning selection as it was) is
asked the same questions over the same session at every step of random
placement sequences on random clusters -- placements, pipelined ones,
evictions, rollbacks, room held for starving gangs, topology domains, a rule
over other pods for some tasks, the touch log cut short, pods asking for part
of a GPU (whose devices change with their node's row) -- and must give the
same node every time, ties (alike nodes, named out of row order) included.

Run more examples on demand:
    KAISCHED_SELECTION_EXAMPLES=2000 python -m pytest tests/unit/test_selection_equivalence.py
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaisched.api.task import TaskInfo
from kaisched.api.types import EVICTABLE_STATUSES, TaskStatus
from kaisched.builtins.catalog import register_builtins
from kaisched.framework import Hook, Session, Statement, parse_config
from kaisched.framework.effects import Cause
from kaisched.framework.selection import Choice, NodeSelection

from .conftest import Obj, build_node, build_pod, snapshot, taint
from .reference_selection import NodeSelection as ScanningSelection

EXAMPLES = int(os.environ.get("KAISCHED_SELECTION_EXAMPLES", "60"))
EQUIVALENCE = settings(max_examples=EXAMPLES, deadline=None,
                       suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

ZONE = "topology.kubernetes.io/zone"
REGISTRY = register_builtins()
CONFIG = """\
actions: [allocate]
tiers:
  - plugins: [{name: priority}, {name: gang}]
  - plugins:
    - {name: proportion}
    - {name: predicates}
    - {name: nodeorder, arguments: {strategy: %s}}
    - {name: nodeaffinity}
    - {name: gpusharing}
"""
# Node shapes: few, so that many nodes are alike and their scores tie.
SHAPES = [dict(cpu=4), dict(cpu=8), dict(cpu=8, gpu=4), dict(cpu=16, gpu=8)]
# Pod shapes, and what they may ask of nodes beyond room.
REQUESTS = [dict(cpu="1"), dict(cpu="2"), dict(cpu="500m"), dict(cpu="3", gpu=1),
            dict(cpu="1", gpu=2)]


# Shares of a GPU as KAI's users ask for them (the GPU nodes' memory: 40960 MiB).
SHARES = [{"gpu-fraction": "0.5"}, {"gpu-fraction": "0.25"}, {"gpu-fraction": "0.75"},
          {"gpu-memory": "20480"}, {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}]


@st.composite
def clusters(draw: st.DrawFn) -> list[Obj]:
    count = draw(st.integers(1, 24))
    # Names drawn apart from creation order: row order is name order.
    names = draw(st.lists(st.integers(0, 999), min_size=count, max_size=count, unique=True))
    objs: list[Obj] = []
    nodes = []
    gpu_nodes = set()
    for i, number in enumerate(names):
        name = f"n{number:03d}"
        nodes.append(name)
        shape = SHAPES[draw(st.integers(0, len(SHAPES) - 1))]
        memory = {"nvidia.com/gpu.memory": "40960"} if shape.get("gpu") and draw(st.booleans()) else {}
        if shape.get("gpu"):
            gpu_nodes.add(name)
        objs.append(build_node(
            name, **shape, pods=draw(st.sampled_from([None, None, 3])),
            labels={ZONE: f"z{i % 2}", "kubernetes.io/hostname": name, **memory},
            taints=[taint("dedicated", "x")] if draw(st.integers(0, 7)) == 0 else (),
            ready=draw(st.integers(0, 11)) > 0, unschedulable=draw(st.integers(0, 11)) == 0))
    for p in range(draw(st.integers(0, 2 * count))):
        node = draw(st.sampled_from(nodes))
        # On a GPU node: now and then a sharer read back (the GPU its label names).
        share = draw(st.integers(0, 3 * 4 - 1)) if node in gpu_nodes else 4
        request = REQUESTS[draw(st.integers(0, len(REQUESTS) - 1 if share >= 4 else 2))]
        pod = build_pod(f"run-{p}", **request, node=node, group=f"run-{p % 5}")
        if share < 4:
            pod["metadata"]["annotations"].update(SHARES[share])
            pod["metadata"]["labels"]["runai-gpu-group"] = f"{node}-g{draw(st.integers(0, 1))}"
        if draw(st.integers(0, 4)) == 0:       # going away: room that comes back (pipelining)
            pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        objs.append(pod)
    for p in range(draw(st.integers(1, 12))):
        request = REQUESTS[draw(st.integers(0, len(REQUESTS) - 1))]
        extra: dict[str, Any] = {}
        kind = draw(st.integers(0, 5))
        if kind == 1:
            extra["node_selector"] = {ZONE: "z1"}
        elif kind == 2:
            extra["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        share = draw(st.integers(0, 2 * len(SHARES) - 1))
        if share < len(SHARES):     # part of a GPU instead of whole ones
            request = {k: v for k, v in request.items() if k != "gpu"}
        pod = build_pod(f"wait-{p}", **request, labels={"rule": "odd"} if kind == 3 else {},
                        **extra)
        if share < len(SHARES):
            pod["metadata"]["annotations"].update(SHARES[share])
        if kind == 4:
            pod["spec"]["affinity"] = {"nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "preference": {"matchExpressions": [
                        {"key": ZONE, "operator": "In", "values": ["z0"]}]}}]}}
        objs.append(pod)
    return objs


def odd_rows_only(task: TaskInfo, rows: np.ndarray) -> np.ndarray:
    """A rule over other pods for the tasks labelled rule=odd: their own path,
    sharing the class caches of the tasks alike but for the label."""
    return rows % 2 == 1


def labelled(task: TaskInfo) -> bool:
    return ("rule", "odd") in task.labels


def same(ours: Choice | None, theirs: Any) -> bool:
    """The two selections' answers (each module has its own Choice) agree."""
    if ours is None or theirs is None:
        return ours is None and theirs is None
    return (ours.node, ours.pipelined) == (theirs.node, theirs.pipelined)



STATEMENT_STEPS = ("evict", "checkpoint", "rollback")


def statement_step(step: str, ssn: Session, stmt: Statement, marks: list[int],
                   data: st.DataObject) -> None:
    """A random walk's step through the statement: evict a running task, mark,
    or roll back to the last mark (what the selection must follow besides placements)."""
    if step == "evict":
        running = [t for j in ssn.cluster.jobs.values() for t in j.tasks.values()
                   if t.status in EVICTABLE_STATUSES and t.node_name]
        if running:
            stmt.evict(data.draw(st.sampled_from(running)), Cause.PREEMPT)
    elif step == "checkpoint":
        marks.append(stmt.checkpoint())
    elif step == "rollback" and marks:
        stmt.rollback(marks.pop())

@EQUIVALENCE
@given(clusters(), st.sampled_from(["binpack", "spread"]), st.booleans(), st.data())
def test_selection_decides_as_the_full_scan(objs: list[Obj], strategy: str, rule: bool,
                                            data: st.DataObject) -> None:
    config = parse_config(CONFIG % strategy, REGISTRY)
    ssn = Session(snapshot(objs), config, REGISTRY.build_plugins(config))
    if rule:
        ssn.hooks.register(Hook.POD_PREDICATE, odd_rows_only, "odd rows", when=labelled)
    new = NodeSelection(ssn.cluster, ssn.hooks, ssn.starving.rooms)
    old = ScanningSelection(ssn.cluster, ssn.hooks, ssn.starving.rooms)
    table = ssn.cluster.table
    size = len(table)
    stmt = ssn.statement()
    marks: list[int] = []
    for _ in range(data.draw(st.integers(1, 40))):
        pending = [t for j in ssn.cluster.jobs.values() for t in j.tasks.values()
                   if t.status is TaskStatus.PENDING]
        step = data.draw(st.sampled_from(
            ["select"] * 6 + ["evict", "rollback", "checkpoint", "hold", "release", "trim"]))
        if step == "select" and pending:
            task = data.draw(st.sampled_from(pending))
            idle_only = data.draw(st.booleans())
            within = None
            if data.draw(st.integers(0, 4)) == 0:
                within = np.array(data.draw(st.lists(st.booleans(), min_size=size, max_size=size)))
            ours = new.select(task, idle_only, within)
            assert same(ours, old.select(task, idle_only, within)), (task.key, idle_only, within)
            if ours is not None and data.draw(st.integers(0, 3)) > 0:
                if ours.pipelined:
                    stmt.pipeline(task, ours.node)
                else:
                    stmt.allocate(task, ours.node)
        elif step in STATEMENT_STEPS:
            statement_step(step, ssn, stmt, marks, data)
        elif step == "hold" and pending:
            room = np.zeros_like(table.alloc)
            rows = data.draw(st.lists(st.integers(0, size - 1), max_size=3))
            room[rows] = table.vector(data.draw(st.sampled_from(pending)).resreq)
            ssn.starving.reserve(data.draw(st.sampled_from(pending)).job, room)
            new.held_changed()
            old.held_changed()
        elif step == "release" and ssn.starving.rooms:
            ssn.starving.release(data.draw(st.sampled_from(sorted(ssn.starving.rooms))))
            new.held_changed()
            old.held_changed()
        elif step == "trim":
            table.trim_log()
    # Every class asked once more, after whatever came last.
    for job in ssn.cluster.jobs.values():
        for task in job.tasks.values():
            if task.status is TaskStatus.PENDING:
                assert same(new.select(task), old.select(task)), task.key


@pytest.mark.parametrize(("strategy", "second"), [("spread", "n2"), ("binpack", "n1")])
def test_ties_go_to_the_first_node_by_name(strategy: str, second: str) -> None:
    """Alike nodes score alike: the first by name wins, as argmax over the
    name-ordered rows picks it, whatever order the nodes were made in; once
    it is fuller, spread moves on to the next by name and binpack stays."""
    objs = [build_node(name, cpu=8) for name in ("n3", "n1", "n2")]
    objs += [build_pod("p", cpu="1"), build_pod("q", cpu="1")]
    config = parse_config(CONFIG % strategy, REGISTRY)
    ssn = Session(snapshot(objs), config, REGISTRY.build_plugins(config))
    tasks = {t.key: t for j in ssn.cluster.jobs.values() for t in j.tasks.values()}
    first = ssn.select_node(tasks["default/p"])
    assert first is not None and first.node == "n1" and not first.pipelined
    ssn.statement().allocate(tasks["default/p"], first.node)
    then = ssn.select_node(tasks["default/q"])
    assert then is not None and then.node == second
