"""One object never stops a cycle: an exception while one job is decided
costs that job its turn, in every action and in the enqueue gate. Its
statement is discarded (what it placed is free again for the others), it
says SchedulerError with the exception's message (its PodGroup and its
pods), kaisched_job_errors_total counts the error, the traceback is logged
at most once per job a minute, and every other job is scheduled.

The exceptions are planted: in a plugin's callback (the hooks a job's
decision asks), or in the step of an action that decides one job.

Under kaisched/framework/failures.py, which keeps what the jobs that raised were told; the
error log and metrics of the runtime are checked on the way."""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Mapping

import pytest

import actions.allocate
import actions.backfill
import actions.consolidation
import actions.enqueue
import actions.preempt
import actions.reclaim
import actions.stalegangeviction
import kaisched.framework.holds
from kaisched.api.clock import ManualClock
from kaisched.api.job import JobInfo
from kaisched.api.task import TaskInfo
from kaisched.api.types import Blocker
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD, PODGROUP, UPSTREAM_PODGROUPS
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import Hook, PluginBase, Session, parse_config
from kaisched.framework.effects import Bind, CarriedGang, Evict
from kaisched.framework.failures import JobError
from kaisched.framework.statement import AllocateOp
from kaisched.runtime.binder import Binder
from kaisched.runtime.cycle import CycleResult
from kaisched.runtime.errorlog import ErrorLog
from kaisched.runtime.metrics import Metrics
from kaisched.runtime.scheduler import Scheduler
from tests.builders.objects import build_node, build_pod, build_podgroup, build_queue, load_cluster

BAD = "default/bad"
TIERS = """\
tiers:
  - plugins: [{name: priority}, {name: gang}]
  - plugins: [{name: proportion}, {name: predicates}, {name: nodeorder}%s]
"""


class Planted(Exception):
    """The bug planted in one job's decision."""


def _boom(what: str) -> Planted:
    return Planted(f"planted in {what}")


# -- the cycle ------------------------------------------------------------------------

def cycle(objects: Iterable[dict[str, Any]], actions_: str, faulty: str | None = None,
          clock: ManualClock | None = None) -> tuple[CycleResult, MemoryCluster]:
    """One cycle of the actions over the objects; faulty: the hook a plugin
    plants the exception in, for job `bad` only."""
    registry = register_builtins()
    if faulty is not None:
        registry.add_plugin("faulty", lambda args: Faulty(args))
    extra = ", {name: faulty, arguments: {hook: %s}}" % faulty if faulty else ""
    config = parse_config(f"actions: [{actions_}]\n" + TIERS % extra, registry)
    clock = clock or ManualClock()
    cluster = load_cluster(objects, clock)
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    return scheduler.run_once(), cluster


class Faulty(PluginBase):
    """Registers one callback that raises when it is asked about job `bad`
    (ALLOCATABLE: about its second pod, so its first is placed already)."""

    name = "faulty"
    placed: list[str] = []

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        self.hook = arguments["hook"]

    def on_session_open(self, ssn: Session) -> None:
        def job_order(job: JobInfo) -> int:
            if job.key == BAD:
                raise _boom("job order")
            return 0

        def ready(job: JobInfo) -> bool:
            if job.key == BAD:
                raise _boom("job readiness")
            return True

        def enqueueable(job: JobInfo) -> str | None:
            if job.key == BAD:
                raise _boom("the enqueue gate")
            return None

        def allocatable(job: JobInfo, task: TaskInfo) -> str | None:
            if job.key == BAD and task.key.endswith("-1"):
                raise _boom("a queue check")
            return None

        def on_allocate(task: TaskInfo) -> None:
            Faulty.placed.append(task.key)

        ssn.register(Hook.ON_ALLOCATE, on_allocate)
        if self.hook == "JOB_ORDER":
            ssn.register(Hook.JOB_ORDER, job_order)
        elif self.hook == "JOB_READY":
            ssn.register(Hook.JOB_READY, ready)
        elif self.hook == "ENQUEUEABLE":
            ssn.register(Hook.ENQUEUEABLE, enqueueable, blocker=Blocker.GATES)
        elif self.hook == "ALLOCATABLE":
            ssn.register(Hook.ALLOCATABLE, allocatable)


