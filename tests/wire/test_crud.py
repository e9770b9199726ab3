"""Reading and writing objects: create / get / list / patch / patch_status /
delete for Pods, Nodes and the scheduling.kaisched.io CRDs, on the wire."""
from __future__ import annotations

from typing import Any, Callable

import kmock
import pytest

from kaisched.cluster.kinds import NODE, POD, PODGROUP, QUEUE, Kind
from kaisched.cluster.kube import KubeCluster
from kaisched.errors import ConflictError, NotFoundError
from tests.builders.wire import (
    PODGROUPS,
    Emulator,
    Obj,
    build_node,
    build_pod,
    build_podgroup,
    build_queue,
)

KINDS = [
    pytest.param(POD, build_pod, "default", {"spec": {"priority": 7}}, id="pod"),
    pytest.param(NODE, build_node, "", {"spec": {"unschedulable": True}}, id="node"),
    pytest.param(PODGROUP, build_podgroup, "default", {"spec": {"minMember": 3}}, id="podgroup"),
    pytest.param(QUEUE, build_queue, "", {"spec": {"priority": 5}}, id="queue"),
]


def _labelled(build: Callable[[str], Obj], name: str) -> Obj:
    obj = build(name)
    obj["metadata"]["labels"] = {"keep": "1", "drop": "2"}
    return obj


@pytest.mark.parametrize(("kind", "build", "namespace", "spec_patch"), KINDS)
def test_create_get_list(cluster: KubeCluster, kind: Kind, build: Callable[[str], Obj],
                         namespace: str, spec_patch: Obj) -> None:
    created = cluster.create(build("b"))
    cluster.create(build("a"))
    assert created["metadata"]["name"] == "b"
    assert created["metadata"]["resourceVersion"]

    got = cluster.get(kind, namespace, "b")
    assert got is not None and got["spec"] == build("b")["spec"]
    listed = cluster.list(kind)
    assert [o["metadata"]["name"] for o in listed] == ["a", "b"]      # sorted, as memory.py
    assert {(o["apiVersion"], o["kind"]) for o in listed} == {(kind.api_version, kind.kind)}


@pytest.mark.parametrize(("kind", "build", "namespace", "spec_patch"), KINDS)
def test_get_of_a_missing_object_is_none(cluster: KubeCluster, kind: Kind,
                                         build: Callable[[str], Obj], namespace: str,
                                         spec_patch: Obj) -> None:
    assert cluster.get(kind, namespace, "nope") is None


@pytest.mark.parametrize(("kind", "build", "namespace", "spec_patch"), KINDS)
def test_patch_merges(cluster: KubeCluster, kind: Kind, build: Callable[[str], Obj],
                      namespace: str, spec_patch: Obj) -> None:
    cluster.create(_labelled(build, "x"))
    patch = {"metadata": {"labels": {"drop": None, "new": "3"}}, **spec_patch,
             "status": {"phase": "ignored"}}
    returned = cluster.patch(kind, namespace, "x", patch)
    stored = cluster.get(kind, namespace, "x")
    assert stored == returned
    assert stored["metadata"]["labels"] == {"keep": "1", "new": "3"}     # RFC 7396: None deletes
    for key, value in spec_patch["spec"].items():
        assert stored["spec"][key] == value
    assert stored["spec"] == {**build("x")["spec"], **spec_patch["spec"]}  # siblings kept
    assert (stored.get("status") or {}).get("phase") != "ignored"        # status only via /status


@pytest.mark.parametrize(("kind", "build", "namespace", "spec_patch"), KINDS)
def test_patch_status_merges_into_status_only(apiserver: Emulator, cluster: KubeCluster,
                                              kind: Kind, build: Callable[[str], Obj],
                                              namespace: str, spec_patch: Obj) -> None:
    cluster.create(build("x"))
    cluster.patch_status(kind, namespace, "x", {"phase": "Running", "scheduled": 2})
    cluster.patch_status(kind, namespace, "x", {"scheduled": None, "running": 1})
    stored = cluster.get(kind, namespace, "x")
    assert stored["status"]["phase"] == "Running"
    assert stored["status"]["running"] == 1
    assert "scheduled" not in stored["status"]
    assert stored["spec"] == build("x")["spec"]

    requests = apiserver.call(lambda: [(r.url.path, r.headers.get("Content-Type"), r.data)
                                       for r in apiserver.emu[kmock.subresource("status")]])
    assert len(requests) == 2
    assert all(path.endswith("/x/status") for path, _, _ in requests)
    assert {ct for _, ct, _ in requests} == {"application/merge-patch+json"}
    assert requests[0][2]["status"] == {"phase": "Running", "scheduled": 2}


