"""Operators that start a job in steps, emulated as they run on a cluster, and
the PodGroups the real PodGrouper makes for each step: an InOrder JobSet makes
its later replicatedJobs once the earlier ones run, a WaitForWorkersReady
MPIJob its launcher once the workers run, a LeaderReady LeaderWorkerSet its
workers once their leader runs. None deadlocks: the example finishes."""
from __future__ import annotations

from pathlib import Path

import pytest

from kaisched.api import labels as L
from kaisched.api.clock import ManualClock
from kaisched.cluster.kinds import POD, PODGROUP
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import SchedulerConfig
from kaisched.sim.controllers import Controllers, JobRun, JobState
from kaisched.sim.report import build_report
from kaisched.sim.scenario import ScenarioError, load_scenario, parse_scenario
from kaisched.sim.simulation import Simulation
from podgrouper.controller import PodGrouper
from podgrouper.groupers.spec import podgroup_name

EXAMPLE = Path(__file__).resolve().parents[2] / "kaisched" / "examples" / "workloads-2026.yaml"


def scenario(kind: str, policy: str, roles: str) -> str:
    return f"""
nodePools: [{{name: gpu, count: 2, capacity: {{cpu: 32, memory: 256Gi, nvidia.com/gpu: 8}}}}]
queues: [{{name: team-a}}]
jobs:
  - name: job-1
    kind: {kind}
    startupPolicy: {policy}
    queue: team-a
    duration: 5m
    roles:
      {roles}
"""


class World:
    def __init__(self, text: str) -> None:
        self.cluster = MemoryCluster(ManualClock())
        self.controllers = Controllers(self.cluster, "kaisched", {})
        self.grouper = PodGrouper(self.cluster, ManualClock())
        self.run = JobRun(parse_scenario(text, "t.yaml").jobs[0])
        self.controllers.submit(self.run, 0.0)
        self.grouper.sync()

    def pods(self) -> dict[str, dict]:
        return {p["metadata"]["name"]: p for p in self.cluster.list(POD, "team-a")}

    def groups(self) -> dict[str, int]:
        return {g["metadata"]["name"]: g["spec"]["minMember"] for g in self.cluster.list(PODGROUP)}

    def start(self, *names: str) -> None:
        """The kubelet starts these pods; the operator sees it on its watch."""
        for name in names:
            pod = self.cluster.get(POD, "team-a", name)
            self.cluster.replace({**pod, "spec": {**pod["spec"], "nodeName": "gpu-0"},
                                  "status": {"phase": "Running"}})
        self.controllers.tick(0.0)
        self.grouper.sync()


def group_of(pod: dict) -> str:
    return pod["metadata"]["annotations"][L.POD_GROUP_ANNOTATION]


def test_in_order_jobset_makes_each_replicated_job_after_the_last_runs() -> None:
    world = World(scenario("JobSet", "InOrder",
                           "driver: {replicas: 1, requests: {cpu: 1}}\n"
                           "      workers: {replicas: 3, requests: {cpu: 1, gpu: 1}}"))
    owner = world.run.objects[0]
    assert owner["spec"]["startupPolicy"] == {"startupPolicyOrder": "InOrder"}
    (driver,) = world.pods().values()
    assert world.groups() == {podgroup_name(owner, "driver"): 1}
    assert group_of(driver) == world.run.pod_group == podgroup_name(owner, "driver")
    world.start(driver["metadata"]["name"])
    workers = [p for p in world.pods().values() if "workers" in p["metadata"]["name"]]
    assert len(workers) == 3
    assert world.groups() == {podgroup_name(owner, "driver"): 1, podgroup_name(owner, "workers"): 3}
    assert {group_of(p) for p in workers} == {podgroup_name(owner, "workers")}


def test_mpi_launcher_comes_once_the_workers_run_and_joins_their_gang() -> None:
    world = World(scenario("MPIJob", "WaitForWorkersReady",
                           "launcher: {replicas: 1, requests: {cpu: 1}}\n"
                           "      worker: {replicas: 2, requests: {cpu: 1, gpu: 2}}"))
    owner = world.run.objects[0]
    assert sorted(world.pods()) == ["job-1-worker-0", "job-1-worker-1"]
    assert [o["kind"] for o in world.run.objects] == ["MPIJob"]
    group = world.cluster.get(PODGROUP, "team-a", podgroup_name(owner))
    assert group["spec"]["minMember"] == 2
    assert group["spec"]["subGroups"] == [{"name": "launcher", "minMember": 0},
                                          {"name": "worker", "minMember": 2}]
    world.start("job-1-worker-0")
    assert len(world.pods()) == 2                 # one worker is not enough
    world.start("job-1-worker-1")
    launcher = [p for n, p in world.pods().items() if "launcher" in n]
    assert len(launcher) == 1 and group_of(launcher[0]) == podgroup_name(owner)
    assert [o["kind"] for o in world.run.objects] == ["MPIJob", "Job"]


def test_leader_ready_lws_starts_each_leader_alone_then_the_whole_group() -> None:
    """LeaderReady: a group's gang is its leader alone until the leader runs;
    its workers, made then, join the same PodGroup, which needs the whole
    group from then on (size pods, leader included), as KAI reads it."""
    world = World(scenario("LeaderWorkerSet", "LeaderReady",
                           "leader: {replicas: 2, requests: {cpu: 1, gpu: 1}}\n"
                           "      worker: {replicas: 4, requests: {cpu: 1, gpu: 1}}"))
    owner = world.run.objects[0]
    assert sorted(world.pods()) == ["job-1-0", "job-1-1"]
    assert world.groups() == {podgroup_name(owner, "0"): 1, podgroup_name(owner, "1"): 1}
    world.start("job-1-0", "job-1-1")
    assert sorted(world.pods()) == ["job-1-0", "job-1-0-1", "job-1-0-2", "job-1-1", "job-1-1-1",
                                    "job-1-1-2"]
    assert group_of(world.pods()["job-1-1-2"]) == podgroup_name(owner, "1")
    assert world.groups() == {podgroup_name(owner, "0"): 3, podgroup_name(owner, "1"): 3}


def test_startup_policy_must_be_one_of_the_kinds_orders() -> None:
    with pytest.raises(ScenarioError, match="'InOrder' is not a start order of MPIJob"):
        parse_scenario(scenario("MPIJob", "InOrder", "worker: {replicas: 1, requests: {cpu: 1}}"))
    with pytest.raises(ScenarioError, match="do not split evenly over 2 groups"):
        parse_scenario(scenario("LeaderWorkerSet", "LeaderCreated",
                                "leader: {replicas: 2, requests: {cpu: 1}}\n"
                                "      worker: {replicas: 3, requests: {cpu: 1}}"))


def test_the_example_of_every_new_kind_finishes(config: SchedulerConfig) -> None:
    simulation = Simulation(load_scenario(EXAMPLE), config)
    result = simulation.run()
    assert result.stopped == "every job finished"
    assert {r.spec.name: r.state for r in result.runs} == {
        name: JobState.SUCCEEDED for name in ("pipeline", "allreduce", "llm-serve", "finetune",
                                              "boosted-trees", "jax-pretrain", "ray-serve")}
    report = build_report(result, "built-in")
    assert {j["name"].split("/")[1]: j["state"] for j in report["jobs"]}["allreduce"] == "succeeded"
    # Finished jobs are removed whole: every stage's and group's PodGroup too.
    assert simulation.cluster.list(PODGROUP) == []
