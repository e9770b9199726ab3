"""The gpusharing plugin (plugins/gpusharing.py) through one cycle with the built-in
config: fractions share a GPU before opening another, go to the node with a shared GPU
before a fuller one, get their reservation pod, and a share no node has room for says why.
The device model under it is tested in tests/unit/kaisched/api/test_gpudevices.py; its
invariants over random clusters in tests/unit/properties/test_gpusharing.py."""
from __future__ import annotations

import pytest

from kaisched.cluster.kinds import POD
from kaisched.errors import ConfigError
from plugins.gpusharing import GpuSharingPlugin
from tests.builders.objects import (
    build_node,
    build_pod,
    pod_scheduled_message,
    reservation_pod,
    run_default_cycle,
    sharer_pod,
)

GROUP = "runai-gpu-group"


def test_two_halves_share_one_gpu_held_by_one_reservation_pod() -> None:
    cycle = run_default_cycle([build_node("n1", cpu=8, gpu=2), sharer_pod("a", "0.5"),
                               sharer_pod("b", "0.5")])
    assert cycle.bindings == {"default/a": "n1", "default/b": "n1"}
    a, b = (cycle.cluster.get(POD, "default", name) for name in ("a", "b"))
    assert a["metadata"]["labels"][GROUP] == b["metadata"]["labels"][GROUP]
    [reservation] = cycle.cluster.list(POD, "kaisched-system")
    assert reservation["metadata"]["labels"][GROUP] == a["metadata"]["labels"][GROUP]
    assert reservation["spec"]["nodeName"] == "n1"


def test_a_fraction_joins_a_shared_gpu_before_a_fuller_node() -> None:
    """n2 is fuller (binpack's choice for any other pod); n1 has half a GPU shared."""
    cluster = [build_node("n1", cpu=8, gpu=2), build_node("n2", cpu=8, gpu=2),
               sharer_pod("a", "0.5", "n1", "g"), reservation_pod("r", "n1", "g"),
               build_pod("busy", cpu=6, gpu=1, node="n2")]
    assert run_default_cycle([*cluster, build_pod("plain", cpu=1)]).bindings == {"default/plain": "n2"}
    cycle = run_default_cycle([*cluster, sharer_pod("b", "0.5")])
    assert cycle.bindings == {"default/b": "n1"}
    assert cycle.cluster.get(POD, "default", "b")["metadata"]["labels"][GROUP] == "g"
    assert len(cycle.cluster.list(POD, "kaisched-system")) == 1      # r holds it already


def test_a_share_larger_than_any_gpu_has_free_waits_saying_the_most_there_is() -> None:
    cycle = run_default_cycle([build_node("n1", cpu=8, gpu=1), sharer_pod("a", "0.5", "n1", "g"),
                               reservation_pod("r", "n1", "g"), sharer_pod("b", "0.75")])
    assert cycle.bindings == {}
    assert ("gpu-fraction 0.75: no node has it free (the most free on a shared GPU is 0.5"
            in pod_scheduled_message(cycle.cluster, "b"))


def test_a_memory_share_waits_where_no_node_labels_its_gpu_memory() -> None:
    cycle = run_default_cycle([build_node("n1", cpu=8, gpu=2),
                               build_pod("m", annotations={"gpu-memory": "1000"})])
    assert cycle.bindings == {}
    assert "no node labels its GPUs' memory (nvidia.com/gpu.memory)" in \
        pod_scheduled_message(cycle.cluster, "m")


@pytest.mark.parametrize(("arguments", "message"), [
    ({"reservationImage": ""}, "reservationImage: expected an image name"),
    ({"reservationImage": 3}, "reservationImage: expected an image name"),
    ({"image": "pause"}, "image"),
])
def test_its_arguments_are_checked(arguments: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        GpuSharingPlugin(arguments)
    assert GpuSharingPlugin({"reservationImage": "example.com/pause:1"}).image == "example.com/pause:1"
