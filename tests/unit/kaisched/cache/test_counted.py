"""Running gangs counted, not converted (kaisched/cache/counted.py): which pods
and jobs a head start counts, and that the snapshot it counts is, in every
number a session reads, the one a full conversion gives."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.types import JobKey
from kaisched.api.unread import Unread, UnreadPods
from kaisched.cache import Cache, convert, counted
from kaisched.cluster.client import WatchEvent
from kaisched.cluster.kinds import POD, SCHEDULING_KINDS
from kaisched.cluster.memory import MemoryCluster
from tests.builders.objects import build_node, build_pod, build_podgroup, build_queue, load_cluster
from tests.builders.strategies import contended, scenarios

Obj = dict[str, Any]
RUNNING = JobKey("default/run")


def cluster_objects() -> list[Obj]:
    """A running gang of 3 on two nodes (its minimum met), a running gang
    missing a pod (below its minimum), a gang half running half waiting, a
    running pod of another scheduler, and a running pod with a rule over others."""
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    ruled = build_pod("ruled-0", cpu=1, group="ruled", node="n2")
    ruled["spec"]["affinity"] = anti
    return [
        build_node("n1", cpu=8), build_node("n2", cpu=8), build_queue("team"),
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": "high"}, "value": 100},
        build_podgroup("run", min_member=3, queue="team"),
        *(build_pod(f"run-{i}", cpu=1, group="run", node=f"n{1 + i % 2}",
                    priority=100 if i else None, creation=f"2026-01-01T00:0{3 - i}:00Z")
          for i in range(3)),
        build_podgroup("short", min_member=3),
        *(build_pod(f"short-{i}", cpu=1, group="short", node="n1") for i in range(2)),
        build_podgroup("half", min_member=2),
        build_pod("half-0", cpu=1, group="half", node="n1"), build_pod("half-1", cpu=1, group="half"),
        build_pod("other", cpu=1, node="n2", scheduler="default-scheduler"),
        build_podgroup("ruled", min_member=1), ruled,
    ]


def counted_and_full(cluster: MemoryCluster) -> tuple[Cache, ClusterInfo | str, ClusterInfo]:
    lite = Cache()
    lite.listed(cluster)
    snapshot = lite.counted_snapshot(0.0)
    full = Cache()
    full.sync(cluster)
    return lite, snapshot, full.snapshot(0.0)


def assert_reads_alike(snapshot: ClusterInfo, full: ClusterInfo) -> None:
    """Every number a session reads of the cluster: the node table, the
    ledger's sums, each job's declaration and counts; the tasks not made Unread."""
    for name in ("alloc", "used", "releasing", "pipelined", "idle", "future"):
        assert np.array_equal(getattr(snapshot.table, name), getattr(full.table, name)), name
    assert snapshot.table.dims == full.table.dims
    assert snapshot.ledger().sums() == full.ledger().sums()
    assert snapshot.jobs.keys() == full.jobs.keys()
    assert {j.key for j in snapshot.active_jobs()} == {j.key for j in full.active_jobs()}
    for key, job in full.jobs.items():
        stand_in = snapshot.jobs[key]
        assert (stand_in.spec, stand_in.priority, stand_in.creation, stand_in.status,
                stand_in.problem, stand_in.totals(), stand_in.ready_met()) == \
            (job.spec, job.priority, job.creation, job.status, job.problem, job.totals(),
             job.ready_met()), key
        if isinstance(stand_in.tasks, Unread):
            assert not stand_in.tasks.made()
        else:
            assert stand_in.tasks == job.tasks
    for name, node in full.nodes.items():
        tasks = snapshot.nodes[name].tasks
        made = tasks.made() if isinstance(tasks, Unread) else tasks
        assert made.items() <= node.tasks.items()
    others = snapshot.foreign
    assert set(others.made() if isinstance(others, UnreadPods) else others) <= set(full.foreign)


def test_a_settled_gang_of_this_scheduler_is_counted_the_rest_converted() -> None:
    lite, snapshot, full = counted_and_full(load_cluster(cluster_objects()))
    assert isinstance(snapshot, ClusterInfo)
    assert isinstance(snapshot.jobs[RUNNING].tasks, Unread)
    assert [k for k, j in snapshot.jobs.items() if isinstance(j.tasks, Unread)] == [RUNNING]
    assert {"default/run-0", "default/run-1", "default/run-2"}.isdisjoint(lite.pods)
    assert {"default/short-0", "default/half-0", "default/ruled-0"} <= lite.pods.keys()
    assert isinstance(snapshot.nodes["n1"].tasks, Unread) and isinstance(snapshot.nodes["n2"].tasks, Unread)
    # Another scheduler's running pod is counted too: only its room.
    assert "default/other" not in lite.pods and isinstance(snapshot.foreign, UnreadPods)
    assert_reads_alike(snapshot, full)


def test_the_first_sync_converts_what_was_counted_as_a_cache_without_head_start_has_it() -> None:
    cluster = load_cluster(cluster_objects())
    lite, _, _ = counted_and_full(cluster)
    lite.sync(cluster)
    full = Cache()
    full.sync(cluster)
    after, expected = lite.snapshot(1.0), full.snapshot(1.0)
    assert not any(isinstance(n.tasks, Unread) for n in after.nodes.values())
    assert after.foreign == expected.foreign and type(after.foreign) is tuple
    assert after.jobs[RUNNING].tasks == expected.jobs[RUNNING].tasks
    assert_reads_alike(after, expected)
    assert lite.check(1.0) == []


def test_a_counted_pod_on_a_node_gone_still_asks_for_its_column() -> None:
    # A running pod whose node is gone takes no room, but what it asks for is a
    # column of a full layout all the same: the head start would read a table
    # without it, so it takes none.
    objects = cluster_objects()
    objects += [build_podgroup("lost", min_member=1),
                build_pod("lost-0", cpu=1, group="lost", node="gone",
                          extra={"example.com/dongle": "1"})]
    lite, snapshot, full = counted_and_full(load_cluster(objects))
    assert "example.com/dongle" in full.table.dims
    assert isinstance(snapshot, str)
    lite.sync(load_cluster(objects))
    assert lite.check(1.0) == []


class Subscribed:
    """A client whose subscription was made already: what was written after its
    lists is in its first drain, as the watches' first events are in a real one's."""

    def __init__(self, subscription: Any) -> None:
        self.subscription = subscription

    def subscribe(self, kinds: Any) -> Any:
        return self.subscription


def test_the_pods_the_watches_spoke_of_after_the_lists_are_converted_not_counted() -> None:
    cluster = load_cluster(cluster_objects())
    first = cluster.subscribe(SCHEDULING_KINDS)
    cluster.patch(POD, "default", "run-0", {"metadata": {"labels": {"touched": "yes"}}})
    cluster.delete(POD, "default", "run-1")
    cluster.patch(POD, "default", "other", {"metadata": {"labels": {"touched": "yes"}}})
    lite = Cache()
    lite.listed(Subscribed(first))
    snapshot = lite.counted_snapshot(0.0)
    full = Cache()
    full.sync(cluster)
    assert isinstance(snapshot, ClusterInfo)
    assert {"default/run-0", "default/run-2", "default/other"} <= lite.pods.keys()
    assert_reads_alike(snapshot, full.snapshot(0.0))


def test_a_gang_set_apart_after_its_first_pods_were_read_has_its_room_counted_once() -> None:
    # Its first pod is read as counted, its last is not: the first comes back to be converted,
    # and the room the split placed for it is left out of what is counted.
    objects = cluster_objects()
    run_2 = next(o for o in objects if o["metadata"]["name"] == "run-2")
    run_2["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    lite, snapshot, full = counted_and_full(load_cluster(objects))
    assert isinstance(snapshot, ClusterInfo)
    assert not isinstance(snapshot.jobs[RUNNING].tasks, Unread)
    assert {"default/run-0", "default/run-1", "default/run-2"} <= lite.pods.keys()
    assert_reads_alike(snapshot, full)


def test_what_the_first_lists_hold_is_told_until_the_first_sync() -> None:
    cluster = load_cluster(cluster_objects())
    lite = Cache()
    lite.listed(cluster)
    assert lite.listed_pods == 9 and lite.listed_waiting()      # half-1 waits
    lite.sync(cluster)
    assert not lite.listed_waiting()        # nothing listed is left to apply


def test_nothing_is_counted_when_a_counted_pod_asks_for_what_no_column_holds() -> None:
    objects = cluster_objects()
    objects.append(build_pod("odd-0", cpu=1, node="n1", extra={"example.com/dongle": "1"}))
    lite, snapshot, _ = counted_and_full(load_cluster(objects))
    assert snapshot == "a running pod asks for a resource no node offers and no pod converted asks for"
    lite.sync(load_cluster(objects))
    assert "default/run-0" in lite.pods


def test_what_every_pod_carries_does_not_keep_it_from_being_counted() -> None:
    # The service account's token volume and a container port (no host port):
    # nothing a decision reads of a running pod.
    objects = cluster_objects()
    for pod in (o for o in objects if o["metadata"]["name"].startswith("run-")):
        pod["spec"]["volumes"] = [{"name": "kube-api-access", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}]
        pod["spec"]["containers"][0]["ports"] = [{"containerPort": 23456, "protocol": "TCP"}]
    _, snapshot, full = counted_and_full(load_cluster(objects))
    assert isinstance(snapshot, ClusterInfo) and isinstance(snapshot.jobs[RUNNING].tasks, Unread)
    assert_reads_alike(snapshot, full)


def test_a_gang_whose_pod_is_not_countable_is_converted_whole() -> None:
    objects = cluster_objects()
    pvc = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
    run_1 = next(o for o in objects if o["metadata"]["name"] == "run-1")
    run_1["spec"]["volumes"] = [pvc]        # it mounts a claim
    split = counted.split(load_cluster(objects).subscribe(SCHEDULING_KINDS).drain(), "kaisched")
    assert split is not None and RUNNING not in split.jobs
    assert {"run-0", "run-1", "run-2"} <= {e.obj["metadata"]["name"] for e in split.converted}
    host_port = cluster_objects()
    run_2 = next(o for o in host_port if o["metadata"]["name"] == "run-2")
    run_2["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    split = counted.split(load_cluster(host_port).subscribe(SCHEDULING_KINDS).drain(), "kaisched")
    assert split is not None and RUNNING not in split.jobs


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_counted_snapshots_read_as_full_ones_over_small_clusters(scenario: Any) -> None:
    objects = scenario.objects()
    # And another scheduler's small pod running on each node.
    objects += [build_pod(f"proxy-{o['metadata']['name']}", cpu="50m", node=o["metadata"]["name"],
                          namespace="kube-system", scheduler="default-scheduler")
                for o in objects if o["kind"] == "Node"]
    _, snapshot, full = counted_and_full(load_cluster(objects))
    if isinstance(snapshot, ClusterInfo):
        assert_reads_alike(snapshot, full)


@settings(max_examples=60, deadline=None)
@given(contended())
def test_counted_snapshots_read_as_full_ones_over_contended_clusters(scenario: Any) -> None:
    _, snapshot, full = counted_and_full(load_cluster(scenario.objects()))
    if isinstance(snapshot, ClusterInfo):
        assert_reads_alike(snapshot, full)


def test_a_hand_written_pod_with_odd_fields_is_split_as_its_conversion_reads_it() -> None:
    # A namespace that is not a string (only a hand-written file has one): no lookup by it
    # fails, and the pod's job is the one its conversion gives.
    odd = build_pod("odd", cpu=1, group="run", node="n1")
    odd["metadata"]["namespace"] = ["team"]
    split = counted.split([WatchEvent("ADDED", POD, odd)], "kaisched")
    assert split is not None
    assert list(split.jobs) == [convert.pod_facts(odd).job] and not split.converted
    odd["spec"]["schedulerName"] = "default-scheduler"       # another scheduler's: its room only
    split = counted.split([WatchEvent("ADDED", POD, odd)], "kaisched")
    assert split is not None
    assert not split.jobs and not split.converted and len(split.others) == 1


@pytest.mark.parametrize("where, value", [
    ("annotations", ["kaisched.io/pod-group"]), ("labels", ["app"]), ("status", ["Running"])])
def test_a_pod_with_a_field_of_the_wrong_shape_leaves_everything_to_the_first_sync(
        where: str, value: list[str]) -> None:
    # Only a hand-written file has one; its conversion keeps it as unusable, in a job of its
    # own or its gang's: which, the split cannot say, so it counts nothing.
    objects = cluster_objects()
    odd = next(o for o in objects if o["metadata"]["name"] == "run-1")
    if where == "status":
        odd["status"] = value
    else:
        odd["metadata"][where] = value
    lite, snapshot, full = counted_and_full(load_cluster(objects))
    assert snapshot == "a pod of the first lists has a field of the wrong shape"
    lite.sync(load_cluster(objects))
    assert lite.snapshot(0.0).jobs.keys() == full.jobs.keys()
    assert full.jobs[JobKey("default/run-1")].problem is not None
