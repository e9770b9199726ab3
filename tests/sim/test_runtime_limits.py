"""Runtime limits, enforced as Kubernetes enforces them: a job's runtimeLimit
is every pod's activeDeadlineSeconds (whole seconds, rounded up) in every
kind; the simulated kubelet ends a pod still running at startTime + that
limit, Failed with DeadlineExceeded, and the job fails with it; a job within
its limit runs exactly as without one; jumping over quiet ticks still equals
a session every period; a bad runtimeLimit is one line naming the field."""
from __future__ import annotations

import pytest

from kaisched.api.clock import ManualClock, to_rfc3339
from kaisched.cluster.kinds import POD
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import SchedulerConfig
from kaisched.sim.admission import refusals
from kaisched.sim.kubelet import Kubelet
from kaisched.sim.operators import blueprint, pod_object
from kaisched.sim.report import build_report
from kaisched.sim.scenario import ScenarioError, parse_scenario
from kaisched.sim.simulation import Simulation
from tests.builders.sim import SMALL, both_ways, one_pod

REASON = "DeadlineExceeded: ran past its runtimeLimit"

# One role set per kind (its own role names), two pods or more each.
ROLES = {
    "PyTorchJob": "{master: {replicas: 1, requests: {cpu: 1}}, worker: {replicas: 2, requests: {cpu: 1}}}",
    "TFJob": "{chief: {replicas: 1, requests: {cpu: 1}}, ps: {replicas: 1, requests: {cpu: 1}}}",
    "XGBoostJob": "{master: {replicas: 1, requests: {cpu: 1}}, worker: {replicas: 1, requests: {cpu: 1}}}",
    "JAXJob": "{worker: {replicas: 2, requests: {cpu: 1}}}",
    "MPIJob": "{launcher: {replicas: 1, requests: {cpu: 1}}, worker: {replicas: 2, requests: {cpu: 1}}}",
    "JobSet": "{trainer: {replicas: 2, requests: {cpu: 1}}, sidecar: {replicas: 1, requests: {cpu: 1}}}",
    "TrainJob": "{node: {replicas: 2, requests: {cpu: 1}}}",
    "LeaderWorkerSet": "{leader: {replicas: 2, requests: {cpu: 1}}, worker: {replicas: 2, requests: {cpu: 1}}}",
    "RayJob": "{head: {replicas: 1, requests: {cpu: 1}}, gpus: {replicas: 2, requests: {cpu: 1}}}",
    "RayService": "{head: {replicas: 1, requests: {cpu: 1}}, gpus: {replicas: 2, requests: {cpu: 1}}}",
    "Job": "{main: {replicas: 2, requests: {cpu: 1}}}",
    "PodGroup": "{leader: {replicas: 1, requests: {cpu: 1}}, member: {replicas: 2, requests: {cpu: 1}}}",
}
# Kinds that start in stages: their later pods carry the limit too.
STAGED = {"JobSet": "InOrder", "MPIJob": "WaitForWorkersReady", "LeaderWorkerSet": "LeaderReady"}


def _one_job(kind: str, limit: str | None) -> str:
    staged = f"\n    startupPolicy: {STAGED[kind]}" if kind in STAGED else ""
    limited = f"\n    runtimeLimit: {limit}" if limit is not None else ""
    return f"""
nodePools: [{{name: cpu, count: 1, capacity: {{cpu: 16, memory: 64Gi}}}}]
queues: [{{name: team-a}}]
jobs:
  - name: job-1
    kind: {kind}
    queue: team-a
    duration: 5m{limited}{staged}
    roles: {ROLES[kind]}
"""


def _pods(kind: str, limit: str | None) -> list[dict]:
    """Every pod the kind's operator makes for the job, all stages."""
    job = parse_scenario(_one_job(kind, limit), "t.yaml").jobs[0]
    assert refusals(job, "kaisched", {}) == []        # the API server takes them
    plan = blueprint(job, "kaisched")
    owners = [{**o, "metadata": {**o["metadata"], "uid": f"uid-{i}"}}
              for i, o in enumerate(plan.objects)]
    return [pod_object(p, plan.templates[p.role], job.namespace,
                       owners[p.parent] if p.parent is not None else None, {})
            for p in plan.pods]


