"""A scheduler's first lists: the late kinds (read only for the words of a
waiting pod) do not hold subscribe() up and are not even listed until
settle() asks for them, then waits for them; lists started early (prefetch)
are the ones the first subscribe() takes."""
from __future__ import annotations

import asyncio
import threading
import time

import kmock
import pytest

from kaisched.cache import Cache
from kaisched.cluster.kinds import NODE, POD, PVC_EVENTS
from kaisched.cluster.kube import KubeCluster
from kaisched.errors import TransientApiError
from tests.builders.wire import (
    PATIENCE,
    PODS,
    Emulator,
    api_client,
    build_pod,
    collect,
    seen,
    with_volume,
)

EVENTS = kmock.resource("v1/events")
FAILED: dict[str, object] = {
    "apiVersion": "v1", "kind": "Event",
    "metadata": {"name": "data.1", "namespace": "default", "resourceVersion": "7"},
    "involvedObject": {"kind": "PersistentVolumeClaim", "name": "data", "namespace": "default"},
    "reason": "ProvisioningFailed", "message": "no capacity in zone a", "type": "Warning"}


def test_a_late_kind_does_not_hold_up_the_first_lists(apiserver: Emulator,
                                                      cluster: KubeCluster) -> None:
    released = _held_events(apiserver)
    cluster.create(build_pod("p1"))
    sub = cluster.subscribe([POD, PVC_EVENTS])          # returns with the Event list held
    assert [(e.kind, e.obj["metadata"]["name"]) for e in sub.drain()] == [(POD, "p1")]
    settled = threading.Thread(target=sub.settle, daemon=True)
    settled.start()
    settled.join(0.3)
    assert settled.is_alive()                           # waits for the late list
    released.set()
    settled.join(PATIENCE)
    assert not settled.is_alive()
    assert seen(sub.drain(), "ADDED", "data.1")
    sub.close()


def _held_events(apiserver: Emulator) -> threading.Event:
    """The Event list answers (with FAILED) once the returned flag is set."""
    released = threading.Event()

    async def held() -> dict[str, object]:
        while not released.is_set():
            await asyncio.sleep(0.01)
        return {"kind": "EventList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"},
                "items": [FAILED]}

    apiserver.call(lambda: apiserver.emu.override["list", EVENTS] << held)
    return released


@pytest.mark.parametrize("claims", [False, True])
def test_the_first_sync_waits_for_late_kinds_only_when_a_pod_waits_on_a_claim(
        apiserver: Emulator, cluster: KubeCluster, claims: bool) -> None:
    released = _held_events(apiserver)
    pod = build_pod("p1")
    cluster.create(with_volume(pod, "data") if claims else pod)
    cache = Cache()
    syncing = threading.Thread(target=cache.sync, args=(cluster,), daemon=True)
    syncing.start()
    syncing.join(0.5 if claims else PATIENCE)
    # A pod waiting on a claim may be told its claim's provisioning failed:
    # the first sync has that Event. Without one nothing read waits for it.
    assert syncing.is_alive() is claims
    released.set()
    syncing.join(PATIENCE)
    assert not syncing.is_alive()
    if claims:
        assert cache.storage.failures            # read in that first sync
    else:
        cache.sync(cluster)
        assert apiserver.count("list", EVENTS) == 0     # never asked: the server filters none
    cache.close()


def test_lists_started_early_are_the_first_subscription(apiserver: Emulator,
                                                        cluster: KubeCluster) -> None:
    cluster.create(build_pod("p1"))
    cluster.prefetch([NODE, POD])
    sub = cluster.subscribe([NODE, POD])
    assert seen(sub.drain(), "ADDED", "p1")
    assert apiserver.count("list", kmock.resource(PODS)) == 1     # listed once, early
    apiserver.wait_watched(PODS)
    cluster.create(build_pod("p2"))
    collect(sub, lambda ev: seen(ev, "ADDED", "p2"))
    # Other kinds asked for: listed anew, the early lists let go.
    cluster.prefetch([NODE])
    other = cluster.subscribe([POD])
    assert seen(other.drain(), "ADDED", "p2")


def test_early_lists_that_failed_fail_the_subscribe() -> None:
    client = api_client("http://127.0.0.1:9")             # nothing listens on the discard port
    cluster = KubeCluster(api_client=client, timeout=2.0)
    cluster.prefetch([POD])
    started = time.monotonic()
    with pytest.raises(TransientApiError, match="cannot reach the API server"):
        cluster.subscribe([POD])
    assert time.monotonic() - started < PATIENCE
    cluster.close()
    client.close()
