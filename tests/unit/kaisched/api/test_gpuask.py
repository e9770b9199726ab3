"""A pod's share of a GPU read off its annotations (kaisched/api/gpuask.py): what it asks,
the shared GPUs its labels say it holds, what it is charged, a node's GPU memory read off
its label, and a bad annotation said with an Event."""
from __future__ import annotations

import pytest

from kaisched.api.gpuask import GpuShare, gpu_memory_label, group_labels, parse_share, reservation_name
from kaisched.api.resource import GPU, Resource
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import EVENT
from kaisched.cluster.snapshot import load_file
from kaisched.framework import default_config
from kaisched.tools.replay import replay
from tests.builders import SCENARIOS


@pytest.mark.parametrize(("annotations", "gpu", "share", "problem"), [
    ({"gpu-fraction": "0.5"}, 0, GpuShare(0.5, None, 1, (), 0.5), None),
    ({"gpu-fraction": "1"}, 0, GpuShare(1.0, None, 1, (), 1.0), None),
    ({"gpu-memory": "20480"}, 0, GpuShare(None, 20480, 1, (), None), None),
    ({"gpu-fraction": "0.25", "gpu-fraction-num-devices": "2"}, 0, GpuShare(0.25, None, 2, (), 0.25),
     None),
    ({"gpu-fraction": "1.5"}, 0, None, "must be in (0, 1]"),
    ({"gpu-fraction": "-0.5"}, 0, None, "must be in (0, 1]"),
    ({"gpu-fraction": "nan"}, 0, None, "must be in (0, 1]"),
    ({"gpu-fraction": "half"}, 0, None, "must be a number in (0, 1]"),
    ({"gpu-memory": "20Gi"}, 0, None, "gpu-memory '20Gi': must be an integer number of MiB"),
    ({"gpu-memory": "0"}, 0, None, "must be an integer number of MiB"),
    ({"gpu-fraction": "0.5"}, 1, None, "does not also request nvidia.com/gpu"),
    ({"gpu-fraction": "0.5", "gpu-memory": "100"}, 0, None, "one or the other, not both"),
    ({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"}, 0, None, "integer >= 1"),
    ({"gpu-fraction-num-devices": "2"}, 0, None, "only with gpu-fraction or gpu-memory"),
    ({}, 1, None, None),
])
def test_a_share_is_read_or_refused_saying_why(annotations, gpu, share, problem) -> None:
    got, why = parse_share(annotations, {}, gpu)
    assert got == share
    assert (why is None) == (problem is None)
    if problem:
        assert problem in why and why.startswith(("annotation", "annotations"))


def test_the_groups_a_pod_holds_are_read_back_and_written_as_kai_does() -> None:
    share, _ = parse_share({"gpu-fraction": "0.5"}, {"runai-gpu-group": "g1"}, 0)
    assert share.groups == ("g1",)
    several, _ = parse_share({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"},
                             {"runai-gpu-group": "a", "runai-gpu-group/a": "a",
                              "runai-gpu-group/b": "b"}, 0)
    assert several.groups == ("a", "b")
    assert group_labels(("a", "b"), previous=("c",)) == {
        "runai-gpu-group": "a", "runai-gpu-group/a": "a", "runai-gpu-group/b": "b",
        "runai-gpu-group/c": None}
    assert len(reservation_name("x" * 80)) <= 63


def test_units_and_charge_on_a_device() -> None:
    half, mem = GpuShare(0.5, None, 1, portion=0.5), GpuShare(None, 20000)
    assert half.units(None) == 500 and half.units(40960) == 20480
    assert mem.units(None) is None and mem.units(10000) is None and mem.units(40960) == 20000
    assert mem.portion_on(40960) == 0.49        # rounded up to a hundredth, as KAI charges
    assert half.charge == Resource.of({GPU: 0.5})
    assert mem.charge.get("kaisched.io/gpu-memory-mib") == 20000


@pytest.mark.parametrize(("label", "mib"), [
    ("40960", 40900),               # MiB, floored to a multiple of 100 (KAI's getNodeGpuMemory)
    ("81920", 81900),
    ("16384", 16300),
    ("100", 100),
    ("42949672960", 40900),         # bytes, as an old GPU feature discovery wrote them
    ("99", None),                   # floored to nothing: no memory to share
    ("0", None),
    ("40GiB", None),
])
def test_node_gpu_memory_is_read_in_mib_floored_to_100_as_kai_reads_it(label, mib) -> None:
    assert gpu_memory_label({"nvidia.com/gpu.memory": label}) == mib


def test_bad_input_is_said_with_an_event_and_stops_nothing_else() -> None:
    path = SCENARIOS / "gpushare-bad-input.yaml"
    registry = register_builtins()
    result = replay(load_file(path).objects, default_config(registry), registry, 1)
    said = [e["message"] for e in result.cluster.list(EVENT) if e["reason"] == "FailedScheduling"]
    assert any("annotation gpu-memory '20Gi': must be an integer number of MiB" in m for m in said)
    assert any("annotation gpu-fraction '1.5'" in m for m in said)
    assert result.bindings == {"default/healthy": "node0"}
