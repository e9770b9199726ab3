"""pods/binding and pods/eviction on the wire: the request bodies the API
expects, and how its answers map to kaisched's errors."""
from __future__ import annotations

import kmock
import pytest

from kaisched.cluster.kinds import POD
from kaisched.cluster.kube import KubeCluster
from kaisched.errors import ConflictError, NotFoundError
from tests.builders.wire import PODS, Emulator, build_node, build_pod


@pytest.fixture
def pod_uid(cluster: KubeCluster) -> str:
    cluster.create(build_node("n1"))
    return str(cluster.create(build_pod("p"))["metadata"]["uid"])


def test_bind_sets_node_name(apiserver: Emulator, cluster: KubeCluster, pod_uid: str) -> None:
    cluster.bind("default", "p", pod_uid, "n1")

    pod = cluster.get(POD, "default", "p")
    assert pod["spec"]["nodeName"] == "n1"
    assert {"type": "PodScheduled", "status": "True"}.items() <= pod["status"]["conditions"][0].items()
    bodies = apiserver.call(lambda: [r.data for r in apiserver.emu[kmock.subresource("binding")]])
    assert bodies == [{"apiVersion": "v1", "kind": "Binding",
                       "metadata": {"name": "p", "namespace": "default", "uid": pod_uid},
                       "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}]


def test_bind_without_uid_leaves_it_out(apiserver: Emulator, cluster: KubeCluster,
                                        pod_uid: str) -> None:
    cluster.bind("default", "p", "", "n1")
    bodies = apiserver.call(lambda: [r.data for r in apiserver.emu[kmock.subresource("binding")]])
    assert "uid" not in bodies[0]["metadata"]


def test_binding_a_bound_pod_conflicts(cluster: KubeCluster, pod_uid: str) -> None:
    cluster.bind("default", "p", pod_uid, "n1")
    with pytest.raises(ConflictError, match=r'bind Pod default/p to n2: .*already assigned to '
                                            r'node "n1" \(HTTP 409\)') as err:
        cluster.bind("default", "p", pod_uid, "n2")
    assert err.value.status == 409
    assert cluster.get(POD, "default", "p")["spec"]["nodeName"] == "n1"


def test_binding_a_replaced_pod_conflicts(cluster: KubeCluster, pod_uid: str) -> None:
    with pytest.raises(ConflictError, match="UID in the precondition"):
        cluster.bind("default", "p", "another-uid", "n1")
    assert "nodeName" not in cluster.get(POD, "default", "p")["spec"]


def test_binding_a_missing_pod_is_not_found(cluster: KubeCluster) -> None:
    with pytest.raises(NotFoundError, match='bind Pod default/gone to n1: pods "gone" not found'):
        cluster.bind("default", "gone", "", "n1")


def test_evict(apiserver: Emulator, cluster: KubeCluster, pod_uid: str) -> None:
    cluster.bind("default", "p", pod_uid, "n1")
    cluster.evict("default", "p")

    assert cluster.get(POD, "default", "p") is None
    assert apiserver.object(PODS, "default", "p") is None
    bodies = apiserver.call(lambda: [r.data for r in apiserver.emu[kmock.subresource("eviction")]])
    assert bodies == [{"apiVersion": "policy/v1", "kind": "Eviction",
                       "metadata": {"name": "p", "namespace": "default"}}]


def test_evicting_a_missing_pod_is_not_found(cluster: KubeCluster) -> None:
    with pytest.raises(NotFoundError, match="evict Pod default/gone"):
        cluster.evict("default", "gone")