# -- what a failed job and the others show ----------------------------------------------

def assert_bad_lost_its_turn(result: CycleResult, cluster: MemoryCluster, where: str,
                             action: str) -> None:
    errors = [e for e in result.errors if e.job == BAD]
    assert len(errors) == 1, result.errors
    assert errors[0].action == action, errors
    assert f"Planted: planted in {where}" == errors[0].message
    assert "Traceback" in errors[0].trace and "Planted" in errors[0].trace
    assert not [e for e in result.errors if e.job != BAD], result.errors
    # nothing of it bound, evicted for it or held for it
    assert not [e for e in result.effects if isinstance(e, Bind) and e.job == BAD]
    assert not [e for e in result.effects if isinstance(e, Evict) and e.by and e.by.job == BAD]
    assert not [p for p in result.reservations if p.startswith("default/bad-")]
    status = cluster.get(PODGROUP, "default", "bad").get("status") or {}
    cond = next(c for c in status["conditions"] if c["type"] == "Scheduled")
    assert (cond["status"], cond["reason"]) == ("False", "SchedulerError"), cond
    assert f"planted in {where}" in cond["message"] and action in cond["message"], cond
    pods = [p for p in cluster.list(POD) if p["metadata"]["name"].startswith("bad-")
            and not p["spec"].get("nodeName")]
    for pod in pods:
        said = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
        assert (said["status"], said["reason"]) == ("False", "SchedulerError"), said
    # and the metric counts it, by action
    metrics = Metrics()
    metrics.observe(result, 0.0)
    assert metrics.registry.get_sample_value("kaisched_job_errors_total", {"action": action}) == 1
    queue = cluster.get(PODGROUP, "default", "bad")["spec"].get("queue", "default")
    assert metrics.registry.get_sample_value("kaisched_pending_gangs",
                                             {"queue": queue, "reason": "error"}) == 1


def bound(result: CycleResult) -> dict[str, str]:
    return {e.pod: e.node for e in result.effects if isinstance(e, Bind)}


def gangs(node_cpu: int = 4) -> list[dict[str, Any]]:
    """One node; bad (2 x 1 cpu, the oldest, first in order) and good (2 x 2
    cpu, all that is left once bad is out of the way: none of bad's room may
    stay taken)."""
    out = [build_node("n1", cpu=node_cpu),
           build_podgroup("bad", min_member=2), build_podgroup("good", min_member=2)]
    out[1]["metadata"]["creationTimestamp"] = "2025-12-31T00:00:00Z"
    out[2]["metadata"]["creationTimestamp"] = "2025-12-31T01:00:00Z"
    for i in range(2):
        out.append(build_pod(f"bad-{i}", cpu=1, group="bad", creation="2025-12-31T00:00:00Z"))
        out.append(build_pod(f"good-{i}", cpu=2, group="good", creation="2025-12-31T01:00:00Z"))
    return out


# -- planted in a plugin's callback -------------------------------------------------------

@pytest.mark.parametrize("hook, actions_, where, action", [
    ("JOB_ORDER", "allocate, backfill", "job order", "allocate"),
    ("JOB_ORDER", "enqueue, allocate, backfill", "job order", "enqueue"),
    ("JOB_READY", "allocate, backfill, preempt, stalegangeviction", "job readiness", "allocate"),
    ("ENQUEUEABLE", "enqueue, allocate, backfill", "the enqueue gate", "enqueue"),
    ("ALLOCATABLE", "allocate, backfill, preempt", "a queue check", "allocate"),
])
def test_an_exception_in_a_plugin_costs_only_its_job_its_turn(
        hook: str, actions_: str, where: str, action: str) -> None:
    Faulty.placed = []
    result, cluster = cycle(gangs(), actions_, hook)
    assert bound(result) == {"default/good-0": "n1", "default/good-1": "n1"}
    assert_bad_lost_its_turn(result, cluster, where, action)
    if hook == "ALLOCATABLE":
        # bad's first pod was placed before its second raised: undone, so good fits.
        assert "default/bad-0" in Faulty.placed


