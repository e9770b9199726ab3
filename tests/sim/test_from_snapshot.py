"""`kaisched simulate --from-snapshot`: a what-if that starts from a cluster
as it is. The snapshot here is dumped from the memory backend of a simulated
run after an hour; continuing from it must give what the run itself gave."""
from __future__ import annotations

from pathlib import Path

import attrs
import orjson
import pytest
from click.testing import CliRunner

from kaisched.cli import main
from kaisched.framework import SchedulerConfig
from kaisched.sim.runner import bundled
from kaisched.sim.scenario import load_scenario
from kaisched.sim.simulation import Simulation

HOUR = 3600.0


@pytest.fixture(scope="module")
def demo_after_an_hour(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The demo's snapshot at 1:00:00, and the demo's own report run to the end."""
    from kaisched.builtins.catalog import register_builtins
    from kaisched.framework import default_config
    from kaisched.sim.report import build_report

    config = default_config(register_builtins())
    scenario = load_scenario(bundled())
    stopped = Simulation(attrs.evolve(scenario, until=HOUR), config)
    stopped.run()
    path = tmp_path_factory.mktemp("snap") / "demo-1h.json"
    path.write_bytes(orjson.dumps(stopped.snapshot()))
    whole = build_report(Simulation(scenario, config).run(), "built-in")
    return path, whole


def simulate(*args: str) -> dict:
    result = CliRunner().invoke(main, ["simulate", *args, "--output", "json"])
    assert result.exit_code == 0, result.output + result.stderr
    return orjson.loads(result.stdout)


def test_continuing_from_a_snapshot_gives_what_the_run_gave(demo_after_an_hour) -> None:
    path, whole = demo_after_an_hour
    report = simulate("--from-snapshot", str(path))
    jobs = {j["name"]: j for j in report["jobs"]}
    # At 1:00:00 the demo's two evicted gangs still run; everything else is done.
    assert set(jobs) == {j["name"] for j in whole["jobs"] if j["finished"] > HOUR}
    for job in whole["jobs"]:
        if job["name"] in jobs:
            assert jobs[job["name"]]["finished"] == pytest.approx(job["finished"] - HOUR, abs=1)
            assert jobs[job["name"]]["started"] == 0.0      # running at the snapshot
    assert report["cluster"]["nodes"] == 4 and report["cluster"]["gpus"] == 32
    assert report["stopped"] == "every job finished"


def test_a_redacted_snapshot_continues_the_same(demo_after_an_hour, tmp_path: Path) -> None:
    from kaisched.cluster.snapshot import redact

    path, whole = demo_after_an_hour
    snap = orjson.loads(path.read_bytes())
    snap["items"] = [redact(o) for o in snap["items"]]
    redacted = tmp_path / "redacted.json"
    redacted.write_bytes(orjson.dumps(snap))
    a = simulate("--from-snapshot", str(path))
    b = simulate("--from-snapshot", str(redacted))
    assert [(j["name"], j["finished"]) for j in a["jobs"]] == \
        [(j["name"], j["finished"]) for j in b["jobs"]]


def test_a_scenario_adds_arrivals_to_the_snapshot(demo_after_an_hour, tmp_path: Path) -> None:
    path, _ = demo_after_an_hour
    extra = tmp_path / "more.yaml"
    extra.write_text(LATE)
    report = simulate("--from-snapshot", str(path), str(extra))
    late = next(j for j in report["jobs"] if j["name"] == "team-b/late")
    assert late["submitted"] == 310.0 and late["state"] == "succeeded"
    assert late["started"] >= 310.0


LATE = """
jobs:
  - name: late
    kind: PyTorchJob
    queue: team-b
    arrival: 310s
    duration: 10m
    roles:
      master: {replicas: 1, requests: {cpu: 8, memory: 64Gi, nvidia.com/gpu: 8}}
      worker: {replicas: 1, requests: {cpu: 8, memory: 64Gi, nvidia.com/gpu: 8}}
"""


def test_compare_two_configs_on_the_snapshot(demo_after_an_hour, tmp_path: Path) -> None:
    path, _ = demo_after_an_hour
    slow = tmp_path / "slow.yaml"
    slow.write_text("schedulePeriod: 30s\n")
    extra = tmp_path / "more.yaml"
    extra.write_text(LATE)
    report = simulate("--from-snapshot", str(path), str(extra), "--compare", str(slow))
    first, second = report["compare"]
    assert first["config"] == "the snapshot's config" and second["config"] == str(slow)
    assert {j["name"] for j in first["jobs"]} == {j["name"] for j in second["jobs"]}
    late = [next(j for j in r["jobs"] if j["name"] == "team-b/late") for r in (first, second)]
    # Sessions every 30s: the job that arrives at 5:10 starts on the next one, at 5:30.
    assert late[0]["started"] == 310.0 and late[1]["started"] == 330.0


def bare_pod_snapshot(annotations: dict[str, str] | None = None) -> dict:
    """A GPU node, a pod owned by a kind no operator here emulates (running),
    and a waiting pod of its own."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-0"},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110",
                                       "nvidia.com/gpu": "2"}}}

    def pod(name: str, bound: bool) -> dict:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                             "annotations": dict(annotations or {}),
                             "ownerReferences": [{"apiVersion": "kubeflow.org/v1",
                                                  "kind": "Notebook", "name": name,
                                                  "uid": f"nb-{name}", "controller": True}]},
                "spec": {"schedulerName": "kaisched", **({"nodeName": "gpu-0"} if bound else {}),
                         "containers": [{"name": "main", "image": "nb", "resources": {
                             "requests": {"cpu": "1", "nvidia.com/gpu": "2"},
                             "limits": {"nvidia.com/gpu": "2"}}}]},
                "status": {"phase": "Running" if bound else "Pending",
                           **({"startTime": "2026-01-01T00:00:00Z"} if bound else {})}}
    return {"apiVersion": "kaisched.io/v1alpha1", "kind": "Snapshot",
            "metadata": {"creationTimestamp": "2026-01-01T01:00:00Z"}, "config": {},
            "items": [node, pod("alice", True), pod("bob", False)]}


