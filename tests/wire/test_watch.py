"""subscribe(): the first drain lists what exists, changes follow as watch
events; 410 Gone relists and reconciles; dropped watches resume; kinds the
server does not serve are skipped; close() stops the threads."""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

import kmock
import orjson
import pytest

from kaisched.cluster.kinds import (
    NODE,
    POD,
    PODGROUP,
    QUEUE,
    SCHEDULING_KINDS,
    XK8S_PODGROUP,
)
from kaisched.cluster.kube import KubeCluster
from tests.builders.wire import (
    PATIENCE,
    PG_API,
    PODGROUPS,
    Emulator,
    Obj,
    build_node,
    build_pod,
    build_podgroup,
    build_queue,
    collect,
    name,
    seen,
)

PG = kmock.resource(PODGROUPS)
XK8S = kmock.resource("scheduling.x-k8s.io/v1alpha1/podgroups")


@pytest.fixture
def populated(cluster: KubeCluster) -> KubeCluster:
    cluster.create(build_node("n1"))
    cluster.create(build_pod("p1"))
    cluster.create(build_pod("p2", namespace="other"))
    cluster.create(build_podgroup("a"))
    cluster.create(build_podgroup("b"))
    cluster.create(build_queue("q"))
    return cluster



def resumed_after(apiserver: Emulator, cluster: KubeCluster, first: object) -> None:
    """The first watch answers with first; a second watch must follow and
    deliver a PodGroup created after it."""
    apiserver.call(lambda: apiserver.emu["watch", PG][:1] << (first,))
    sub = cluster.subscribe([PODGROUP])
    sub.drain()
    collect(sub, lambda _: apiserver.count("watch", PG) >= 2)
    apiserver.wait_watched(PODGROUPS)
    cluster.create(build_podgroup("d"))
    collect(sub, lambda ev: seen(ev, "ADDED", "d"))

def test_first_drain_lists_everything_as_added(populated: KubeCluster) -> None:
    sub = populated.subscribe(SCHEDULING_KINDS)
    events = sub.drain()            # no waiting: the lists ran in subscribe()
    assert sorted((e.type, e.kind.kind, name(e.obj)) for e in events) == [
        ("ADDED", "Namespace", "default"), ("ADDED", "Namespace", "kube-system"),
        ("ADDED", "Node", "n1"), ("ADDED", "Pod", "p1"), ("ADDED", "Pod", "p2"),
        ("ADDED", "PodGroup", "a"), ("ADDED", "PodGroup", "b"), ("ADDED", "Queue", "q")]
    assert {e.kind for e in events if e.kind.kind == "PodGroup"} == {PODGROUP}
    assert all(e.obj["kind"] == e.kind.kind for e in events)


def test_changes_arrive_as_modified_and_deleted(apiserver: Emulator,
                                                populated: KubeCluster) -> None:
    sub = populated.subscribe([NODE, POD, PODGROUP, QUEUE])
    sub.drain()
    apiserver.wait_watched("v1/nodes", "v1/pods", PODGROUPS, f"{PG_API}/queues")
    populated.patch(POD, "default", "p1", {"metadata": {"labels": {"x": "1"}}})
    populated.patch_status(PODGROUP, "default", "a", {"phase": "Running"})
    populated.delete(NODE, "", "n1")
    populated.create(build_pod("p3"))

    events = collect(sub, lambda ev: seen(ev, "MODIFIED", "p1") and seen(ev, "MODIFIED", "a")
                     and seen(ev, "DELETED", "n1") and seen(ev, "ADDED", "p3"))
    mod = next(e for e in events if e.type == "MODIFIED" and name(e.obj) == "p1")
    assert mod.obj["metadata"]["labels"] == {"x": "1"}
    assert next(e for e in events if name(e.obj) == "a").obj["status"] == {"phase": "Running"}
    # Nothing else: the emulator's replay of what exists on every watch is deduplicated.
    assert sorted((e.type, name(e.obj)) for e in events) == [
        ("ADDED", "p3"), ("DELETED", "n1"), ("MODIFIED", "a"), ("MODIFIED", "p1")]