def test_a_failed_job_is_tried_again_next_cycle_and_its_traceback_logged_once_a_minute(
        caplog: pytest.LogCaptureFixture) -> None:
    registry = register_builtins()
    registry.add_plugin("faulty", lambda args: Faulty(args))
    config = parse_config("actions: [allocate]\n" + TIERS % ", {name: faulty, arguments: "
                          "{hook: JOB_ORDER}}", registry)
    clock = ManualClock()
    cluster = load_cluster(gangs(node_cpu=8), clock)
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    logged = []
    with caplog.at_level(logging.ERROR, logger="kaisched.runtime.scheduler"):
        for step in (0, 1, 30, 30):     # seconds to the next cycle
            clock.advance(step)
            caplog.clear()
            result = scheduler.run_once()
            assert [e.job for e in result.errors] == [BAD]      # every cycle: counted
            logged.append(sum("Traceback" in r.getMessage() and BAD in r.getMessage()
                              for r in caplog.records))
    assert logged == [1, 0, 0, 1]       # at 0s, then not before 60s have passed


def test_the_error_log_logs_each_job_at_most_once_a_minute() -> None:
    log = ErrorLog()
    a, b = (JobError("ns/a", "allocate", "KeyError: 'x'", "Traceback ..."),
            JobError("ns/b", "preempt", "ValueError", "Traceback ..."))
    assert log.report([a, b], 0.0) == [a, b]
    assert log.report([a, a], 59.0) == []
    assert log.report([a], 60.0) == [a]
    assert log.report([b], 61.0) == [b]


# -- planted in each action's step for one job ---------------------------------------------

def _raising_for_bad(original: Callable[..., Any], where: str) -> Callable[..., Any]:
    """original, but raising when any argument is job bad (or names it)."""
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        for arg in (*args, *kwargs.values()):
            if isinstance(arg, JobInfo) and arg.key == BAD:
                raise _boom(where)
        return original(*args, **kwargs)
    return wrapped


def _preempting() -> list[dict[str, Any]]:
    """One node full of a low-priority elastic job; bad and good (high
    priority, one 2-cpu pod each) preempt within the queue."""
    out = [build_node("n1", cpu=4), build_podgroup("low", min_member=1),
           build_podgroup("bad"), build_podgroup("good")]
    out += [build_pod(f"low-{i}", cpu=1, group="low", node="n1", priority=0) for i in range(4)]
    out.append(build_pod("bad-0", cpu=2, group="bad", priority=10, creation="2025-12-31T00:00:00Z"))
    out.append(build_pod("good-0", cpu=2, group="good", priority=10, creation="2025-12-31T01:00:00Z"))
    return out


def _reclaiming() -> list[dict[str, Any]]:
    """Queue qa runs over its share on the one node; bad and good of queue qb
    (quota 2) reclaim."""
    out = [build_node("n1", cpu=4), build_queue("qa"), build_queue("qb", resources={"cpu": {"quota": 2}}),
           build_podgroup("low", min_member=1, queue="qa"),
           build_podgroup("bad", queue="qb"), build_podgroup("good", queue="qb")]
    out += [build_pod(f"low-{i}", cpu=1, group="low", queue="qa", node="n1") for i in range(4)]
    out.append(build_pod("bad-0", cpu=1, group="bad", queue="qb", creation="2025-12-31T00:00:00Z"))
    out.append(build_pod("good-0", cpu=1, group="good", queue="qb", creation="2025-12-31T01:00:00Z"))
    return out


