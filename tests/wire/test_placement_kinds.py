"""The kinds placement reads, through the real client: namespace labels (for
namespaceSelector) and the upstream Workload API's PodGroups, read where the
server serves them and skipped quietly where it does not."""
from __future__ import annotations

import logging

import kmock
import pytest

from kaisched.cache import Cache
from kaisched.cluster.kube import KubeCluster

from .conftest import Emulator, Obj, build_pod

UPSTREAM = "scheduling.k8s.io/v1alpha1/podgroups"


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
    apiserver.call(lambda: apiserver.emu.resources.__setitem__(
        UPSTREAM, kmock.ResourceInfo(kind="PodGroup", namespaced=True)))
    # The emulator serves the namespace list itself (kmock cannot route it).
    apiserver.call(lambda: apiserver.emu.namespaces.__setitem__("ml", {"team": "a"}))
    cluster.create({"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "PodGroup",
                    "metadata": {"name": "train", "namespace": "ml"},
                    "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}})
    cluster.create(member("w0"))
    cluster.create(member("w1"))
    cache = synced(cluster)
    assert cache.namespaces["ml"] == {"kubernetes.io/metadata.name": "ml", "team": "a"}
    job = cache.snapshot(0.0).jobs["ml/train"]
    assert (job.min_member, sorted(job.tasks), job.problem) == (2, ["ml/w0", "ml/w1"], None)


def test_where_the_workload_api_is_not_served_its_pods_wait_saying_why(
        apiserver: Emulator, cluster: KubeCluster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kaisched.cluster.watch")
    cluster.create(member("w0"))
    job = synced(cluster).snapshot(0.0).jobs["ml/train"]
    assert job.problem == "PodGroup (scheduling.k8s.io) ml/train does not exist"
    assert any("scheduling.k8s.io/v1alpha1 is not served" in r.getMessage()
               for r in caplog.records)
