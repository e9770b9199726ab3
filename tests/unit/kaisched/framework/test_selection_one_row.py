"""The one-row forms of the cached filters, idle tests and scores answer as
their array forms do, bit for bit.

Node selection refreshes the few rows a placement touched through each
callback's one-row form (plain Python, no numpy call per callback). Every
PREDICATE, IDLE and NODE_ORDER registration of the default plugins has one;
on random clusters (those of the selection equivalence test: shared GPUs,
taints, node selectors, preferred affinity, pods going away) and after random
placements, evictions and rollbacks, each one-row answer must equal the array
form's answer for that row -- a score to the last bit, as a tie between two
nodes is broken by row and a bit of difference would move a pod.
"""
from __future__ import annotations

import struct

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kaisched.api.types import TaskStatus
from kaisched.framework import Hook, Session, parse_config
from tests.builders.objects import Obj, build_node, build_pod, snapshot
from tests.builders.selection import (
    CONFIG,
    EQUIVALENCE,
    REGISTRY,
    STATEMENT_STEPS,
    clusters,
    crowded_gpus,
    statement_step,
)

# nodeorder over more than seven resources: numpy sums pairwise there, and the
# one-row form answers through the array form.
MANY_WEIGHTS = """\
    - {name: nodeorder, arguments: {strategy: binpack, weights: {a.io/x: 1, b.io/x: 0.3,
        c.io/x: 2, d.io/x: 0.7, e.io/x: 1.1}}}
"""


def bits(value: object) -> bytes:
    return struct.pack("<d", float(value))      # type: ignore[arg-type]


def check_every_form(ssn: Session) -> int:
    """Every one-row answer against the array form's, for every pending task
    and row; the number of answers compared."""
    table = ssn.cluster.table
    rows = np.arange(len(table))
    pending = [t for j in ssn.cluster.jobs.values() for t in j.tasks.values()
               if t.status is TaskStatus.PENDING]
    compared = 0
    for key in (Hook.PREDICATE, Hook.IDLE, Hook.NODE_ORDER):
        for reg in ssn.hooks.registrations(key):
            assert reg.one is not None, f"{key} {reg.label}: no one-row form"
            for task in pending:
                whole = np.broadcast_to(np.asarray(reg.fn(task, rows)), rows.shape)
                for row in rows.tolist():
                    one = reg.one(task, row)
                    if key is Hook.NODE_ORDER:
                        assert bits(one) == bits(whole[row]), (reg.label, task.key, row, one, whole[row])
                    else:
                        assert bool(one) == bool(whole[row]), (reg.label, task.key, row, one)
                    compared += 1
    for task in pending:        # the table's own fit, against idle and future room
        for room in (table.idle, table.future):
            fits = table.request_fits(task.resreq, room)
            assert [table.request_fits_row(task.resreq, room, r) for r in rows.tolist()] == fits.tolist()
    return compared


@EQUIVALENCE
@given(st.one_of(clusters(), crowded_gpus()), st.sampled_from(["binpack", "spread"]), st.data())
def test_one_row_forms_answer_as_the_array_forms(objs: list[Obj], strategy: str,
                                                 data: st.DataObject) -> None:
    config = parse_config(CONFIG % strategy, REGISTRY)
    ssn = Session(snapshot(objs), config, REGISTRY.build_plugins(config))
    stmt = ssn.statement()
    marks: list[int] = []
    check_every_form(ssn)
    for _ in range(data.draw(st.integers(1, 12))):
        pending = [t for j in ssn.cluster.jobs.values() for t in j.tasks.values()
                   if t.status is TaskStatus.PENDING]
        step = data.draw(st.sampled_from(["place"] * 4 + ["evict", "checkpoint", "rollback"]))
        if step == "place" and pending:
            task = data.draw(st.sampled_from(pending))
            choice = ssn.select_node(task)
            if choice is not None:
                (stmt.pipeline if choice.pipelined else stmt.allocate)(task, choice.node)
        elif step in STATEMENT_STEPS:
            statement_step(step, ssn, stmt, marks, data)
        check_every_form(ssn)


def test_nodeorder_over_many_resources_answers_as_its_array_form() -> None:
    """Eight weighted resources and more: the one-row form is still the array
    form's answer (numpy's pairwise sum is not a left-to-right one)."""
    extra = {"a.io/x": 3, "b.io/x": 7, "c.io/x": 5, "d.io/x": 11, "e.io/x": 2}
    objs = [build_node(f"n{i}", cpu=8, gpu=i % 3, extra=extra) for i in range(6)]
    objs += [build_pod("p", cpu="1500m", gpu=1, extra={"a.io/x": 1}),
             build_pod("q", cpu="3", memory="5Gi", extra={"c.io/x": 2, "e.io/x": 1})]
    config = parse_config(CONFIG.replace(
        "    - {name: nodeorder, arguments: {strategy: %s}}\n", MANY_WEIGHTS), REGISTRY)
    ssn = Session(snapshot(objs), config, REGISTRY.build_plugins(config))
    table = ssn.cluster.table
    assert sum(1 for d in table.dims if d.endswith(".io/x")) == 5
    rng = np.random.default_rng(7)
    table.used[:] = rng.random(table.used.shape) * table.alloc     # fill of every kind
    assert check_every_form(ssn) > 0