@pytest.mark.parametrize(("kind", "build", "namespace", "spec_patch"), KINDS)
def test_delete(cluster: KubeCluster, kind: Kind, build: Callable[[str], Obj], namespace: str,
                spec_patch: Obj) -> None:
    cluster.create(build("x"))
    cluster.create(build("y"))
    cluster.delete(kind, namespace, "x")
    assert cluster.get(kind, namespace, "x") is None
    assert [o["metadata"]["name"] for o in cluster.list(kind)] == ["y"]
    with pytest.raises(NotFoundError, match="delete .*x"):
        cluster.delete(kind, namespace, "x")


def test_delete_says_its_propagation_policy_only_when_asked(
        cluster: KubeCluster, apiserver: Emulator) -> None:
    for name in ("x", "y"):
        cluster.create(build_pod(name))
    cluster.delete(POD, "default", "x")
    cluster.delete(POD, "default", "y", propagation="Background")
    bodies = apiserver.call(lambda: [r.data for r in apiserver.emu[kmock.method.DELETE]])
    assert [b.get("propagationPolicy") if b else None for b in bodies] == [None, "Background"]
    assert cluster.get(POD, "default", "y") is None


def test_list_by_namespace(cluster: KubeCluster) -> None:
    cluster.create(build_pod("a", namespace="team-a"))
    cluster.create(build_pod("b", namespace="team-b"))
    assert [o["metadata"]["name"] for o in cluster.list(POD, "team-a")] == ["a"]
    assert len(cluster.list(POD)) == 2
    assert cluster.get(POD, "team-a", "b") is None


def test_create_of_an_existing_object_conflicts(cluster: KubeCluster) -> None:
    cluster.create(build_podgroup("g"))
    with pytest.raises(ConflictError, match="create PodGroup default/g"):
        cluster.create(build_podgroup("g"))


def test_create_without_namespace_uses_default(cluster: KubeCluster) -> None:
    pod = build_pod("p")
    del pod["metadata"]["namespace"]
    assert cluster.create(pod)["metadata"]["namespace"] == "default"
    assert cluster.get(POD, "default", "p") is not None


def test_create_with_generate_name(cluster: KubeCluster) -> None:
    event = {"apiVersion": "v1", "kind": "Event",
             "metadata": {"generateName": "p.", "namespace": "default"}, "reason": "Scheduled"}
    first, second = cluster.create(event), cluster.create(event)
    assert first["metadata"]["name"].startswith("p.")
    assert first["metadata"]["name"] != second["metadata"]["name"]


def test_list_follows_continue_tokens(apiserver: Emulator, cluster: KubeCluster) -> None:
    pages: list[dict[str, Any]] = []

    def page(request: kmock.Request) -> Obj:
        pages.append(dict(request.params))
        if request.params.get("continue") == "t1":
            return {"metadata": {"resourceVersion": "42"}, "items": [build_podgroup("b")]}
        return {"metadata": {"resourceVersion": "42", "continue": "t1"},
                "items": [build_podgroup("a")]}

    apiserver.call(lambda: apiserver.emu["list", kmock.resource(PODGROUPS)] << page)
    items, version = cluster.list_with_version(PODGROUP)
    assert [o["metadata"]["name"] for o in items] == ["a", "b"]
    assert version == "42"
    assert [p.get("continue") for p in pages] == [None, "t1"]
    assert {p["limit"] for p in pages} == {"500"}


def test_the_emulator_serves_a_long_list_in_pages(apiserver: Emulator,
                                                  cluster: KubeCluster) -> None:
    """As an API server does: `limit` objects a page, a continue token to the next, the
    count of those left; the pages read from the list as it was when it began."""
    apiserver.preload([build_podgroup(f"g{i:04d}") for i in range(1234)])
    items, _ = cluster.list_with_version(PODGROUP)
    assert [o["metadata"]["name"] for o in items] == [f"g{i:04d}" for i in range(1234)]
    lists = apiserver.count("list", kmock.resource(PODGROUPS))
    assert lists == 3                       # 500, 500, 234
    assert cluster.count(PODGROUP) == 1234  # one object, and how many remain


def test_a_patch_that_names_an_old_resource_version_conflicts(cluster: KubeCluster) -> None:
    """A write naming a resourceVersion is a compare-and-swap, as on a real API
    server: the Lease's renew relies on it to see a takeover."""
    cluster.create(build_podgroup("g"))
    seen = cluster.get(PODGROUP, "default", "g")["metadata"]["resourceVersion"]
    cluster.patch(PODGROUP, "default", "g", {"spec": {"minMember": 2}})
    with pytest.raises(ConflictError, match="has been modified"):
        cluster.patch(PODGROUP, "default", "g", {"metadata": {"resourceVersion": seen},
                                                 "spec": {"minMember": 3}})
    now = cluster.get(PODGROUP, "default", "g")
    assert now["spec"]["minMember"] == 2
    cluster.patch(PODGROUP, "default", "g", {"metadata": {"resourceVersion":
                                                          now["metadata"]["resourceVersion"]},
                                             "spec": {"minMember": 3}})
    assert cluster.get(PODGROUP, "default", "g")["spec"]["minMember"] == 3
