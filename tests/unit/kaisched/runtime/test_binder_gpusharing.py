"""The binder and shared GPUs: the reservation pod made before the sharer is recorded on
its GPU, with the sharer's tolerations; KAI's orphaned reservation pods evicted."""
from __future__ import annotations

from kaisched.api.clock import ManualClock
from kaisched.api.types import JobKey, NodeName, PodKey
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD
from kaisched.framework import default_config
from kaisched.framework.effects import ReleaseGpu, Reservation, ShareGpu
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from tests.builders.objects import build_node, load_cluster, reservation_pod, sharer_pod, taint


def test_the_binder_makes_the_reservation_pod_before_recording_the_sharer() -> None:
    cluster = load_cluster([build_node("n", gpu=1), sharer_pod("a", "0.5")])
    binder = Binder(cluster, ManualClock().now)
    tolerations = ()
    reserve = Reservation(PodKey("kaisched-system/gpu-reservation-g"), NodeName("n"), "g",
                          tolerations, "registry.k8s.io/pause:3.10")
    share = ShareGpu(PodKey("default/a"), JobKey("default/a"), NodeName("n"), ("g",), (), (reserve,))
    report = binder.apply([share, share])           # a second sharer's: the pod exists already
    assert not report.failed
    made = cluster.get(POD, "kaisched-system", "gpu-reservation-g")
    assert made["spec"]["nodeName"] == "n"
    assert made["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert made["spec"]["priorityClassName"] == "system-node-critical"
    assert made["metadata"]["labels"] == {"app": "kaisched-gpu-reservation", "runai-gpu-group": "g",
                                          "app.kubernetes.io/part-of": "kaisched"}
    sharer = cluster.get(POD, "default", "a")
    assert sharer["metadata"]["labels"]["runai-gpu-group"] == "g"
    assert sharer["metadata"]["annotations"]["received-resource-type"] == "Fraction"
    binder.apply([ReleaseGpu(PodKey("kaisched-system/gpu-reservation-g"), NodeName("n"), "g")])
    assert cluster.get(POD, "kaisched-system", "gpu-reservation-g") is None


def test_a_reservation_pod_tolerates_what_its_sharer_tolerates() -> None:
    """On a tainted GPU node the kubelet admits the reservation pod too: it
    carries the tolerations of the sharer it is made for."""
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    pod = sharer_pod("a", "0.5")
    pod["spec"]["tolerations"] = tolerations
    cluster = load_cluster([build_node("n", gpu=1, taints=[taint("dedicated", "gpu")]), pod])
    registry, clock = register_builtins(), ManualClock()
    result = Scheduler(cluster, default_config(registry), registry, clock,
                       Binder(cluster, clock.now)).run_once()
    assert not result.report.failed and cluster.get(POD, "default", "a")["spec"]["nodeName"] == "n"
    [made] = cluster.list(POD, "kaisched-system")
    assert made["spec"]["nodeName"] == "n" and made["spec"]["tolerations"] == tolerations


def test_kais_orphaned_reservation_pods_are_evicted_not_deleted() -> None:
    cluster = load_cluster([build_node("n", gpu=1),
                            reservation_pod("r", "n", "k", "kai-resource-reservation", "runai-reservation")])
    Binder(cluster, ManualClock().now).apply(
        [ReleaseGpu(PodKey("kai-resource-reservation/r"), NodeName("n"), "k", kai=True)])
    assert cluster.get(POD, "kai-resource-reservation", "r")["metadata"].get("deletionTimestamp")
