"""What the scheduler tells the API about pods that wait: once per reason,
then repeats with backoff counted on the same Event; pods beyond a running
gang's minimum that fit nowhere are told why, and so is their PodGroup."""
from __future__ import annotations

from kaisched.api.clock import ManualClock
from kaisched.api.job import Condition
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import EVENT, POD, PODGROUP
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import default_config
from kaisched.framework.effects import RecordEvent, SetPodCondition
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from kaisched.runtime.throttle import Verdict, WriteThrottle

PG_API = "scheduling.kaisched.io/v1alpha1"


def node(cluster: MemoryCluster, name: str, cpu: str) -> None:
    cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                    "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}})


def pod(cluster: MemoryCluster, name: str, cpu: str, group: str | None = None) -> None:
    meta = {"name": name, "namespace": "default"}
    if group:
        meta["annotations"] = {"kaisched.io/pod-group": group}
    cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                    "spec": {"schedulerName": "kaisched", "containers": [
                        {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}})


def scheduler(cluster: MemoryCluster) -> Scheduler:
    registry = register_builtins()
    return Scheduler(cluster, default_config(registry), registry, cluster.clock,
                     Binder(cluster, cluster.clock.now))


def failed_scheduling(cluster: MemoryCluster) -> list[dict]:
    return [e for e in cluster.list(EVENT) if e["reason"] == "FailedScheduling"]


def test_pods_without_a_podgroup_are_told_once_not_every_cycle() -> None:
    cluster = MemoryCluster(ManualClock())
    node(cluster, "n1", "2")
    pod(cluster, "alone", cpu="4")                 # fits nowhere, no PodGroup at all
    pod(cluster, "orphan", cpu="1", group="gone")  # names a PodGroup that does not exist
    sched = scheduler(cluster)
    said = []
    for _ in range(6):
        said += [e for e in sched.run_once().effects if isinstance(e, RecordEvent)]
        cluster.clock.advance(1)
    assert sorted(e.key for e in said) == ["default/alone", "default/orphan"]
    assert len(failed_scheduling(cluster)) == 2
    conditions = [c for c in cluster.get(POD, "default", "orphan")["status"]["conditions"]
                  if c["type"] == "PodScheduled"]
    assert len(conditions) == 1 and "gone" in conditions[0]["message"]


def test_a_pod_beyond_min_member_that_fits_nowhere_is_told_why() -> None:
    cluster = MemoryCluster(ManualClock())
    node(cluster, "n1", "2")
    cluster.create({"apiVersion": PG_API, "kind": "PodGroup",
                    "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}})
    for i in range(3):
        pod(cluster, f"g-{i}", cpu="1", group="g")
    result = scheduler(cluster).run_once()
    assert len(result.placed) == 2
    extra = next(f"g-{i}" for i in range(3) if f"default/g-{i}" not in result.placed)
    cond = next(c for c in cluster.get(POD, "default", extra)["status"]["conditions"]
                if c["type"] == "PodScheduled")
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert cond["message"].startswith("beyond minMember 2 of default/g, not placed: "
                                      "insufficient cpu on 1 node")
    events = failed_scheduling(cluster)
    assert [e["involvedObject"]["name"] for e in events] == [extra]
    status = cluster.get(PODGROUP, "default", "g")["status"]
    scheduled = next(c for c in status["conditions"] if c["type"] == "Scheduled")
    assert status["phase"] == "Running" and scheduled["status"] == "True"
    assert scheduled["message"].startswith("2/3 tasks scheduled; 1 pod(s) beyond minMember "
                                           "not placed: insufficient cpu on 1 node")


def test_repeats_are_counted_on_the_same_event_with_backoff() -> None:
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    pod(cluster, "p", cpu="1")
    binder = Binder(cluster, clock.now, throttle=WriteThrottle())
    why = RecordEvent("Pod", "default/p", "Warning", "FailedScheduling", "no node fits")
    for _ in range(5):                  # every cycle for 5 s: one Event
        binder.apply([why])
        clock.advance(1)
    assert [e["count"] for e in failed_scheduling(cluster)] == [1]
    clock.advance(56)                   # 60 s on: the repeat, counted on it
    binder.apply([why])
    [event] = failed_scheduling(cluster)
    assert event["count"] == 6 and event["series"]["count"] == 6
    clock.advance(100)                  # within the doubled backoff (120 s): nothing
    binder.apply([why])
    assert failed_scheduling(cluster)[0]["count"] == 6
    clock.advance(20)
    binder.apply([why])
    assert failed_scheduling(cluster)[0]["count"] == 8


def test_a_new_reason_is_written_at_once_a_new_message_after_a_gap() -> None:
    throttle = WriteThrottle(min_gap=10.0)

    def condition(reason: str, message: str) -> SetPodCondition:
        return SetPodCondition("default/p", Condition("PodScheduled", "False", reason, message, ""))

    assert throttle.admit(condition("Unschedulable", "1 free"), 0.0).verdict is Verdict.WRITE
    assert throttle.admit(condition("Unschedulable", "2 free"), 5.0).verdict is Verdict.SKIP
    assert throttle.admit(condition("Invalid", "bad minMember"), 6.0).verdict is Verdict.WRITE
    assert throttle.admit(condition("Invalid", "other"), 16.0).verdict is Verdict.WRITE
    assert throttle.admit(condition("Invalid", "other"), 17.0).verdict is Verdict.SKIP
    throttle.forget(("condition", "default/p", "PodScheduled"))     # a write that failed
    assert throttle.admit(condition("Invalid", "other"), 18.0).verdict is Verdict.WRITE
