"""Node-pool shards on one in-process cluster: each scheduler sees only its
pool's nodes and schedules only the pods that name its pool (on the pod, its
PodGroup or its queue; the default shard also takes what names none), writes
status only for its own PodGroups and Queues, and a node relabelled into
another pool keeps its pods, which the new shard counts."""
from __future__ import annotations

from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cli.production import shard_lease
from kaisched.cluster.kinds import NODE, POD, QUEUE
from kaisched.cluster.memory import MemoryCluster
from kaisched.errors import ConfigError
from kaisched.framework import parse_config
from kaisched.framework.effects import Evict, SetPodGroupStatus, SetQueueStatus
from kaisched.runtime.binder import Binder
from kaisched.runtime.metrics import Metrics
from kaisched.runtime.scheduler import CycleResult, Scheduler

Obj = dict[str, Any]
POOL = "kaisched.io/pool"
PG_API = "scheduling.kaisched.io/v1alpha1"
REGISTRY = register_builtins()


def config(pool: str | None, default: bool = False) -> Any:
    text = "schedulePeriod: 1s\n"
    if pool is not None:
        text += f"nodePool: {{label: {POOL}, value: {pool}, default: {str(default).lower()}}}\n"
    return parse_config(text, REGISTRY)


def node(name: str, pool: str | None, cpu: str = "4") -> Obj:
    labels = {"kubernetes.io/hostname": name, **({POOL: pool} if pool else {})}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}


