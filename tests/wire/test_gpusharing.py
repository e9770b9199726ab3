"""GPU sharing over the wire: a reservation pod's life, through the real
kubernetes client against the emulator. The first sharer of a GPU gets its
reservation pod made (bound to the node from the start) and is labelled with
the GPU before its bind; a second sharer joins without another; once both
are gone the reservation pod is deleted; KAI's orphaned reservation pods are
evicted. The scheduler never waits for a reservation pod to run (nothing
here runs one)."""
from __future__ import annotations

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD
from kaisched.cluster.kube import KubeCluster
from kaisched.framework.config import default_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from tests.builders.wire import Emulator, Obj, build_node, build_pod, cycles_until

SYSTEM = "kaisched-system"


def _gpu_node(name: str, gpus: str, memory: str | None = None) -> Obj:
    node = build_node(name)
    node["status"]["allocatable"]["nvidia.com/gpu"] = gpus
    if memory:
        node["metadata"]["labels"]["nvidia.com/gpu.memory"] = memory
    return node


def _sharer(name: str, fraction: str) -> Obj:
    pod = build_pod(name, cpu="100m")
    pod["metadata"]["annotations"] = {"gpu-fraction": fraction}
    return pod


def _requests(apiserver: Emulator) -> list[tuple[str, str | None, str | None, str | None]]:
    def read() -> list[tuple[str, str | None, str | None, str | None]]:
        out = []
        for r in apiserver.emu._requests:
            method = str(r.method).rpartition(".")[2]
            if r.resource is not None and r.resource.plural == "pods" and method != "GET":
                name = r.name or ((r.data or {}).get("metadata") or {}).get("name")
                out.append((method, r.resource.plural, name, r.subresource))
        return out
    return apiserver.call(read)


def test_a_reservation_pod_lives_from_the_first_sharer_to_the_last(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    cluster.create(_gpu_node("n1", "1", "40960"))
    cluster.create(_sharer("a", "0.5"))
    registry = register_builtins()
    clock = ManualClock()
    scheduler = Scheduler(cluster, default_config(registry), registry, clock,
                          Binder(cluster, clock.now, workers=2))

    first = scheduler.run_once()
    assert not first.report.failed, first.report.failed
    a = cluster.get(POD, "default", "a")
    assert a["spec"]["nodeName"] == "n1"
    group = a["metadata"]["labels"]["runai-gpu-group"]
    assert a["metadata"]["annotations"]["received-resource-type"] == "Fraction"
    held = [p for p in cluster.list(POD, SYSTEM)]
    assert len(held) == 1
    reservation = held[0]
    assert reservation["spec"]["nodeName"] == "n1"
    assert reservation["metadata"]["labels"]["runai-gpu-group"] == group
    assert reservation["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "1"
    # Made, then the sharer labelled, then bound: in that order on the wire.
    sent = _requests(apiserver)
    made = sent.index(("POST", "pods", reservation["metadata"]["name"], None))
    labelled = sent.index(("PATCH", "pods", "a", None))
    bound = sent.index(("POST", "pods", "a", "binding"))
    assert made < labelled < bound

    # A second half joins the same GPU: no second reservation pod.
    cluster.create(_sharer("b", "0.5"))
    cycles_until(scheduler, lambda: bool(cluster.get(POD, "default", "b")["spec"].get("nodeName")))
    b = cluster.get(POD, "default", "b")
    assert b["spec"]["nodeName"] == "n1" and b["metadata"]["labels"]["runai-gpu-group"] == group
    assert len(cluster.list(POD, SYSTEM)) == 1

    # Both go (force-deleted: no kubelet confirms a delete here); the GPU is no
    # longer shared, and its reservation pod is deleted.
    cluster.delete(POD, "default", "a")
    cycles_until(scheduler, lambda: "default/a" not in scheduler.cache.pods)
    assert len(cluster.list(POD, SYSTEM)) == 1          # b still shares it
    cluster.delete(POD, "default", "b")
    cycles_until(scheduler, lambda: cluster.list(POD, SYSTEM) == [])
    scheduler.binder.stop()


def test_kais_orphaned_reservation_pod_is_evicted(apiserver: Emulator, cluster: KubeCluster) -> None:
    cluster.create(_gpu_node("n1", "1"))
    kai = build_pod("gpu-reservation-n1-abcde", cpu="1m", namespace="kai-resource-reservation",
                    scheduler="kai-scheduler")
    kai["metadata"]["labels"] = {"app": "runai-reservation", "runai-gpu-group": "kai-g"}
    kai["spec"]["nodeName"] = "n1"
    kai["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    kai["status"]["phase"] = "Running"
    cluster.create(kai)
    whole = build_pod("whole", cpu="100m")
    whole["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m", "nvidia.com/gpu": "1"},
                                                   "limits": {"nvidia.com/gpu": "1"}}
    cluster.create(whole)
    registry = register_builtins()
    result = Scheduler(cluster, default_config(registry), registry, ManualClock()).run_once()
    assert not result.report.failed, result.report.failed
    sent = _requests(apiserver)
    assert ("POST", "pods", "gpu-reservation-n1-abcde", "eviction") in sent
    # Its GPU came back: the whole-GPU pod was pipelined onto it, not bound yet.
    assert result.reservations == {"default/whole": "n1"}