def test_drain_never_blocks(populated: KubeCluster) -> None:
    sub = populated.subscribe(SCHEDULING_KINDS)
    sub.drain()
    # Nothing changes from now on: a drain that waited for the next event would wait forever.
    drained: list[list[Any]] = []
    thread = threading.Thread(target=lambda: drained.extend(sub.drain() for _ in range(20)),
                              daemon=True)
    thread.start()
    thread.join(PATIENCE)
    assert not thread.is_alive(), "drain() blocked"
    assert drained == [[]] * 20


def _silently(apiserver: Emulator) -> None:
    """Change podgroups behind the watch's back, as if its events were lost:
    b deleted, a changed, c created."""
    objects = apiserver.emu.objects
    objects[PG, "default", "b"].delete()
    objects[PG, "default", "a"].patch({"metadata": {"resourceVersion": "900"},
                                       "spec": {"minMember": 9}})
    objects[PG, "default", "c"] = {**build_podgroup("c"),
                                   "metadata": {"name": "c", "namespace": "default",
                                                "resourceVersion": "901"}}


def _reconciled(events: list[Any]) -> bool:
    return seen(events, "DELETED", "b") and seen(events, "ADDED", "c") and \
        seen(events, "MODIFIED", "a", lambda o: o["spec"]["minMember"] == 9)


def test_http_410_on_watch_relists_and_reconciles(apiserver: Emulator,
                                                  populated: KubeCluster) -> None:
    answered: list[str] = []

    def expire(request: kmock.Request) -> Any:
        if answered:
            return NotImplemented       # from now on: the emulator's own watch
        answered.append(request.params.get("resourceVersion", ""))
        _silently(apiserver)
        raise kmock.KubernetesError(status=410, reason="Expired",
                                    message="too old resource version: 1 (900)")

    apiserver.call(lambda: apiserver.emu["watch", PG] << expire)
    sub = populated.subscribe([PODGROUP])
    assert sorted(name(e.obj) for e in sub.drain()) == ["a", "b"]

    events = collect(sub, _reconciled)
    assert answered == ["..."]      # the list's resourceVersion (the emulator has no real one)
    deleted = next(e for e in events if e.type == "DELETED")
    assert deleted.obj["metadata"] == {"name": "b", "namespace": "default"}
    assert deleted.obj["kind"] == "PodGroup" and deleted.obj["apiVersion"] == PG_API
    assert apiserver.count("list", PG) == 2

    apiserver.wait_watched(PODGROUPS)           # and the watch goes on after the relist
    populated.create(build_podgroup("d"))
    collect(sub, lambda ev: seen(ev, "ADDED", "d"))


def test_error_event_410_relists_and_reconciles(apiserver: Emulator,
                                                populated: KubeCluster) -> None:
    sub = populated.subscribe([PODGROUP])
    sub.drain()
    apiserver.wait_watched(PODGROUPS)           # the event must reach a connected watch
    apiserver.call(lambda: _silently(apiserver))
    gone = {"type": "ERROR", "object": {"apiVersion": "v1", "kind": "Status", "code": 410,
                                        "reason": "Expired", "message": "too old"}}
    apiserver.run(apiserver.buses[PG].put(gone))

    collect(sub, _reconciled)
    assert apiserver.count("list", PG) == 2


def test_watch_ended_by_the_server_resumes_from_the_last_version(
        apiserver: Emulator, populated: KubeCluster) -> None:
    bookmark = {"type": "BOOKMARK", "object": {"apiVersion": PG_API, "kind": "PodGroup",
                                               "metadata": {"resourceVersion": "777"}}}
    resumed_after(apiserver, populated, bookmark)
    versions = apiserver.call(lambda: [r.params.get("resourceVersion")
                                       for r in apiserver.emu["watch", PG]])
    assert versions[:2] == ["...", "777"]
    assert apiserver.count("list", PG) == 1     # resumed, not relisted


