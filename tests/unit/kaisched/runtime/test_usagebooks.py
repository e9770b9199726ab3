"""Built-in usage on the memory backend: the scheduler adds up what each
queue holds, writes it into the Queue's status at most once a minute, goes on
from there after a restart, honours a reset (status.usage cleared), and with
no usageDBConfig does none of it."""
from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import yaml

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import QUEUE
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import default_config, parse_config
from kaisched.framework.effects import SetQueueUsage
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import CycleResult, Scheduler
from tests.builders import ROOT
from tests.builders.objects import build_node, build_pod, build_queue

GPU = "nvidia.com/gpu"
USAGE = "usageDBConfig: {usageParams: {windowSize: 4800s}}\n"     # buckets of 100 s


def objects() -> list[dict[str, Any]]:
    return [build_node("gpu-1", cpu=16, gpu=8), build_queue("team-a"), build_queue("team-b"),
            *[build_pod(f"a-{i}", cpu=1, gpu=1, queue="team-a", node="gpu-1") for i in range(6)],
            build_pod("b-0", cpu=1, gpu=1, queue="team-b", node="gpu-1")]


class Setup:
    def __init__(self, config: str = USAGE, cluster: MemoryCluster | None = None,
                 clock: ManualClock | None = None) -> None:
        self.clock = clock or ManualClock()
        self.cluster = cluster or MemoryCluster(self.clock)
        if cluster is None:
            for obj in objects():
                self.cluster.create(obj)
        registry = register_builtins()
        self.scheduler = Scheduler(self.cluster, parse_config(config, registry), registry,
                                   self.clock, Binder(self.cluster, self.clock.now))

    def cycle(self) -> CycleResult:
        result = self.scheduler.run_once()
        assert result.report.failed == []
        self.clock.advance(1.0)
        return result

    def status_usage(self, queue: str) -> dict[str, Any] | None:
        obj = self.cluster.get(QUEUE, "", queue)
        assert obj is not None
        return (obj.get("status") or {}).get("usage")


def usage_writes(result: CycleResult) -> list[str]:
    return [e.queue for e in result.effects if isinstance(e, SetQueueUsage)]


def test_without_usage_db_config_nothing_of_usage_happens() -> None:
    registry = register_builtins()
    assert default_config(registry).usage_db is None
    setup = Setup(config="{}")
    assert setup.scheduler.usage is None
    for _ in range(90):
        result = setup.cycle()
        assert result.cluster is not None and result.cluster.usage is None
        assert usage_writes(result) == []
    assert setup.status_usage("team-a") is None


def test_usage_is_added_up_and_written_at_most_once_a_minute_per_queue() -> None:
    setup = Setup()
    writes: dict[str, list[float]] = {"team-a": [], "team-b": []}
    start = setup.clock.now()
    for _ in range(250):
        at = setup.clock.now() - start
        for queue in usage_writes(setup.cycle()):
            writes[queue].append(at)
    for times in writes.values():
        assert times and times[0] == 0.0
        assert all(b - a >= 60.0 for a, b in zip(times, times[1:], strict=False))
        assert len(times) == 5                  # 0, 60, 120, 180, 240
    usage = setup.status_usage("team-a")
    assert usage is not None and usage["normalized"][GPU] == pytest.approx(6 / 8)
    assert setup.status_usage("team-b")["normalized"][GPU] == pytest.approx(1 / 8)
    assert usage["buckets"] and len(usage["buckets"]) <= 48
    assert usage["buckets"][0]["held"][GPU] > 0 and usage["buckets"][0]["capacity"][GPU] > 0


def test_a_restarted_scheduler_goes_on_from_the_queue_status() -> None:
    first = Setup()
    for _ in range(130):
        first.cycle()
    kept = first.status_usage("team-a")
    assert kept is not None
    # A new scheduler over the same cluster: its first snapshot carries the usage
    # the status kept, and it adds from the status's last moment on.
    second = Setup(cluster=first.cluster, clock=first.clock)
    result = second.cycle()
    assert result.cluster is not None and result.cluster.usage is not None
    assert result.cluster.usage["team-a"][GPU] == pytest.approx(6 / 8)
    book = second.scheduler.usage
    assert book is not None
    buckets = book.buckets["team-a"]           # type: ignore[attr-defined]
    seconds = sum(b.seconds for b in buckets)
    assert seconds == pytest.approx(130.0, abs=2.0)     # the first one's, and the second since