@pytest.mark.parametrize("kind", sorted(ROLES))
def test_every_pod_of_every_kind_carries_the_limit(kind: str) -> None:
    limited = _pods(kind, "90.5s")
    assert len(limited) >= 2
    assert [p["spec"]["activeDeadlineSeconds"] for p in limited] == [91] * len(limited)
    assert all("activeDeadlineSeconds" not in p["spec"] for p in _pods(kind, None))


# -- the kubelet ---------------------------------------------------------------------------

def _bound_pod(duration: str, deadline: int) -> tuple[ManualClock, MemoryCluster]:
    clock, cluster = one_pod(duration, {"activeDeadlineSeconds": deadline})
    cluster.bind("ns", "p", "", "n1")
    return clock, cluster


def _status(cluster: MemoryCluster) -> dict:
    return cluster.get(POD, "ns", "p")["status"]     # type: ignore[index]


def test_a_pod_past_its_deadline_fails_as_the_kubelet_ends_it() -> None:
    clock, cluster = _bound_pod("1h", 120)
    kubelet = Kubelet(cluster)
    kubelet.tick(clock.now())
    assert _status(cluster)["startTime"] == to_rfc3339(1000.0)
    assert kubelet.next_event() == 1120.0          # the deadline, before the exit at 4600
    clock.set(1119.0)
    kubelet.tick(clock.now())
    assert _status(cluster)["phase"] == "Running"
    clock.set(1120.0)
    kubelet.tick(clock.now())
    status = _status(cluster)
    assert (status["phase"], status["reason"], status["message"]) == \
        ("Failed", "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
    assert status["containerStatuses"][0]["state"]["terminated"]["reason"] == "Error"
    assert kubelet.next_event() == 4600.0          # the exit that will find nothing to end
    clock.set(4600.0)
    kubelet.tick(clock.now())
    assert _status(cluster)["phase"] == "Failed"


@pytest.mark.parametrize("duration", ["60s", "120s"])
def test_a_pod_that_ends_by_its_deadline_succeeds(duration: str) -> None:
    """At the very moment of the deadline, the container's exit wins."""
    clock, cluster = _bound_pod(duration, 120)
    kubelet = Kubelet(cluster)
    kubelet.tick(clock.now())
    clock.set(1000.0 + float(duration[:-1]))
    kubelet.tick(clock.now())
    assert _status(cluster)["phase"] == "Succeeded" and "reason" not in _status(cluster)
    assert kubelet.next_event() is None            # its deadline wakes nobody


def test_a_snapshot_pod_s_deadline_counts_from_its_start_time() -> None:
    clock, cluster = _bound_pod("1h", 600)
    pod = cluster.get(POD, "ns", "p")
    assert pod is not None
    # Running for 500s when the snapshot was taken: 100s left of its 600.
    cluster.replace({**pod, "status": {"phase": "Running", "startTime": to_rfc3339(500.0)}})
    kubelet = Kubelet(cluster)
    kubelet.adopt(clock.now())
    assert kubelet.next_event() == 1100.0
    clock.set(1100.0)
    kubelet.tick(clock.now())
    assert _status(cluster)["reason"] == "DeadlineExceeded"


# -- whole runs ----------------------------------------------------------------------------

def _limited(text: str, job: str, limit: str) -> str:
    """The scenario with a runtimeLimit on one of its jobs (under its duration)."""
    at = text.index("duration: ", text.index(f"name: {job}\n"))
    end = text.index("\n", at) + 1
    return f"{text[:end]}    runtimeLimit: {limit}\n{text[end:]}"


def _job(report: dict, name: str) -> dict:
    return next(j for j in report["jobs"] if j["name"] == name)


def test_a_job_within_its_limit_runs_as_without_one(config: SchedulerConfig) -> None:
    within = _limited(SMALL, "first", "10m")     # exactly its duration: it is met
    plain = build_report(Simulation(parse_scenario(SMALL, "s.yaml"), config).run(), "c")
    limited = build_report(Simulation(parse_scenario(within, "s.yaml"), config).run(), "c")
    assert limited == plain
    assert _job(limited, "team-a/first")["state"] == "succeeded"


def test_a_job_past_its_limit_fails_at_its_deadline(config: SchedulerConfig) -> None:
    scenario = parse_scenario(_limited(SMALL, "first", "4m"), "s.yaml")
    report = build_report(Simulation(scenario, config).run(), "c")
    first = _job(report, "team-a/first")
    assert (first["state"], first["reason"]) == ("failed", REASON)
    # Bound at `started`, its pods start at the next tick (their startTime): 240s on, they end.
    assert first["finished"] == first["started"] + config.schedule_period + 240
    assert first["history"][-1] == [first["finished"], "done"]
    assert report["jobsByState"] == {"failed": 1, "succeeded": 2}
    assert report["stopped"] == "every job finished"


def test_a_job_killed_at_its_deadline_frees_its_room(config: SchedulerConfig) -> None:
    text = """
nodePools: [{name: gpu, count: 1, capacity: {cpu: 16, memory: 64Gi, nvidia.com/gpu: 8}}]
queues: [{name: team-a}]
jobs:
  - {name: runaway, kind: Job, queue: team-a, duration: 10h, runtimeLimit: 30m,
     roles: {main: {replicas: 1, requests: {cpu: 1, gpu: 8}}}}
  - {name: next, kind: PyTorchJob, queue: team-a, arrival: 1m, duration: 5m,
     roles: {master: {replicas: 1, requests: {cpu: 1, gpu: 8}}}}
"""
    report = build_report(Simulation(parse_scenario(text, "t.yaml"), config).run(), "c")
    runaway, after = _job(report, "team-a/runaway"), _job(report, "team-a/next")
    assert (runaway["state"], runaway["reason"]) == ("failed", REASON)
    assert runaway["finished"] == 1801.0 and runaway["evictions"] == 0
    assert after["state"] == "succeeded" and after["started"] == runaway["finished"]


def test_skipping_quiet_ticks_changes_nothing_with_a_limit_that_bites(
        config: SchedulerConfig) -> None:
    # The PyTorchJob is killed at 241s, mid-way between other events; the Job meets its limit.
    text = _limited(_limited(SMALL, "first", "4m"), "third", "200s")
    jumping, every = both_ways(parse_scenario(text, "s.yaml"), config)
    assert jumping == every
    assert _job(jumping, "team-a/first")["finished"] == 241.0
    assert _job(jumping, "team-b/third")["state"] == "succeeded"


# -- bad limits ----------------------------------------------------------------------------

@pytest.mark.parametrize(("limit", "expected"), [
    ("0s", "jobs[0] (first).runtimeLimit: must be more than zero"),
    ("0", "jobs[0] (first).runtimeLimit: must be more than zero"),
    ("soon", "jobs[0] (first).runtimeLimit: not a duration: 'soon'"),
    ("600", "jobs[0] (first).runtimeLimit: a duration needs a unit: 600 could mean seconds "
            "or minutes"),
    ("-5m", "jobs[0] (first).runtimeLimit: not a duration: '-5m'"),
    ("2000000h", "jobs[0] (first).runtimeLimit: at most 4294967295s (a pod's "
                 "activeDeadlineSeconds), got '2000000h'"),
])
def test_a_bad_runtime_limit_names_the_field(limit: str, expected: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(_limited(SMALL, "first", limit), "bad.yaml")
    message = str(caught.value)
    assert message.startswith("bad.yaml: ") and "\n" not in message
    assert expected in message, message
