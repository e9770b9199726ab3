"""Scheduling gates on the memory backend: a gated pod is never bound (the
backend refuses such a bind, as the API server does), the gang waits with a
condition naming the gates, and proceeds once they are removed. A gang whose
ungated pods meet its minimum starts without the gated one, which is neither
placed nor sent to the API.

Under kaisched/api/job.py: a job counts what may run without its gated pods."""
from __future__ import annotations

import pytest

from kaisched.api.clock import ManualClock
from kaisched.api.types import Blocker, JobKey
from kaisched.cluster.kinds import POD, PODGROUP
from kaisched.errors import ConflictError
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from tests.builders.objects import build_node, build_pod, build_podgroup, load_cluster, load_test_config

GATE = {"schedulingGates": [{"name": "example.com/quota"}]}


def _gang(min_member: int = 3) -> list[dict]:
    pods = [build_pod(f"t-{i}", gpu=1, group="train") for i in range(3)]
    pods[2]["spec"].update(GATE)
    return [build_node("gpu-a", cpu=8, gpu=8), build_podgroup("train", min_member), *pods]


def test_gang_waits_for_gates_then_proceeds() -> None:
    clock = ManualClock()
    cluster = load_cluster(_gang(), clock)
    config, registry = load_test_config()
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    scheduler.keep_session = True
    first = scheduler.run_once()
    assert not first.placed
    assert scheduler.last_session is not None
    assert scheduler.last_session.blockers[JobKey("default/train")] is Blocker.GATES
    scheduler.keep_session = False
    cond = next(c for c in cluster.get(PODGROUP, "default", "train")["status"]["conditions"]
                if c["type"] == "Scheduled")
    assert "example.com/quota" in cond["message"] and cond["status"] == "False"
    cluster.patch(POD, "default", "t-2", {"spec": {"schedulingGates": None}})
    clock.advance(1.0)
    second = scheduler.run_once()
    assert sorted(second.placed) == ["default/t-0", "default/t-1", "default/t-2"]
    assert all(cluster.get(POD, "default", f"t-{i}")["spec"].get("nodeName") == "gpu-a"
               for i in range(3))


def test_memory_backend_refuses_a_gated_bind() -> None:
    cluster = load_cluster(_gang())
    with pytest.raises(ConflictError, match="scheduling gates"):
        cluster.bind("default", "t-2", "", "gpu-a")


def test_a_gang_that_starts_leaves_its_gated_pod_alone() -> None:
    clock = ManualClock()
    cluster = load_cluster(_gang(min_member=2), clock)      # room for all three
    config, registry = load_test_config()
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    first = scheduler.run_once()
    assert sorted(first.placed) == ["default/t-0", "default/t-1"]
    assert not first.report.failed                          # no bind of t-2 was tried
    assert cluster.get(POD, "default", "t-2")["spec"].get("nodeName") is None
    cluster.patch(POD, "default", "t-2", {"spec": {"schedulingGates": None}})
    clock.advance(1.0)
    assert sorted(scheduler.run_once().placed) == ["default/t-2"]