def test_pods_of_kinds_not_emulated_are_bare_pods_with_their_remaining_time(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    path.write_bytes(orjson.dumps(bare_pod_snapshot()))
    report = simulate("--from-snapshot", str(path), "--remaining", "20m")
    jobs = {j["name"]: j for j in report["jobs"]}
    assert jobs["default/alice"]["kind"] == "PodGroup"
    assert jobs["default/alice"]["finished"] == pytest.approx(1200, abs=2)
    assert jobs["default/bob"]["started"] == pytest.approx(1200, abs=40)
    assert jobs["default/bob"]["turnaround"] == pytest.approx(2400, abs=60)
    # The annotation wins over --remaining.
    path.write_bytes(orjson.dumps(bare_pod_snapshot({"sim.kaisched.io/remaining": "5m"})))
    report = simulate("--from-snapshot", str(path), "--remaining", "20m")
    jobs = {j["name"]: j for j in report["jobs"]}
    assert jobs["default/alice"]["finished"] == pytest.approx(300, abs=2)


def test_without_a_run_time_the_default_is_said(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    path.write_bytes(orjson.dumps(bare_pod_snapshot()))
    result = CliRunner().invoke(main, ["simulate", "--from-snapshot", str(path), "--output", "json"])
    assert result.exit_code == 0, result.stderr
    assert "note: 2 job(s) say nothing of their run time" in result.stderr


def gang_api_snapshot() -> dict:
    """A node of 4 GPUs; a v1beta1 PodGroup gang of 2 running (10 minutes left)
    and a KAI PodGroup gang of 3 waiting in a KAI Queue, each pod asking for a
    GPU: the KAI gang fits only once the upstream one is done."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-0"},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110",
                                       "nvidia.com/gpu": "4"}}}

    def pod(name: str, bound: bool, join: dict, annotations: dict, labels: dict) -> dict:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                             "annotations": {"sim.kaisched.io/remaining": "10m", **annotations},
                             "labels": labels},
                "spec": {"schedulerName": "kaisched", **join,
                         **({"nodeName": "gpu-0"} if bound else {}),
                         "containers": [{"name": "main", "image": "x", "resources": {
                             "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                             "limits": {"nvidia.com/gpu": "1"}}}]},
                "status": {"phase": "Running" if bound else "Pending",
                           **({"startTime": "2026-01-01T00:50:00Z"} if bound else {})}}

    upstream = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "train", "namespace": "default", "uid": "pg-train"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}
    kai = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
           "metadata": {"name": "tune", "namespace": "default", "uid": "pg-tune"},
           "spec": {"minMember": 3, "queue": "team-a",
                    "subGroups": [{"name": "leader", "minMember": 1}, {"name": "worker", "minMember": 2}]}}
    queue = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "team-a"},
             "spec": {"resources": {"gpu": {"quota": 0, "limit": 16, "overQuotaWeight": 1},
                                    "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                                    "memory": {"quota": 1024, "limit": -1, "overQuotaWeight": 1}}}}
    train = [pod(f"train-{i}", True, {"schedulingGroup": {"podGroupName": "train"}}, {}, {})
             for i in range(2)]
    tune = [pod(f"tune-{i}", False, {}, {"pod-group-name": "tune"},
                {"kai.scheduler/subgroup-name": "leader" if i == 0 else "worker"})
            for i in range(3)]
    return {"apiVersion": "kaisched.io/v1alpha1", "kind": "Snapshot",
            "metadata": {"creationTimestamp": "2026-01-01T01:00:00Z"}, "config": {},
            "items": [node, queue, upstream, kai, *train, *tune]}


def test_upstream_and_kai_gangs_are_adopted_as_gangs(tmp_path: Path) -> None:
    """Each gang of the snapshot is one job, named after its PodGroup, with
    its pods, its minimum and its queue as the scheduler reads them from the
    API it is declared in; the KAI gang starts whole when the upstream one
    finishes."""
    path = tmp_path / "snap.json"
    path.write_bytes(orjson.dumps(gang_api_snapshot()))
    result = CliRunner().invoke(main, ["simulate", "--from-snapshot", str(path),
                                       "--kube-version", "1.37", "--output", "json"])
    assert result.exit_code == 0, result.stderr
    assert "2 job(s) of the snapshot, 1 running and 1 waiting" in result.stderr
    jobs = {j["name"]: j for j in orjson.loads(result.stdout)["jobs"]}
    assert set(jobs) == {"default/train", "default/tune"}
    train, tune = jobs["default/train"], jobs["default/tune"]
    assert (train["pods"], train["minMember"], train["queue"]) == (2, 2, "default")
    assert (tune["pods"], tune["minMember"], tune["queue"]) == (3, 3, "team-a")
    assert train["started"] == 0.0 and train["finished"] == pytest.approx(600, abs=2)
    assert tune["started"] == pytest.approx(600, abs=2) and tune["placedWhole"]
    assert {j["state"] for j in jobs.values()} == {"succeeded"}


def test_a_kai_queue_of_the_snapshot_is_read_in_kais_units() -> None:
    """KAI's Queue counts cpu in millicores and memory in megabytes, -1 for all
    of it: the what-if's queue means what the scheduler reads it to mean."""
    from kaisched.sim.start import read_start

    queue = read_start(gang_api_snapshot()["items"], "snap.json", "kaisched").base.queues[0]
    assert queue.name == "team-a"
    assert (queue.quota("nvidia.com/gpu"), queue.limit("nvidia.com/gpu")) == (0, 16)
    assert queue.quota("memory") == 1024e6 and queue.limit("memory") is None
    assert queue.quota("cpu") >= 1e18 and queue.limit("cpu") is None


def test_a_snapshot_without_nodes_is_one_line(tmp_path: Path) -> None:
    snap = bare_pod_snapshot()
    snap["items"] = snap["items"][1:]
    path = tmp_path / "snap.json"
    path.write_bytes(orjson.dumps(snap))
    result = CliRunner().invoke(main, ["simulate", "--from-snapshot", str(path)])
    assert result.exit_code != 0
    assert result.stderr.strip().splitlines()[-1] == \
        f"error: {path}: no Nodes in the snapshot: nothing to simulate on"


def test_a_manifest_given_to_simulate_names_replay() -> None:
    gang = Path(__file__).resolve().parents[2] / "config" / "examples" / "gang.yaml"
    result = CliRunner().invoke(main, ["simulate", str(gang)])
    assert result.exit_code != 0
    assert "run it with `kaisched replay`" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1




def test_the_what_if_workflow_of_the_readme(tmp_path: Path) -> None:
    """Dump a cluster (here the starvation example 20 minutes in), then the
    next hour under two configs: the guard on gives the big gang its room
    sooner. The files are the ones the repository ships."""
    examples = Path(__file__).resolve().parents[2] / "kaisched" / "examples"
    now = tmp_path / "now.json"
    dumped = CliRunner().invoke(main, ["simulate", str(examples / "starvation.yaml"), "--until",
                                       "20m", "--dump-snapshot", str(now), "--output", "json"])
    assert dumped.exit_code == 0, dumped.stderr
    assert "the cluster at 0:20:00 written to" in dumped.stderr
    report = simulate("--from-snapshot", str(now), str(examples / "next-hour.yaml"),
                      "--config", str(examples.parents[1] / "config" / "scheduler.yaml"),
                      "--compare", str(examples / "no-starvation-guard.yaml"))
    guarded, unguarded = report["compare"]
    big = [next(j for j in r["jobs"] if j["name"].endswith("/big-pretrain")) for r in report["compare"]]
    assert big[0]["started"] is not None and big[0]["wait"] < big[1]["wait"]
    assert len(guarded["jobs"]) == len(unguarded["jobs"]) > 180


def test_replay_and_simulate_say_which_command_a_file_is_for() -> None:
    examples = Path(__file__).resolve().parents[2] / "kaisched" / "examples"
    replayed = CliRunner().invoke(main, ["replay", str(examples / "demo.yaml")])
    assert replayed.exit_code != 0
    assert replayed.stderr.strip().splitlines() == [
        f"error: {examples / 'demo.yaml'}: this is a simulate scenario (nodePools, queues, jobs), "
        f"not Kubernetes objects: run it with `kaisched simulate {examples / 'demo.yaml'}`"]
    empty = CliRunner().invoke(main, ["replay", str(examples.parents[1] / "config" / "examples" / "pytorchjob.yaml")])
    assert empty.exit_code == 0
    assert "has no pods: nothing to schedule (its PyTorchJob would get pods from an operator" \
        in empty.stderr


def test_minus_h_works_everywhere() -> None:
    for command in ([], ["simulate"], ["replay"], ["explain"], ["bench"], ["snapshot-dump"],
                    ["run"]):
        result = CliRunner().invoke(main, [*command, "-h"])
        assert result.exit_code == 0, (command, result.output)
        assert result.output.startswith("Usage:")
    from podgrouper.cli import main as podgrouper
    for command in ([], ["run"]):
        result = CliRunner().invoke(podgrouper, [*command, "-h"])
        assert result.exit_code == 0 and result.output.startswith("Usage:")


def test_jobs_running_at_the_snapshot_did_not_wait(demo_after_an_hour) -> None:
    path, _ = demo_after_an_hour
    report = simulate("--from-snapshot", str(path))
    for job in report["jobs"]:
        assert job["history"][:2] == [[0.0, "waiting"], [0.0, "running"]]
        assert job["wait"] == 0.0 and job["waits"] == []


def test_run_times_from_the_scenarios_distribution(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    path.write_bytes(orjson.dumps(bare_pod_snapshot()))
    scenario = tmp_path / "times.yaml"
    scenario.write_text("remaining: {median: 10m, sigma: 0.0}\n")
    report = simulate("--from-snapshot", str(path), str(scenario))
    jobs = {j["name"]: j for j in report["jobs"]}
    assert jobs["default/alice"]["finished"] == pytest.approx(600, abs=2)
    # --remaining, when given, comes before the distribution.
    report = simulate("--from-snapshot", str(path), str(scenario), "--remaining", "3m")
    assert next(j for j in report["jobs"] if j["name"] == "default/alice")["finished"] == \
        pytest.approx(180, abs=2)


def test_the_snapshots_jobs_are_kept_alive_by_their_operators(config: SchedulerConfig,
                                                              tmp_path: Path) -> None:
    """The demo at 0:04:00 (team-a's four gangs fill the cluster), then team-b's
    16-GPU gang arrives: it reclaims two of the snapshot's gangs, whose pods
    their operators make again, and which start again when room frees up."""
    early = Simulation(attrs.evolve(load_scenario(bundled()), until=240.0), config)
    early.run()
    path = tmp_path / "demo-4m.json"
    path.write_bytes(orjson.dumps(early.snapshot()))
    extra = tmp_path / "llama.yaml"
    extra.write_text("""
jobs:
  - name: llama2
    kind: PyTorchJob
    queue: team-b
    priorityClass: train
    arrival: 1m
    duration: 30m
    roles:
      master: {replicas: 1, requests: {cpu: 8, memory: 64Gi, nvidia.com/gpu: 4}}
      worker: {replicas: 3, requests: {cpu: 8, memory: 64Gi, nvidia.com/gpu: 4}}
""")
    report = simulate("--from-snapshot", str(path), str(extra))
    jobs = {j["name"]: j for j in report["jobs"]}
    assert jobs["team-b/llama2"]["placedWhole"]
    evicted = [j for j in report["jobs"] if j["evictions"]]
    assert len(evicted) == 2 and all(j["queue"] == "team-a" for j in evicted)
    for job in evicted:
        assert job["kind"] in ("PyTorchJob", "MPIJob") and job["podsRemade"] == job["podsEvicted"]
        assert job["starts"] == 2 and job["state"] == "succeeded"
    assert {j["state"] for j in report["jobs"]} == {"succeeded"}