def test_clearing_status_usage_resets_the_queue() -> None:
    setup = Setup()
    for _ in range(120):
        setup.cycle()
    assert setup.scheduler.run_once().cluster.usage["team-a"][GPU] > 0.7    # type: ignore[union-attr]
    # The documented reset: kubectl patch queue team-a --subresource=status --type=merge
    #   -p '{"status":{"usage":null}}'
    setup.cluster.patch_status(QUEUE, "", "team-a", {"usage": None})
    setup.clock.advance(1.0)
    result = setup.cycle()
    assert result.cluster is not None and result.cluster.usage is not None
    assert result.cluster.usage["team-a"].get(GPU, 0.0) == 0.0
    assert result.cluster.usage["team-b"][GPU] == pytest.approx(1 / 8)    # untouched
    assert "team-a" in usage_writes(result)          # the reset is written back at once
    for _ in range(100):
        setup.cycle()
    # From the reset on, it counts again: 6 of 8 GPUs held since.
    assert setup.status_usage("team-a")["normalized"][GPU] == pytest.approx(6 / 8)


def test_the_written_usage_validates_against_the_crd_and_fills_the_column() -> None:
    crd = ROOT / "config" / "crds" / "queues.yaml"
    (version,) = yaml.safe_load(crd.read_text())["spec"]["versions"]
    setup = Setup("usageDBConfig: {usageParams: {windowSize: 480s}}\n")   # buckets of 10 s
    for _ in range(700):                       # more than a window: the bucket list is full
        setup.cycle()
    queue = setup.cluster.get(QUEUE, "", "team-a")
    assert queue is not None and len(queue["status"]["usage"]["buckets"]) == 48
    validator = jsonschema.Draft4Validator(version["schema"]["openAPIV3Schema"])
    assert list(validator.iter_errors(queue)) == []
    (column,) = [c for c in version["additionalPrinterColumns"] if c["name"] == "GPU Usage"]
    value = queue["status"]["usage"]["normalized"]["nvidia.com/gpu"]
    assert column["jsonPath"] == ".status.usage.normalized.nvidia\\.com/gpu"
    assert isinstance(value, float) and value == pytest.approx(6 / 8)


def test_each_shard_writes_the_usage_of_its_own_queues_only() -> None:
    """Two node-pool shards on one cluster: each accounts and writes its own
    pool's queues, and only reads the other's (were both to write every queue,
    each would take the other's record for a reset)."""
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    label = "kaisched.io/pool"
    for obj in (build_node("gpu-a", cpu=16, gpu=8, labels={label: "a"}),
                build_node("gpu-b", cpu=16, gpu=8, labels={label: "b"}),
                build_queue("team-a"), build_queue("team-b"),
                *[build_pod(f"a-{i}", cpu=1, gpu=1, queue="team-a", node="gpu-a")
                  for i in range(6)],
                build_pod("b-0", cpu=1, gpu=1, queue="team-b", node="gpu-b")):
        cluster.create(obj)
    for name, pool in (("team-a", "a"), ("team-b", "b")):
        cluster.patch(QUEUE, "", name, {"metadata": {"labels": {label: pool}}})
    shards = {pool: Setup(USAGE + f"nodePool: {{label: {label}, value: {pool}}}\n",
                          cluster, clock) for pool in "ab"}
    written: dict[str, set[str]] = {"a": set(), "b": set()}
    for _ in range(130):
        for pool, shard in shards.items():
            written[pool].update(usage_writes(shard.scheduler.run_once()))
        clock.advance(1.0)
    assert written == {"a": {"team-a"}, "b": {"team-b"}}
    setup = shards["a"]
    assert setup.status_usage("team-a")["normalized"][GPU] == pytest.approx(6 / 8)
    assert setup.status_usage("team-b")["normalized"][GPU] == pytest.approx(1 / 8)
