"""The emulated kubelet: bound pods start, containers exit after their
duration, evicted pods stay Releasing for their grace period, then go."""
from __future__ import annotations

from kaisched.api.clock import to_rfc3339
from kaisched.cluster.kinds import POD
from kaisched.cluster.memory import MemoryCluster
from kaisched.sim.kubelet import Kubelet
from tests.builders.sim import one_pod

GRACE = {"terminationGracePeriodSeconds": 5}


def phase(cluster: MemoryCluster) -> str | None:
    pod = cluster.get(POD, "ns", "p")
    return None if pod is None else pod["status"]["phase"]


def test_bound_pods_run_then_succeed_after_their_duration() -> None:
    clock, cluster = one_pod(spec=GRACE)
    kubelet = Kubelet(cluster)
    kubelet.tick(clock.now())
    assert phase(cluster) == "Pending" and kubelet.next_event() is None   # not bound: nothing
    cluster.bind("ns", "p", "", "n1")
    assert kubelet.busy()
    clock.advance(1)
    kubelet.tick(clock.now())
    assert phase(cluster) == "Running" and kubelet.started == ["ns/p"]
    assert cluster.get(POD, "ns", "p")["status"]["startTime"] == to_rfc3339(1001.0)
    assert kubelet.next_event() == 1091.0 and not kubelet.busy()
    clock.set(1090.0)
    kubelet.tick(clock.now())
    assert phase(cluster) == "Running"
    clock.set(1091.0)
    kubelet.tick(clock.now())
    assert phase(cluster) == "Succeeded"
    terminated = cluster.get(POD, "ns", "p")["status"]["containerStatuses"][0]["state"]
    assert terminated == {"terminated": {"exitCode": 0, "reason": "Completed"}}


def test_evicted_pods_release_their_node_after_the_grace_period() -> None:
    clock, cluster = one_pod(spec=GRACE)
    kubelet = Kubelet(cluster)
    cluster.bind("ns", "p", "", "n1")
    clock.advance(1)
    kubelet.tick(clock.now())
    cluster.evict("ns", "p")                   # deletionTimestamp at 1001: Releasing
    assert kubelet.busy() and kubelet.next_event() == 1006.0
    clock.set(1005.0)
    kubelet.tick(clock.now())
    assert phase(cluster) == "Running"          # still on its node
    clock.set(1006.0)
    kubelet.tick(clock.now())
    assert phase(cluster) is None and not kubelet.busy()
    clock.set(2000.0)
    kubelet.tick(clock.now())                   # its old exit timer finds nothing to end
    assert phase(cluster) is None


def test_default_grace_is_kubernetes_default() -> None:
    clock, cluster = one_pod()
    kubelet = Kubelet(cluster)
    cluster.bind("ns", "p", "", "n1")
    cluster.evict("ns", "p")
    kubelet.tick(clock.now())
    assert kubelet.next_event() == 1030.0