def pod(name: str, pool: str | None = None, group: str | None = None, queue: str | None = None,
        node_name: str | None = None, cpu: str = "1") -> Obj:
    labels = {**({POOL: pool} if pool else {}), **({"kaisched.io/queue": queue} if queue else {})}
    meta: Obj = {"name": name, "namespace": "ml", "labels": labels}
    if group:
        meta["annotations"] = {"kaisched.io/pod-group": group}
    spec: Obj = {"schedulerName": "kaisched", "containers": [
        {"name": "main", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    status = {"phase": "Pending"}
    if node_name:
        spec["nodeName"], status = node_name, {"phase": "Running"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def podgroup(name: str, size: int, pool: str | None = None, queue: str | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": "ml", **({"labels": {POOL: pool}} if pool else {})}
    spec: Obj = {"minMember": size, **({"queue": queue} if queue else {})}
    return {"apiVersion": PG_API, "kind": "PodGroup", "metadata": meta, "spec": spec}


def queue(name: str, pool: str | None = None, parent: str | None = None) -> Obj:
    meta: Obj = {"name": name, **({"labels": {POOL: pool}} if pool else {})}
    return {"apiVersion": PG_API, "kind": "Queue", "metadata": meta,
            "spec": {**({"parentQueue": parent} if parent else {})}}


class Shards:
    """Two schedulers on one cluster: pool a (the default shard) and pool b."""

    def __init__(self, objects: list[Obj]) -> None:
        self.clock = ManualClock()
        self.cluster = MemoryCluster(self.clock)
        for obj in objects:
            self.cluster.create(obj)
        self.a = self.scheduler(config("a", default=True))
        self.b = self.scheduler(config("b"))

    def scheduler(self, cfg: Any) -> Scheduler:
        return Scheduler(self.cluster, cfg, REGISTRY, self.clock,
                         Binder(self.cluster, self.clock.now))

    def cycle(self) -> tuple[CycleResult, CycleResult]:
        self.clock.advance(1)
        return self.a.run_once(), self.b.run_once()

    def node_of(self, name: str) -> str | None:
        return self.cluster.get(POD, "ml", name)["spec"].get("nodeName")


POOL_OF_NODE = {"a1": "a", "a2": "a", "b1": "b", "b2": "b", "free": None}


def cluster_objects() -> list[Obj]:
    return [
        *(node(name, pool) for name, pool in POOL_OF_NODE.items()),
        queue("team-a", "a"), queue("team-b", "b"), queue("research", parent="team-b"),
        queue("shared"),
        # named by the pod's own label
        pod("labelled-b", pool="b"), pod("labelled-a", pool="a"),
        # named by the PodGroup's label
        podgroup("pg-b", 2, pool="b"), pod("pg-b-0", group="pg-b"), pod("pg-b-1", group="pg-b"),
        # named by the queue (the PodGroup's, or the pod's label; a child queue its parent's)
        podgroup("q-b", 2, queue="research"), pod("q-b-0", group="q-b"), pod("q-b-1", group="q-b"),
        pod("research-0", queue="research"),
        podgroup("q-a", 2, queue="team-a"), pod("q-a-0", group="q-a"), pod("q-a-1", group="q-a"),
        # naming none: the default shard's
        pod("plain"), pod("shared-0", queue="shared"),
    ]


OF_B = {"labelled-b", "pg-b-0", "pg-b-1", "q-b-0", "q-b-1", "research-0"}
OF_A = {"labelled-a", "q-a-0", "q-a-1", "plain", "shared-0"}


def test_each_shard_places_only_its_own_pods_and_only_on_its_own_nodes() -> None:
    shards = Shards(cluster_objects())
    first_a, first_b = shards.cycle()
    assert set(first_a.placed) == {f"ml/{p}" for p in OF_A}
    assert set(first_b.placed) == {f"ml/{p}" for p in OF_B}
    for name in OF_A:
        assert shards.node_of(name) in ("a1", "a2", "free"), name
    for name in OF_B:
        assert shards.node_of(name) in ("b1", "b2"), name
    again_a, again_b = shards.cycle()       # nothing is placed twice
    assert not again_a.placed and not again_b.placed
    assert not again_a.report.failed and not again_b.report.failed


def test_a_shard_writes_status_only_for_its_own_podgroups_and_queues() -> None:
    shards = Shards(cluster_objects())
    written: dict[str, set[str]] = {"a": set(), "b": set()}
    for _ in range(2):
        for pool, result in zip("ab", shards.cycle(), strict=True):
            for effect in result.report.applied:
                if isinstance(effect, SetPodGroupStatus):
                    written[pool].add(effect.job)
                elif isinstance(effect, SetQueueStatus):
                    written[pool].add(f"queue {effect.queue}")
    assert written["b"] == {"ml/pg-b", "ml/q-b", "queue team-b", "queue research"}
    assert written["a"] == {"ml/q-a", "queue team-a", "queue shared"}


def test_a_gang_that_fits_only_across_pools_is_not_placed() -> None:
    # Two pods of 4 cpu: one b node has room for one; pool a's empty nodes are not b's.
    shards = Shards([node("a1", "a"), node("b1", "b"), podgroup("big", 2, pool="b"),
                     pod("big-0", group="big", cpu="4"), pod("big-1", group="big", cpu="4")])
    _, result = shards.cycle()
    assert not result.placed
    assert shards.node_of("big-0") is None and shards.node_of("big-1") is None
    assert "ml/big" in result.blockers


def test_a_relabelled_node_keeps_its_pods_and_the_new_shard_counts_them() -> None:
    shards = Shards([node("a1", "a", cpu="4"), node("b1", "b", cpu="4"),
                     pod("run-b", pool="b", node_name="b1", cpu="3")])
    shards.cycle()
    relabelled = node("b1", "a", cpu="4")
    shards.cluster.patch(NODE, "", "b1", {"metadata": relabelled["metadata"]})
    # Pool a now has a1 (4 cpu free) and b1 (1 cpu free beside run-b).
    for name, cpu in (("big", "4"), ("small", "1"), ("too-big", "2")):
        shards.cluster.create(pod(name, pool="a", cpu=cpu))
    result_a, result_b = shards.cycle()
    assert not any(isinstance(e, Evict) for r in (result_a, result_b) for e in r.effects)
    assert shards.node_of("run-b") == "b1"      # kept where it runs
    assert shards.node_of("big") == "a1"
    assert shards.node_of("small") == "b1"      # beside run-b: 3 + 1 of 4 cpu
    assert shards.node_of("too-big") is None    # run-b's room is counted
    cluster_a = result_a.cluster
    assert cluster_a is not None and "b1" in cluster_a.nodes
    assert result_b.cluster is not None and "b1" not in result_b.cluster.nodes
    # The gang of run-b still counts it: its job stays whole in shard b.
    job = result_b.cluster.jobs["ml/run-b"]
    assert job.ready_count() == 1


def test_pods_change_hands_when_their_queue_names_another_pool() -> None:
    shards = Shards([node("a1", "a"), node("b1", "b"), queue("team", "a"),
                     podgroup("g", 1, queue="team"), pod("g-0", group="g")])
    # Before any cycle, the queue moves to pool b, and its gang with it.
    shards.cluster.patch(QUEUE, "", "team", {"metadata": {"labels": {POOL: "b"}}})
    result_a, result_b = shards.cycle()
    assert not result_a.placed
    assert set(result_b.placed) == {"ml/g-0"} and shards.node_of("g-0") == "b1"


def test_without_a_node_pool_one_scheduler_sees_everything() -> None:
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    for obj in cluster_objects():
        cluster.create(obj)
    result = Scheduler(cluster, config(None), REGISTRY, clock,
                       Binder(cluster, clock.now)).run_once()
    assert set(result.placed) == {f"ml/{p}" for p in OF_A | OF_B}


# -- the parts around it ------------------------------------------------------------------

def test_each_shard_has_its_own_lease() -> None:
    assert shard_lease(None) == "kaisched"
    assert shard_lease("a") == "kaisched-a"
    assert shard_lease("GPU_h100.x") == "kaisched-gpu-h100.x"


def test_metrics_carry_the_pool() -> None:
    metrics = Metrics("b")
    metrics.binds.inc(3)
    metrics.pending_gangs.labels("team-b", "resources").set(2)
    text = generate_latest(metrics.registry).decode()
    assert 'kaisched_binds_total{pool="b"} 3.0' in text
    assert 'kaisched_pending_gangs{pool="b",queue="team-b",reason="resources"} 2.0' in text
    plain = generate_latest(Metrics().registry).decode()
    assert "pool=" not in plain


@pytest.mark.parametrize("text, message", [
    ("nodePool: a", "nodePool: expected {label"),
    ("nodePool: {label: kaisched.io/pool}", "nodePool.value: must be a label value"),
    ("nodePool: {label: a/b/c, value: x}", "nodePool.label: 'a/b/c' is not a label key"),
    ("nodePool: {label: kaisched.io/pool, value: x, default: 'yes'}",
     "nodePool.default: must be true or false"),
    ("nodePool: {label: kaisched.io/pool, value: x, pool: y}", "nodePool: unknown key 'pool'"),
])
def test_a_bad_node_pool_is_refused_with_its_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("{", r"\{")):
        parse_config(text, REGISTRY)


def test_the_node_pool_round_trips_through_a_snapshot_config() -> None:
    cfg = config("b", default=True)
    assert cfg.to_dict()["nodePool"] == {"label": POOL, "value": "b", "default": True}
    assert parse_config(yaml.safe_dump(cfg.to_dict()), REGISTRY) == cfg


@pytest.mark.parametrize("counted", [False, True])
def test_a_shard_reclaims_a_gang_with_a_pod_on_a_node_moved_to_another_pool(counted: bool) -> None:
    """Pool b's gang runs on b1 and b2, and b1 is relabelled into pool a: shard b
    still counts the pod there for its gang, and may reclaim the gang, whose pods
    go together wherever they run, for the room it frees on b2 (b1's is not
    shard b's to count). It used to look b1 up among its own nodes, and crash: in
    the victim search, and (counted: the gang's pods hold a host port and a rule
    of the waiting pod selects them) when a tried eviction was undone."""
    def quota_queue(name: str, cpu: str) -> Obj:
        return {**queue(name, "b"), "spec": {"resources": {"cpu": {"quota": cpu}}}}
    hogs = [pod(f"hog-{i}", group="hog", node_name=f"b{i + 1}", cpu="4") for i in range(2)]
    owed = pod("owed-0", pool="b", queue="owed", cpu="4")
    if counted:
        for hog in hogs:
            hog["metadata"]["labels"]["app"] = "hog"
            hog["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        owed["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "hog"}},
             "topologyKey": "kubernetes.io/hostname"}]}}
    shards = Shards([node("a1", "a"), node("b1", "b"), node("b2", "b"),
                     quota_queue("over", "0"), quota_queue("owed", "4"),
                     podgroup("hog", 2, pool="b", queue="over"), *hogs])
    shards.cycle()
    shards.cluster.patch(NODE, "", "b1", {"metadata": node("b1", "a")["metadata"]})
    shards.cluster.create(owed)
    _, result_b = shards.cycle()
    assert result_b.cluster is not None and "b1" not in result_b.cluster.nodes
    evicted = {e.pod for e in result_b.effects if isinstance(e, Evict)}
    assert evicted == {"ml/hog-0", "ml/hog-1"}      # the gang goes whole


