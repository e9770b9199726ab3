"""Random clusters and statement walks for the node selection tests: the
selection against a full refresh, and the plugins' one-row forms against their
array forms, draw the same clusters."""
from __future__ import annotations

import os
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from kaisched.api.task import TaskInfo
from kaisched.api.types import EVICTABLE_STATUSES
from kaisched.builtins.catalog import register_builtins
from kaisched.framework import Session, Statement
from kaisched.framework.effects import Cause
from tests.builders.objects import DEFAULT_TIERS, Obj, build_node, build_pod, taint

EXAMPLES = int(os.environ.get("KAISCHED_SELECTION_EXAMPLES", "60"))
EQUIVALENCE = settings(max_examples=EXAMPLES, deadline=None,
                       suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

ZONE = "topology.kubernetes.io/zone"
REGISTRY = register_builtins()
# The unit tests' default tiers, with the plugins whose node answers selection caches.
CONFIG = "actions: [allocate]\n" + DEFAULT_TIERS + "    - {name: nodeaffinity}\n    - {name: gpusharing}\n"
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


@st.composite
def crowded_gpus(draw: st.DrawFn) -> list[Obj]:
    """Nodes of one or two GPUs, most of them shared already and some full:
    where a share fits only on a shared GPU's last room, or nowhere."""
    objs: list[Obj] = []
    for i in range(draw(st.integers(1, 6))):
        name = f"n{i}"
        gpus = draw(st.integers(1, 2))
        objs.append(build_node(name, cpu=16, gpu=gpus, labels={"nvidia.com/gpu.memory": "40960"}))
        for g in range(gpus):
            for k in range(draw(st.integers(0, 3))):
                pod = build_pod(f"run-{i}-{g}-{k}", cpu="1", node=name, group=f"run-{i}-{g}-{k}",
                                annotations=SHARES[draw(st.integers(0, 3))])
                pod["metadata"]["labels"]["runai-gpu-group"] = f"{name}-g{g}"
                if draw(st.integers(0, 3)) == 0:
                    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                objs.append(pod)
    for p in range(draw(st.integers(1, 8))):
        objs.append(build_pod(f"wait-{p}", cpu="1", annotations=SHARES[draw(st.integers(0, 4))]))
    return objs


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
