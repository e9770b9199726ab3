"""The binder: transient failures are retried with backoff within a time
budget, permanent ones (a 409 included) are reported with the rest of the
gang's binds and never retried, and nothing is swallowed."""
from __future__ import annotations

import threading
import time

from kaisched.api.clock import ManualClock
from kaisched.api.types import JobKey, NodeName, PodKey
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import EVENT, POD
from kaisched.cluster.memory import MemoryCluster
from kaisched.errors import ConflictError, NotFoundError, TransientApiError
from kaisched.framework import default_config
from kaisched.framework.effects import Bind
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler


class FlakyCluster(MemoryCluster):
    """Our own seam: some binds fail a few times first, some always."""

    def __init__(self, first: dict[str, list[Exception]] | None = None,
                 always: dict[str, Exception] | None = None) -> None:
        super().__init__(ManualClock())
        self.first = first or {}
        self.always = always or {}
        self.attempts: dict[str, int] = {}

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self.attempts[name] = self.attempts.get(name, 0) + 1
        if name in self.always:
            raise self.always[name]
        if self.first.get(name):
            raise self.first[name].pop(0)
        super().bind(namespace, name, uid, node)


def gang(cluster: MemoryCluster) -> None:
    cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
                    "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}}})
    cluster.create({"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup",
                    "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 3}})
    for i in range(3):
        cluster.create({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"p{i}", "namespace": "default",
                                     "annotations": {"kaisched.io/pod-group": "g"}},
                        "spec": {"schedulerName": "kaisched", "containers": [
                            {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}})


def run(cluster: FlakyCluster, sleeps: list[float]):
    registry = register_builtins()
    binder = Binder(cluster, cluster.clock.now, retries=3, backoff=0.1, sleep=sleeps.append)
    scheduler = Scheduler(cluster, default_config(registry), registry, cluster.clock, binder)
    return scheduler.run_once()


def test_transient_bind_failures_are_retried_with_backoff() -> None:
    cluster = FlakyCluster({"p1": [TransientApiError("server error", 500),
                                   TransientApiError("too many requests", 429)]})
    gang(cluster)
    sleeps: list[float] = []
    result = run(cluster, sleeps)
    assert result.report.failed == []
    assert cluster.attempts["p1"] == 3
    assert sleeps == [0.1, 0.2]                      # exponential backoff
    assert all(cluster.get(POD, "default", f"p{i}")["spec"]["nodeName"] == "node-a"
               for i in range(3))


def test_a_permanent_failure_is_reported_with_the_other_binds() -> None:
    cluster = FlakyCluster(always={"p2": NotFoundError("node node-a not found")})
    gang(cluster)
    sleeps: list[float] = []
    result = run(cluster, sleeps)
    assert [f.effect.pod for f in result.report.failed] == ["default/p2"]
    assert "not found" in result.report.failed[0].error
    assert sleeps == []                              # not worth retrying
    bound = {e.pod for e in result.report.applied if isinstance(e, Bind)}
    assert bound == {"default/p0", "default/p1"}
    events = [e for e in cluster.list(EVENT) if e["reason"] == "Scheduled"]
    assert len(events) == 2


def test_giving_up_after_the_retries() -> None:
    cluster = FlakyCluster(always={"p0": TransientApiError("down", 503)})
    gang(cluster)
    sleeps: list[float] = []
    result = run(cluster, sleeps)
    assert [f.effect.pod for f in result.report.failed] == ["default/p0"]
    assert cluster.attempts["p0"] == 4 and sleeps == [0.1, 0.2, 0.4]


def test_a_conflict_is_final_and_the_pod_is_read_again() -> None:
    cluster = FlakyCluster(always={"p1": ConflictError("pod p1 is already assigned to node-b")})
    gang(cluster)
    sleeps: list[float] = []
    registry = register_builtins()
    binder = Binder(cluster, cluster.clock.now, retries=3, backoff=0.1, sleep=sleeps.append)
    scheduler = Scheduler(cluster, default_config(registry), registry, cluster.clock, binder)
    result = scheduler.run_once()
    assert [f.effect.pod for f in result.report.failed] == ["default/p1"]
    assert cluster.attempts["p1"] == 1 and sleeps == []     # not retried
    assert binder.take_resync() == {"default/p1"}           # the cycle after reads it again


def test_retries_end_with_the_time_budget() -> None:
    cluster = FlakyCluster(always={"p0": TransientApiError("down", 503)})
    gang(cluster)
    registry = register_builtins()
    # backoff 0.1, 0.2, 0.4...: with 0.25 s of budget only the first retry fits
    binder = Binder(cluster, cluster.clock.now, retries=10, backoff=0.1, budget=0.25,
                    sleep=lambda _: None)
    Scheduler(cluster, default_config(registry), registry, cluster.clock, binder).run_once()
    assert cluster.attempts["p0"] <= 3


class GatedCluster(MemoryCluster):
    """Binds wait for the test to open the gate: work queues while workers are busy."""

    def __init__(self) -> None:
        super().__init__(ManualClock())
        self.gate = threading.Event()
        self.counting = threading.Lock()
        self.waiting = 0                # binds held at the gate now
        self.most = 0                   # the most held at once

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        with self.counting:
            self.waiting += 1
            self.most = max(self.most, self.waiting)
        self.gate.wait(10)
        with self.counting:
            self.waiting -= 1
        super().bind(namespace, name, uid, node)


def test_workers_start_as_work_comes_up_to_their_count() -> None:
    cluster = GatedCluster()
    gang(cluster)
    for i in range(3, 8):
        cluster.create({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"p{i}", "namespace": "default"},
                        "spec": {"schedulerName": "kaisched", "containers": [{"name": "c"}]}})
    binder = Binder(cluster, cluster.clock.now, workers=4)
    job = JobKey("default/g")
    before = set(threading.enumerate())

    def workers() -> int:
        return sum(1 for t in threading.enumerate()
                   if t not in before and t.name.startswith("binder-"))

    def bind(i: int) -> None:
        binder.submit(Bind(PodKey(f"default/p{i}"), "", NodeName("node-a"), job))

    bind(0)
    assert workers() == 1                   # not all four for the first effect
    for i in range(1, 8):
        bind(i)
    assert workers() == 4                   # more queued than idle: as many as allowed
    deadline = time.monotonic() + 10
    while cluster.waiting < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    cluster.gate.set()
    binder.wait()
    assert cluster.most == 4                # four binds in flight at once, never more
    assert len(binder.take_report().applied) == 8
    binder.submit(Bind(PodKey("default/p0"), "", NodeName("node-a"), job))
    binder.wait()                           # an idle worker took it: none was started
    assert workers() == 4
    binder.stop()
