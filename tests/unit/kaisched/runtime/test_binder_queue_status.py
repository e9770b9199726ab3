"""Queue status end to end on the memory backend: the scheduler writes each
Queue's status when it changes and not otherwise, `kubectl get queues` finds
its printer columns in what was written, and /metrics carries the same figures.

Under the binder, which writes the status; the metrics read the same figures."""
from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import yaml

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD, QUEUE
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import default_config
from kaisched.framework.effects import SetQueueStatus
from kaisched.runtime.binder import Binder
from kaisched.runtime.cycle import CycleResult
from kaisched.runtime.metrics import Metrics
from kaisched.runtime.scheduler import Scheduler
from tests.builders import ROOT
from tests.builders.objects import build_node, build_pod, build_podgroup, build_queue

CRD = ROOT / "config" / "crds" / "queues.yaml"
GPU = "nvidia.com/gpu"


def objects() -> list[dict]:
    return [
        build_node("gpu-1", cpu=32, gpu=4, memory="256Gi"),
        build_node("gpu-2", cpu=32, gpu=4, memory="256Gi"),
        build_queue("research", resources={GPU: {"quota": 8}}),
        build_queue("team-a", "research", {GPU: {"quota": 4, "limit": 6}}),
        build_queue("team-b", "research", {GPU: {"quota": 4}}),
        build_podgroup("train", 2, queue="team-a"),
        *[build_pod(f"train-{i}", cpu=2, gpu=2, group="train") for i in range(2)],
        build_podgroup("big", 3, queue="team-b"),
        *[build_pod(f"big-{i}", cpu=2, gpu=2, group="big") for i in range(3)],
        build_pod("notebook", cpu=1),                     # the implicit default queue
    ]


class Setup:
    def __init__(self) -> None:
        self.clock = ManualClock()
        self.cluster = MemoryCluster(self.clock)
        for obj in objects():
            self.cluster.create(obj)
        registry = register_builtins()
        self.scheduler = Scheduler(self.cluster, default_config(registry), registry, self.clock,
                                   Binder(self.cluster, self.clock.now))

    def cycle(self) -> CycleResult:
        result = self.scheduler.run_once()
        assert result.report.failed == []
        self.clock.advance(1.0)
        return result

    def queue(self, name: str) -> dict[str, Any]:
        obj = self.cluster.get(QUEUE, "", name)
        assert obj is not None
        return obj


def written(result: CycleResult) -> dict[str, SetQueueStatus]:
    return {e.queue: e for e in result.effects if isinstance(e, SetQueueStatus)}


def test_status_is_written_once_and_again_only_when_it_changes() -> None:
    setup = Setup()
    first = written(setup.cycle())
    assert set(first) == {"research", "team-a", "team-b"}       # not the implicit default
    status = setup.queue("team-a")["status"]
    assert status == {"allocated": {"cpu": "4", "memory": "0", GPU: "4"},
                      "fairShare": {"cpu": "4", "memory": "0", GPU: "4"},
                      "quota": {"cpu": "0", "memory": "0", GPU: "4"},
                      "limit": {GPU: "6"}, "runningJobs": 1, "pendingJobs": 0}
    # team-b's gang of 3 x 2 GPUs does not fit the 4 GPUs left: it waits.
    assert setup.queue("team-b")["status"]["pendingJobs"] == 1
    assert setup.queue("research")["status"]["runningJobs"] == 1
    version = setup.queue("team-a")["metadata"]["resourceVersion"]

    # The pods start running: the numbers are the same, nothing is written.
    for pod in setup.cluster.list(POD):
        if pod["spec"].get("nodeName"):
            setup.cluster.replace({**pod, "status": {"phase": "Running"}})
    assert written(setup.cycle()) == {}
    assert written(setup.cycle()) == {}
    assert setup.queue("team-a")["metadata"]["resourceVersion"] == version

    # The training job finishes: team-a's use drops, and team-b's gang now fits.
    for i in range(2):
        setup.cluster.delete(POD, "default", f"train-{i}")
    changed = written(setup.cycle())
    assert set(changed) == {"research", "team-a", "team-b"}
    assert setup.queue("team-a")["status"]["allocated"][GPU] == "0"
    assert setup.queue("team-a")["status"]["runningJobs"] == 0
    assert setup.queue("team-b")["status"]["allocated"][GPU] == "6"
    assert setup.queue("team-b")["status"]["runningJobs"] == 1
    assert written(setup.cycle()) == {}


def jsonpath_value(obj: Any, path: str) -> Any:
    """A simple printer-column JSONPath, as kubectl evaluates it (`\\.` is a
    dot inside a key); None where the object has no such field."""
    for key in path[1:].replace("\\.", "\0").split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key.replace("\0", "."))
    return obj


def crd_version() -> dict:
    (version,) = yaml.safe_load(CRD.read_text())["spec"]["versions"]
    return version


TYPES = {"string": str, "integer": int, "date": str}


def test_printer_columns_resolve_against_the_written_status() -> None:
    setup = Setup()
    setup.cycle()
    columns = {c["name"]: c for c in crd_version()["additionalPrinterColumns"]}
    row = {}
    for name, column in columns.items():
        value = jsonpath_value(setup.queue("team-a"), column["jsonPath"])
        if name in ("Parent", "Priority", "GPU Usage"):
            continue        # spec fields a user may leave out; usage only with usageDBConfig
        assert isinstance(value, TYPES[column["type"]]), (name, value)
        row[name] = value
    assert (row["GPU Allocated"], row["GPU Fair Share"], row["GPU Quota"]) == ("4", "4", "4")
    assert (row["Running"], row["Pending"]) == (1, 0)
    # A queue with no GPU use shows 0, not an empty cell.
    assert jsonpath_value(setup.queue("team-b"), columns["GPU Allocated"]["jsonPath"]) == "0"


@pytest.mark.parametrize("name", ["research", "team-a", "team-b"])
def test_the_written_status_validates_against_the_crd(name: str) -> None:
    setup = Setup()
    setup.cycle()
    schema = crd_version()["schema"]["openAPIV3Schema"]
    assert list(jsonschema.Draft4Validator(schema).iter_errors(setup.queue(name))) == []


def gauge(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_queue_gauges_follow_the_cycle_results() -> None:
    setup = Setup()
    metrics = Metrics()
    metrics.observe(setup.cycle())
    assert gauge(metrics, "kaisched_queue_allocated", queue="team-a", resource=GPU) == 4
    assert gauge(metrics, "kaisched_queue_allocated", queue="team-a", resource="cpu") == 4
    assert gauge(metrics, "kaisched_queue_fair_share", queue="team-b", resource=GPU) == 4
    assert gauge(metrics, "kaisched_queue_quota", queue="research", resource=GPU) == 8
    assert gauge(metrics, "kaisched_queue_limit", queue="team-a", resource=GPU) == 6
    assert gauge(metrics, "kaisched_queue_limit", queue="team-b", resource=GPU) is None
    assert gauge(metrics, "kaisched_queue_jobs", queue="team-b", state="pending") == 1
    assert gauge(metrics, "kaisched_queue_jobs", queue="research", state="running") == 1
    for i in range(2):
        setup.cluster.delete(POD, "default", f"train-{i}")
    metrics.observe(setup.cycle())
    assert gauge(metrics, "kaisched_queue_allocated", queue="team-a", resource=GPU) == 0
    assert gauge(metrics, "kaisched_queue_allocated", queue="team-b", resource=GPU) == 6
    assert gauge(metrics, "kaisched_queue_jobs", queue="team-b", state="running") == 1