def _best_effort() -> list[dict[str, Any]]:
    out = [build_node("n1", cpu=1), build_podgroup("bad"), build_podgroup("good")]
    out.append(build_pod("bad-0", cpu=0, group="bad", creation="2025-12-31T00:00:00Z"))
    out.append(build_pod("good-0", cpu=0, group="good", creation="2025-12-31T01:00:00Z"))
    return out


def _stale() -> list[dict[str, Any]]:
    """Two running gangs short of their minimum past the grace period."""
    out = [build_node("n1", cpu=4)]
    for name in ("bad", "good"):
        group = build_podgroup(name, min_member=3)
        group["status"] = {"phase": "Running", "staleSince": "2025-12-31T23:50:00Z"}
        out.append(group)
        out += [build_pod(f"{name}-{i}", cpu=1, group=name, node="n1") for i in range(2)]
    return out


def _moving() -> list[dict[str, Any]]:
    """Two 4-cpu nodes, each half taken by a pod a controller makes again;
    bad and good want a whole node: moving one pod makes room for one."""
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "controller": True}
    out = [build_node("n1", cpu=4), build_node("n2", cpu=4),
           build_podgroup("m"), build_podgroup("k"), build_podgroup("bad"), build_podgroup("good")]
    out.append(build_pod("m-0", cpu=2, group="m", node="n1", owner={**owner, "name": "m", "uid": "m"}))
    out.append(build_pod("k-0", cpu=2, group="k", node="n2", owner={**owner, "name": "k", "uid": "k"}))
    out.append(build_pod("bad-0", cpu=4, group="bad", creation="2025-12-31T00:00:00Z"))
    out.append(build_pod("good-0", cpu=4, group="good", creation="2025-12-31T01:00:00Z"))
    return out


@pytest.mark.parametrize("action, target, actions_, objects", [
    ("enqueue", (actions.enqueue, "_gate"), "enqueue, allocate", gangs),
    ("allocate", (actions.allocate, "place_job"), "allocate", gangs),
    ("backfill", (actions.backfill, "place_job"), "allocate, backfill", _best_effort),
    ("preempt", (actions.preempt, "place_by_eviction"), "allocate, preempt", _preempting),
    ("reclaim", (actions.reclaim, "reclaim_for"), "allocate, reclaim", _reclaiming),
    ("consolidation", (actions.consolidation, "FewestMoves"), "allocate, consolidation", _moving),
    ("stalegangeviction", (actions.stalegangeviction, "finishing"), "allocate, stalegangeviction", _stale),
], ids=lambda v: v if isinstance(v, str) else "")
def test_every_action_decides_each_job_under_its_own_guard(
        monkeypatch: pytest.MonkeyPatch, action: str, target: tuple[Any, str], actions_: str,
        objects: Callable[[], list[dict[str, Any]]]) -> None:
    module, name = target
    monkeypatch.setattr(module, name, _raising_for_bad(getattr(module, name), action))
    result, cluster = cycle(objects(), actions_)
    assert_bad_lost_its_turn(result, cluster, action, action) if action != "stalegangeviction" \
        else _assert_stale_bad(result, cluster)
    good = {p: n for p, n in {**bound(result), **result.reservations}.items() if "good-" in p}
    evicted = sorted(e.pod for e in result.effects if isinstance(e, Evict))
    if action == "stalegangeviction":
        assert evicted == ["default/good-0", "default/good-1"]
    else:
        assert good, (action, bound(result), result.reservations, evicted)
    if action in ("preempt", "reclaim"):
        assert len(evicted) == 1 if action == "reclaim" else 2, evicted
    if action == "consolidation":
        assert evicted == ["default/m-0"] or evicted == ["default/k-0"], evicted