def test_failing_watch_backs_off_and_resumes(apiserver: Emulator,
                                             populated: KubeCluster) -> None:
    broken = {"apiVersion": "v1", "kind": "Status", "code": 500, "message": "etcd is sad"}
    apiserver.call(lambda: apiserver.emu["watch", PG][:3] << 500 << broken)
    sub = populated.subscribe([PODGROUP])
    sub.drain()
    collect(sub, lambda _: apiserver.count("watch", PG) >= 4)
    apiserver.wait_watched(PODGROUPS)
    populated.patch(PODGROUP, "default", "a", {"spec": {"minMember": 4}})

    collect(sub, lambda ev: seen(ev, "MODIFIED", "a", lambda o: o["spec"]["minMember"] == 4))
    assert apiserver.count("watch", PG) >= 4
    assert apiserver.count("list", PG) == 1


def test_a_kind_the_server_does_not_serve_is_skipped_quietly(
        apiserver: Emulator, looking: KubeCluster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kaisched.cluster.watch")
    looking.create(build_pod("p1"))
    sub = looking.subscribe([XK8S_PODGROUP, POD])
    assert {e.kind for e in sub.drain()} == {POD}
    started = time.monotonic()
    collect(sub, lambda _: apiserver.count("list", XK8S) >= 3)
    # Two more looks took at least two missing_retry periods (0.5 s here): no hot loop.
    # A lower bound: a slow machine only makes it longer.
    assert time.monotonic() - started > 0.8
    assert apiserver.count("watch", XK8S) == 0
    notes = [r.getMessage() for r in caplog.records if "not served" in r.getMessage()]
    assert notes == [f"{XK8S_PODGROUP} is not served by this cluster; not watching it"]


def test_a_kind_installed_later_is_picked_up(apiserver: Emulator,
                                             looking: KubeCluster) -> None:
    sub = looking.subscribe([XK8S_PODGROUP])
    assert sub.drain() == []
    group: Obj = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                  "metadata": {"name": "legacy", "namespace": "default",
                               "resourceVersion": "5"}, "spec": {"minMember": 2}}

    def install() -> None:
        apiserver.emu.objects[XK8S, "default", "legacy"] = group
    apiserver.call(install)
    collect(sub, lambda ev: seen(ev, "ADDED", "legacy"))


def test_close_stops_the_threads(populated: KubeCluster) -> None:
    sub = populated.subscribe(SCHEDULING_KINDS)
    assert sub.alive
    # Long enough for a loaded machine, shorter than a watch's read timeout (the
    # fixture's watch_timeout, 60 s, and slack): only an interrupted read ends in time.
    sub.close(timeout=30.0)
    assert not sub.alive
    assert isinstance(sub.drain(), list)


def test_closing_the_cluster_closes_its_subscriptions(populated: KubeCluster) -> None:
    subs = [populated.subscribe([POD]), populated.subscribe([PODGROUP, QUEUE])]
    populated.close()
    assert not any(s.alive for s in subs)


def test_an_event_split_across_chunks_is_joined(apiserver: Emulator,
                                                populated: KubeCluster) -> None:
    event = orjson.dumps({"type": "ADDED", "object": {
        **build_podgroup("e"), "metadata": {"name": "e", "namespace": "default",
                                            "resourceVersion": "800"}}}) + b"\n"
    pieces = tuple(event[i:i + 7] for i in range(0, len(event), 7))
    apiserver.call(lambda: apiserver.emu["watch", PG][:1] << pieces)
    sub = populated.subscribe([PODGROUP])
    sub.drain()

    events = collect(sub, lambda ev: seen(ev, "ADDED", "e"))
    assert next(e for e in events if name(e.obj) == "e").obj["spec"] == {"minMember": 1}


def test_a_garbled_watch_is_dropped_and_resumed(apiserver: Emulator,
                                                populated: KubeCluster) -> None:
    resumed_after(apiserver, populated, b"<html>oops</html>\n")
    assert apiserver.count("list", PG) == 1
