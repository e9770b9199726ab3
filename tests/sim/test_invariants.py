"""The invariant checker catches what it promises to catch, naming the moment
and the objects."""
from __future__ import annotations

import pytest

from kaisched.api.clock import ManualClock
from kaisched.cluster.memory import MemoryCluster
from kaisched.sim.invariants import Invariants, InvariantViolation
from kaisched.sim.meter import Meter


def world() -> MemoryCluster:
    cluster = MemoryCluster(ManualClock())
    for name in ("n1", "n2"):
        cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                        "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "4"}}})
    cluster.create({"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup",
                    "metadata": {"name": "gang", "namespace": "ns"}, "spec": {"minMember": 3}})
    return cluster


def pod(cluster: MemoryCluster, name: str, gpu: int, queue: str = "team-a",
        group: str | None = "gang") -> str:
    meta = {"name": name, "namespace": "ns", "labels": {"kaisched.io/queue": queue}}
    if group:
        meta["annotations"] = {"kaisched.io/pod-group": group}
    cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                    "spec": {"containers": [{"name": "c", "resources": {
                        "requests": {"nvidia.com/gpu": str(gpu)},
                        "limits": {"nvidia.com/gpu": str(gpu)}}}]},
                    "status": {"phase": "Pending"}})
    return f"ns/{name}"


def checker(cluster: MemoryCluster, limit: float | None = None) -> Invariants:
    limits = {"team-a": {"nvidia.com/gpu": limit}} if limit is not None else {}
    return Invariants(Meter(cluster), limits, {"team-a": None})


def test_a_healthy_cluster_passes() -> None:
    cluster = world()
    check = checker(cluster, limit=8)
    keys = [pod(cluster, f"p{i}", 2) for i in range(3)]
    for key, node in zip(keys, ("n1", "n1", "n2"), strict=True):
        cluster.bind("ns", key.split("/")[1], "", node)
    check.check(60.0, 1, keys, [])
    assert check.checks == 1


def test_an_over_committed_node_is_caught() -> None:
    cluster = world()
    check = checker(cluster)
    for name in ("a", "b", "c"):
        pod(cluster, name, 2, group=None)
        cluster.bind("ns", name, "", "n1")
    with pytest.raises(InvariantViolation) as caught:
        check.check(3725.0, 7, [], [])
    message = str(caught.value)
    assert "at 1:02:05 (session 7)" in message
    assert "node n1 over-committed in nvidia.com/gpu: 6 used of 4" in message
    assert "ns/a, ns/b, ns/c" in message


def test_a_queue_over_its_limit_is_caught() -> None:
    cluster = world()
    check = checker(cluster, limit=3)
    for name, node in (("a", "n1"), ("b", "n2")):
        pod(cluster, name, 2, group=None)
        cluster.bind("ns", name, "", node)
    with pytest.raises(InvariantViolation, match=r"queue team-a over its limit in "
                                                 r"nvidia.com/gpu: 4 used, limit 3 \(pods: ns/a, ns/b\)"):
        check.check(10.0, 2, [], [])


def test_a_partly_bound_strict_gang_is_caught() -> None:
    cluster = world()
    check = checker(cluster)
    keys = [pod(cluster, f"p{i}", 1) for i in range(3)]
    for key in keys[:2]:
        cluster.bind("ns", key.split("/")[1], "", "n1")
    with pytest.raises(InvariantViolation, match=r"Strict gang ns/gang left partly running after "
                                                 r"pods were bound: 2/3 pods alive"):
        check.check(5.0, 3, keys[:2], [])


def test_a_gang_partly_evicted_is_caught_and_one_evicted_whole_is_not() -> None:
    cluster = world()
    check = checker(cluster)
    keys = [pod(cluster, f"p{i}", 1) for i in range(3)]
    for key in keys:
        cluster.bind("ns", key.split("/")[1], "", "n2")
    check.check(1.0, 1, keys, [])
    cluster.evict("ns", "p0")
    with pytest.raises(InvariantViolation, match="after pods were evicted: 2/3 pods alive"):
        check.check(2.0, 2, [], ["ns/p0"])
    for name in ("p1", "p2"):
        cluster.evict("ns", name)
    check.check(3.0, 3, [], ["ns/p1", "ns/p2"])      # the whole gang went: fine
