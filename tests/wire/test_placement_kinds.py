"""The kinds placement reads, through the real client: namespace labels (for
namespaceSelector), beside the upstream Workload API's PodGroups (the gang
APIs themselves: test_gang_apis.py)."""
from __future__ import annotations

from kaisched.cache import Cache
from kaisched.cluster.kube import KubeCluster
from tests.builders.wire import Emulator, Obj, build_pod


def member(name: str) -> Obj:
    pod = build_pod(name, namespace="ml")
    pod["spec"]["schedulingGroup"] = {"podGroupName": "train"}
    return pod


def synced(cluster: KubeCluster) -> Cache:
    cache = Cache()
    cache.sync(cluster)          # the first sync lists every kind
    return cache


def test_upstream_gangs_and_namespace_labels_reach_the_cache(apiserver: Emulator,
                                                             cluster: KubeCluster) -> None:
    apiserver.serve("1.37")
    # The emulator serves the namespace list itself (kmock cannot route it).
    apiserver.call(lambda: apiserver.emu.namespaces.__setitem__("ml", {"team": "a"}))
    cluster.create({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": "train", "namespace": "ml"},
                    "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}})
    cluster.create(member("w0"))
    cluster.create(member("w1"))
    cache = synced(cluster)
    assert cache.namespaces["ml"] == {"kubernetes.io/metadata.name": "ml", "team": "a"}
    job = cache.snapshot(0.0).jobs["ml/train"]
    assert (job.min_member, sorted(job.tasks), job.problem) == (2, ["ml/w0", "ml/w1"], None)