def test_a_shard_reclaims_no_lone_pod_on_a_node_it_does_not_see() -> None:
    """An elastic job of pool b (minimum 1) runs one pod on b2 and a newer one on
    b1, relabelled into pool a: its surplus pod, newest first, is looked for on
    shard b's nodes only. Evicting the one on b1 would free nothing shard b can
    place on, and the one on b2 would have to go too."""
    def quota_queue(name: str, cpu: str) -> Obj:
        return {**queue(name, "b"), "spec": {"resources": {"cpu": {"quota": cpu}}}}
    shards = Shards([node("a1", "a"), node("b1", "b"), node("b2", "b"),
                     quota_queue("over", "0"), quota_queue("owed", "4"),
                     podgroup("elastic", 1, pool="b", queue="over"),
                     pod("elastic-old", group="elastic", node_name="b2", cpu="4")])
    shards.clock.advance(60)
    shards.cluster.create(pod("elastic-new", group="elastic", node_name="b1", cpu="4"))
    shards.cycle()
    shards.cluster.patch(NODE, "", "b1", {"metadata": node("b1", "a")["metadata"]})
    shards.cluster.create(pod("owed-0", pool="b", queue="owed", cpu="4"))
    _, result_b = shards.cycle()
    evicted = {e.pod for e in result_b.effects if isinstance(e, Evict)}
    assert evicted == {"ml/elastic-old"}


