"""Two shards over the wire: two schedulers, one per node pool, each with
its own client of the emulator, and one PodGrouper for both. Every pod is
bound once, by its own pool's scheduler, to a node of its pool; each writes
the status of its own PodGroups and Queues only."""
from __future__ import annotations

from typing import Any

import kmock

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD, PODGROUP
from kaisched.cluster.kube import KubeCluster
from kaisched.framework import parse_config
from kaisched.framework.effects import SetPodGroupStatus, SetQueueStatus
from kaisched.runtime.scheduler import Scheduler
from podgrouper.controller import PodGrouper
from tests.builders.wire import Emulator, api_client, build_node, build_pod, build_podgroup, build_queue

POOL = "kaisched.io/pool"
Obj = dict[str, Any]


def labelled(obj: Obj, **labels: str) -> Obj:
    obj["metadata"].setdefault("labels", {}).update(labels)
    return obj


def job(cluster: KubeCluster, name: str, pods: int, pool: str | None) -> list[str]:
    """A batch/v1 Job and its pods (the pool label on the pods, as a pod template gives it)."""
    made = cluster.create({"apiVersion": "batch/v1", "kind": "Job",
                           "metadata": {"name": name, "namespace": "default"},
                           "spec": {"parallelism": pods, "completions": pods}})
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": name,
             "uid": made["metadata"]["uid"], "controller": True}
    names = [f"{name}-{i}" for i in range(pods)]
    for pod_name in names:
        pod = build_pod(pod_name, owner=owner)
        cluster.create(labelled(pod, **{POOL: pool}) if pool else pod)
    return names


def client_of(apiserver: Emulator) -> KubeCluster:
    """A client of its own, as each process has (patient: three of them list and
    watch every kind at once from one emulator)."""
    return KubeCluster(api_client=api_client(apiserver.url), timeout=60.0, watch_timeout=60,
                       backoff=0.05, max_backoff=0.2, missing_retry=300.0)


def shard(apiserver: Emulator, pool: str, default: bool = False) -> tuple[Scheduler, KubeCluster]:
    """A scheduler of one pool."""
    client = client_of(apiserver)
    registry = register_builtins()
    config = parse_config(f"nodePool: {{label: {POOL}, value: {pool}, "
                          f"default: {str(default).lower()}}}\n", registry)
    return Scheduler(client, config, registry, ManualClock()), client


def test_two_shards_bind_only_their_own_pods_on_their_own_nodes(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    for name, pool in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b"), ("plain", None)):
        node = build_node(name, cpu="4")
        cluster.create(labelled(node, **{POOL: pool}) if pool else node)
    cluster.create(labelled(build_queue("team-b"), **{POOL: "b"}))
    cluster.create(build_queue("team-a"))
    pods_of = {"b": [*job(cluster, "etl-b", 3, "b")], "a": [*job(cluster, "etl-a", 2, None)]}
    cluster.create(build_podgroup("train-b", min_member=2, queue="team-b"))
    cluster.create(build_podgroup("train-a", min_member=2, queue="team-a"))
    for group, pool in (("train-b", "b"), ("train-a", "a")):
        for i in range(2):
            cluster.create(build_pod(f"{group}-{i}", group=group))
            pods_of[pool].append(f"{group}-{i}")
    nodes_of = {"a": {"a1", "a2", "plain"}, "b": {"b1", "b2"}}

    grouper_client = client_of(apiserver)
    grouper = PodGrouper(grouper_client, ManualClock())
    shard_a, client_a = shard(apiserver, "a", default=True)
    shard_b, client_b = shard(apiserver, "b")
    written: dict[str, set[str]] = {"a": set(), "b": set()}
    try:
        for _ in range(3):
            grouper.sync()
            for pool, scheduler in (("a", shard_a), ("b", shard_b)):
                result = scheduler.run_once()
                assert not result.report.failed, result.report.failed
                for effect in result.report.applied:
                    if isinstance(effect, SetPodGroupStatus):
                        written[pool].add(effect.job.split("/", 1)[1])
                    elif isinstance(effect, SetQueueStatus):
                        written[pool].add(f"queue {effect.queue}")
    finally:
        for client in (grouper_client, client_a, client_b):
            client.close()

    for pool, names in pods_of.items():
        for name in names:
            node = cluster.get(POD, "default", name)["spec"].get("nodeName")
            assert node in nodes_of[pool], f"{name} of pool {pool} is on {node}"
    bound = apiserver.call(lambda: [r.name for r in apiserver.emu[kmock.subresource("binding")]])
    assert sorted(bound) == sorted(n for names in pods_of.values() for n in names)  # once each
    groups = {g["metadata"]["name"] for g in cluster.list(PODGROUP)}
    etl = {pool: next(g for g in groups if g.startswith(f"pg-etl-{pool}-")) for pool in "ab"}
    assert written["b"] == {etl["b"], "train-b", "queue team-b"}
    assert written["a"] == {etl["a"], "train-a", "queue team-a"}