def _assert_stale_bad(result: CycleResult, cluster: MemoryCluster) -> None:
    """A running gang's error: it evicts nothing and counts; its pods run on."""
    errors = [e for e in result.errors if e.job == BAD]
    assert len(errors) == 1 and errors[0].action == "stalegangeviction", result.errors
    assert not [e for e in result.effects if isinstance(e, Evict) and e.job == BAD]
    status = cluster.get(PODGROUP, "default", "bad").get("status") or {}
    cond = next(c for c in status["conditions"] if c["type"] == "Scheduled")
    assert cond["reason"] == "SchedulerError" and "planted in stalegangeviction" in cond["message"]


def test_a_commit_that_raises_binds_none_of_its_gang(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bind of bad's first pod is made before its second raises: none
    is handed over (no gang bound in part), and the room goes to good."""
    original = AllocateOp.commit

    def commit(self: AllocateOp, ssn: Session) -> None:
        if self.task.key == "default/bad-1":
            raise _boom("a commit")
        original(self, ssn)

    monkeypatch.setattr(AllocateOp, "commit", commit)
    result, cluster = cycle(gangs(), "allocate, backfill")
    assert bound(result) == {"default/good-0": "n1", "default/good-1": "n1"}
    assert_bad_lost_its_turn(result, cluster, "a commit", "allocate")
    assert not [p for p in result.placed if p.startswith("default/bad-")]


@pytest.mark.parametrize("module, name, action", [
    (actions.allocate, "place_job", "allocate"),
    (kaisched.framework.holds, "_put_back", "session open"),    # as its hold is put back
], ids=["deciding it", "putting its hold back"])
def test_a_nonstrict_hold_is_let_go_when_its_job_raises(
        monkeypatch: pytest.MonkeyPatch, module: Any, name: str, action: str) -> None:
    """bad (NonStrict) holds node n1 from the last session; deciding it
    raises: the hold is discarded and not carried on, so good takes both nodes."""
    objects = [build_node("n1", cpu=2), build_node("n2", cpu=2),
               build_podgroup("bad", min_member=2, mode="NonStrict"), build_podgroup("good", min_member=2)]
    objects[2]["metadata"]["creationTimestamp"] = "2025-12-31T00:00:00Z"
    objects += [build_pod(f"bad-{i}", cpu=2, group="bad", creation="2025-12-31T00:00:00Z") for i in range(2)]
    objects += [build_pod(f"good-{i}", cpu=2, group="good", creation="2025-12-31T01:00:00Z") for i in range(2)]
    monkeypatch.setattr(module, name, _raising_for_bad(getattr(module, name), action))
    registry = register_builtins()
    config = parse_config("actions: [allocate]\n" + TIERS % "", registry)
    clock = ManualClock()
    cluster = load_cluster(objects, clock)
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    scheduler.holds = {BAD: CarriedGang((("default/bad-0", "n1"),), clock.now() - 5)}
    result = scheduler.run_once()
    assert bound(result) == {"default/good-0": "n1", "default/good-1": "n2"} or \
        bound(result) == {"default/good-0": "n2", "default/good-1": "n1"}
    assert_bad_lost_its_turn(result, cluster, action, action)
    assert BAD not in scheduler.holds


@pytest.mark.parametrize("api, condition", [
    ("scheduling.k8s.io/v1beta1", "PodGroupInitiallyScheduled"),
    ("scheduling.k8s.io/v1alpha2", "PodGroupScheduled"),
])
def test_an_upstream_podgroup_says_scheduler_error_in_its_own_condition(
        monkeypatch: pytest.MonkeyPatch, api: str, condition: str) -> None:
    monkeypatch.setattr(actions.allocate, "place_job",
                        _raising_for_bad(actions.allocate.place_job, "allocate"))
    objects: list[dict[str, Any]] = [build_node("n1", cpu=4)]
    for name in ("bad", "good"):
        objects.append({"apiVersion": api, "kind": "PodGroup",
                        "metadata": {"name": name, "namespace": "default"},
                        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}})
        for i in range(2):
            pod = build_pod(f"{name}-{i}", cpu=1)
            pod["spec"]["schedulingGroup"] = {"podGroupName": name}
            objects.append(pod)
    result, cluster = cycle(objects, "allocate")
    assert sorted(bound(result)) == ["default/good-0", "default/good-1"]
    assert [e.job for e in result.errors] == [BAD]
    kind = next(k for k in UPSTREAM_PODGROUPS if k.api_version == api)
    group = cluster.get(kind, "default", "bad")
    said = next(c for c in group["status"]["conditions"] if c["type"] == condition)
    assert (said["status"], said["reason"]) == ("False", "SchedulerError"), said
    assert "planted in allocate" in said["message"]


def test_an_error_outside_any_one_jobs_decision_costs_the_rest_of_its_action_only(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """preempt's victim order (a step over every candidate) raises: preempt
    stops, evicts nothing; allocate's binds stand, stale-gang eviction runs,
    statuses are written; the error is counted under preempt and logged."""
    def victim_order(*args: Any) -> Any:
        raise _boom("the victim order")

    monkeypatch.setattr(actions.preempt, "victim_order", victim_order)
    # n1 full of low; hi (high priority) would preempt there. small fits n2.
    # st, on n3, is a gang short of its minimum past its grace period.
    objects = [build_node("n1", cpu=4), build_node("n2", cpu=1), build_node("n3", cpu=2),
               build_podgroup("low"), build_podgroup("hi"), build_podgroup("small"),
               build_podgroup("st", min_member=3)]
    objects[-1]["status"] = {"phase": "Running", "staleSince": "2025-12-31T23:50:00Z"}
    objects += [build_pod(f"low-{i}", cpu=1, group="low", node="n1", priority=0) for i in range(4)]
    objects += [build_pod("hi-0", cpu=2, group="hi", priority=10), build_pod("small-0", cpu=1, group="small")]
    objects += [build_pod(f"st-{i}", cpu=1, group="st", node="n3") for i in range(2)]
    with caplog.at_level(logging.ERROR, logger="kaisched.runtime.scheduler"):
        result, cluster = cycle(objects, "allocate, preempt, stalegangeviction")
    assert bound(result) == {"default/small-0": "n2"}
    assert [(e.job, e.action, e.message) for e in result.errors] == [
        ("", "preempt", "Planted: planted in the victim order")]
    evicted = sorted(e.pod for e in result.effects if isinstance(e, Evict))
    assert evicted == ["default/st-0", "default/st-1"]      # stale-gang eviction, after it
    assert "the rest of it was skipped" in caplog.text and "Traceback" in caplog.text
    metrics = Metrics()
    metrics.observe(result, 0.0)
    assert metrics.registry.get_sample_value("kaisched_job_errors_total", {"action": "preempt"}) == 1


def test_the_gangs_of_a_gang_group_lose_their_turn_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """bad and mate form a gang group; placing them raises: neither is
    placed, both say SchedulerError, the error is counted once; good is placed."""
    def place_group(*args: Any) -> bool:
        raise _boom("a gang group")

    monkeypatch.setattr(actions.allocate, "place_group", place_group)
    group = ["default/bad", "default/mate"]
    objects = [build_node("n1", cpu=4), build_podgroup("bad", gangGroup=group),
               build_podgroup("mate", gangGroup=group), build_podgroup("good")]
    objects += [build_pod(f"{n}-0", cpu=1, group=n) for n in ("bad", "mate", "good")]
    result, cluster = cycle(objects, "allocate, backfill")
    assert bound(result) == {"default/good-0": "n1"}
    assert [e.job for e in result.errors] in ([BAD], ["default/mate"])
    for name in ("bad", "mate"):
        cond = next(c for c in cluster.get(PODGROUP, "default", name)["status"]["conditions"]
                    if c["type"] == "Scheduled")
        assert cond["reason"] == "SchedulerError" and "planted in a gang group" in cond["message"]