def test_a_gang_split_over_pools_names_one_scheduler_all_the_same() -> None:
    """An upstream PodGroup whose pods name pool a and pool b (by their own
    labels): each shard sees only part of it, and none places it, but its pods
    name one scheduler, so neither the shard's model nor a rebuild says they name
    more than one (the rebuild once counted the other pool's pod as a stranger:
    "kaisched (2 pods)"). A pod naming another scheduler still makes it mixed."""
    def member(name: str, pool: str, scheduler: str = "kaisched") -> Obj:
        obj = pod(name, pool=pool)
        obj["spec"]["schedulingGroup"] = {"podGroupName": "split"}
        obj["spec"]["schedulerName"] = scheduler
        return obj
    group = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "split", "namespace": "ml"},
             "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}
    shards = Shards([node("a1", "a"), node("b1", "b"), group,
                     member("split-a", "a"), member("split-b", "b")])
    result_a, result_b = shards.cycle()
    assert not result_a.placed and not result_b.placed
    for shard, result in ((shards.a, result_a), (shards.b, result_b)):
        assert result.cluster is not None
        assert result.cluster.jobs["ml/split"].problem is None
        assert shard.cache.check(shards.clock.now()) == []
    shards.cluster.create(member("split-other", "a", scheduler="other"))
    result_a, _ = shards.cycle()
    assert result_a.cluster is not None
    assert result_a.cluster.jobs["ml/split"].problem == (
        "its pods name more than one scheduler: kaisched (1 pod), other (1 pod); "
        "all pods of a group must name one")
    assert shards.a.cache.check(shards.clock.now()) == []
