"""Node selection decides as a full refresh would, bit for bit.

NodeSelection keeps, per class of tasks, its answers ranked and refreshed
only on the rows touched since the class last asked, a row at a time or a
few together, through the plugins' one-row forms where a refresh is of a
few rows (their array forms otherwise). The oracle
asks every hook afresh about every row, through the registry's combinators
(every filter ANDed, every score summed in registration order), and picks
by a scan: at every step of random placement sequences on random clusters --
placements, pipelined ones, evictions, rollbacks, room held for starving
gangs, topology domains, a rule over other pods for some tasks, the touch
log cut short, pods asking for part of a GPU (whose devices change with
their node's row), GPUs shared nearly full -- both must give the same node,
ties (alike nodes, named out of row order) included, and the class's cached
answers must be the fresh ones, every score to the last bit.

Run more examples on demand:
    KAISCHED_SELECTION_EXAMPLES=2000 python -m pytest tests/unit/kaisched/framework/test_selection.py
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaisched.api.task import TaskInfo
from kaisched.api.types import TaskStatus
from kaisched.framework import Hook, Session, parse_config
from kaisched.framework.selection import Choice, NodeSelection
from tests.builders.objects import Obj, build_node, build_pod, snapshot
from tests.builders.selection import (
    CONFIG,
    EQUIVALENCE,
    REGISTRY,
    STATEMENT_STEPS,
    clusters,
    crowded_gpus,
    labelled,
    odd_rows_only,
    statement_step,
)


def fresh_answers(ssn: Session, task: TaskInfo) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every cached hook asked afresh about every row: (passes every filter,
    the room is idle now, score)."""
    table, hooks = ssn.cluster.table, ssn.hooks
    rows = np.arange(len(table))
    mask = hooks.mask(Hook.PREDICATE, task, rows)
    idle_fit = table.fits(table.vector(task.resreq), table.idle) & hooks.mask(Hook.IDLE, task, rows)
    return mask, idle_fit, hooks.score(Hook.NODE_ORDER, task, rows)


def full_refresh_select(ssn: Session, task: TaskInfo, idle_only: bool = False,
                        within: np.ndarray | None = None) -> Choice | None:
    """select() by brute force: fresh answers for every row, the room other
    gangs hold taken out, the rules over other pods the task is subject to,
    then the first best row of those with room idle now, else of those that
    pass (pipelined)."""
    table, hooks = ssn.cluster.table, ssn.hooks
    mask, idle_fit, score = fresh_answers(ssn, task)
    rooms = ssn.starving.rooms
    owner = task.job if task.job in rooms else None
    others = [room for job, room in rooms.items() if job != owner]
    if others:
        held = np.sum(others, axis=0)
        vec = table.vector(task.resreq)
        mask = mask & table.fits(vec, table.future - held)
        idle_fit = idle_fit & table.fits(vec, table.idle - held)
    if within is not None:
        mask = mask & within
    rows = np.flatnonzero(mask)
    subject = [r for r in hooks.registrations(Hook.POD_PREDICATE) if r.when is None or r.when(task)]
    for rule in subject:
        found = rule.fn(task, rows)
        if found is not None:
            rows = rows[found]
    if not len(rows):
        return None
    idle = idle_fit[rows]
    for fn in hooks.callbacks(Hook.POD_IDLE):
        found = fn(task, rows)
        if found is not None:
            idle = idle & found
    if not idle.any() and idle_only:
        return None
    if idle.any():
        rows = rows[idle]
    scores = score[rows]
    for fn in hooks.callbacks(Hook.POD_ORDER):
        scored = fn(task, rows)
        if scored is not None:
            scores = scores + scored
    return Choice(table.names[int(rows[int(np.argmax(scores))])], not idle.any())


def assert_cached_answers_are_fresh(ssn: Session, selection: NodeSelection, task: TaskInfo) -> None:
    """The class's cached answers, brought up to date, are every hook's fresh
    ones: filters and idle tests row for row, scores to the last bit."""
    cache = selection._refresh(task)
    mask, idle_fit, score = fresh_answers(ssn, task)
    assert cache.mask.tolist() == mask.tolist(), task.key
    assert cache.idle_fit.tolist() == idle_fit.tolist(), task.key
    assert cache.score.tobytes() == score.tobytes(), task.key



@EQUIVALENCE
@given(st.one_of(clusters(), crowded_gpus()), st.sampled_from(["binpack", "spread"]), st.booleans(),
       st.data())
def test_selection_decides_as_a_full_refresh(objs: list[Obj], strategy: str, rule: bool,
                                             data: st.DataObject) -> None:
    config = parse_config(CONFIG % strategy, REGISTRY)
    ssn = Session(snapshot(objs), config, REGISTRY.build_plugins(config))
    if rule:
        ssn.hooks.register(Hook.POD_PREDICATE, odd_rows_only, "odd rows", when=labelled)
    new = NodeSelection(ssn.cluster, ssn.hooks, ssn.starving, ssn.job_ends_by)
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
            assert ours == full_refresh_select(ssn, task, idle_only, within), \
                (task.key, idle_only, within)
            if data.draw(st.integers(0, 2)) == 0:
                assert_cached_answers_are_fresh(ssn, new, task)
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
        elif step == "release" and ssn.starving.rooms:
            ssn.starving.release(data.draw(st.sampled_from(sorted(ssn.starving.rooms))))
            new.held_changed()
        elif step == "trim":
            table.trim_log()
    # Every class asked once more, after whatever came last.
    for job in ssn.cluster.jobs.values():
        for task in job.tasks.values():
            if task.status is TaskStatus.PENDING:
                assert new.select(task) == full_refresh_select(ssn, task), task.key
                assert_cached_answers_are_fresh(ssn, new, task)


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
