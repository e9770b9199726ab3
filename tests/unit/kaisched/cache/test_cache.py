"""The cache: raw objects converted once (kaisched.cache.convert) and
snapshot() assembling the ClusterInfo a session decides over; bad input
becomes a job problem that is reported, never a crash or a lone bind."""
from __future__ import annotations

from typing import Any

import pytest

from kaisched.api.resource import Resource
from kaisched.api.types import GangMode, TaskStatus
from kaisched.cache import Cache
from kaisched.cluster.client import WatchEvent
from kaisched.cluster.kinds import POD
from tests.builders.objects import (
    build_node,
    build_pod,
    build_podgroup,
    build_queue,
    pod_scheduled_message,
    run_cycle,
    snapshot,
)

XK8S_API = "scheduling.x-k8s.io/v1alpha1"
KOORD = "gang.scheduling.koordinator.sh"


def owner(api: str, kind: str, name: str = "trainer") -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "name": name, "uid": f"uid-{name}",
            "controller": True}


# -- pods of other schedulers only take room ----------------------------------------------

def test_foreign_pod_consumes_node_room() -> None:
    objs = [build_node("n1", cpu=4), build_pod("theirs", cpu=3, node="n1", scheduler="other"),
            build_pod("mine", cpu=2)]
    cluster = snapshot(objs)
    assert "default/theirs" not in cluster.jobs
    assert cluster.nodes["n1"].idle.get("cpu") == 1000
    assert run_cycle(objs).bindings == {}


@pytest.mark.parametrize("foreign", [
    build_pod("theirs", cpu=3, scheduler="other"),                               # pending
    build_pod("theirs", cpu=3, node="n1", phase="Succeeded", scheduler="other"),
    build_pod("theirs", cpu=3, node="n1", phase="Failed", scheduler="other"),
], ids=["pending", "succeeded", "failed"])
def test_foreign_pod_that_holds_no_room(foreign: dict) -> None:
    cycle = run_cycle([build_node("n1", cpu=4), foreign, build_pod("mine", cpu=2)])
    assert cycle.bindings == {"default/mine": "n1"}


def test_releasing_foreign_pod_counts_as_releasing() -> None:
    pod = build_pod("theirs", cpu=3, node="n1", scheduler="other")
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    node = snapshot([build_node("n1", cpu=4), pod]).nodes["n1"]
    assert node.used.get("cpu") == 3000
    assert node.releasing.get("cpu") == 3000
    assert node.future_idle.get("cpu") == 4000


def test_scheduler_name_is_required_to_join() -> None:
    cycle = run_cycle([build_node("n1"), build_pod("theirs", scheduler="default-scheduler")])
    assert cycle.bindings == {}


# -- a missing PodGroup, a bad minMember --------------------------------------------------

def test_pod_naming_a_missing_podgroup_waits() -> None:
    objs = [build_node("n1", cpu=16), build_pod("p", group="ghost"), build_pod("alone")]
    job = snapshot(objs).jobs["default/ghost"]
    assert job.problem is not None and "does not exist" in job.problem and "ghost" in job.problem
    cycle = run_cycle(objs)
    assert cycle.bindings == {"default/alone": "n1"}           # every other job goes on
    assert "does not exist" in pod_scheduled_message(cycle.cluster, "p")


@pytest.mark.parametrize("min_member", [0, -1, "abc", "", 1.5, True])
def test_bad_min_member_is_a_problem_naming_the_field(min_member: object) -> None:
    objs = [build_node("n1", cpu=16), build_podgroup("pg", min_member=min_member),
            build_pod("p", group="pg"), build_pod("alone")]
    job = snapshot(objs).jobs["default/pg"]
    assert job.problem is not None and "spec.minMember" in job.problem
    cycle = run_cycle(objs)
    assert cycle.bindings == {"default/alone": "n1"}
    assert "spec.minMember" in pod_scheduled_message(cycle.cluster, "p")


@pytest.mark.parametrize("min_member", [1, 2, "3"])
def test_good_min_member(min_member: object) -> None:
    objs = [build_podgroup("pg", min_member=min_member), build_pod("p", group="pg")]
    job = snapshot(objs).jobs["default/pg"]
    assert job.problem is None and job.min_member == int(min_member)  # type: ignore[arg-type]


def test_pod_naming_a_missing_queue_waits() -> None:
    objs = [build_node("n1"), build_pod("p", queue="nowhere")]
    cycle = run_cycle(objs)
    assert cycle.bindings == {}
    assert "does not exist" in pod_scheduled_message(cycle.cluster, "p")


# -- the kaisched PodGroup ------------------------------------------------------------------

def test_podgroup_spec_is_read() -> None:
    pg = build_podgroup("pg", min_member=2, queue="team", mode="NonStrict", preemptible=False,
                        priorityClassName="train", minResources={"cpu": "4"},
                        subGroups=[{"name": "master", "minMember": 1},
                                   {"name": "worker", "minMember": 1}])
    job = snapshot([build_queue("team"), pg, build_pod("p", group="pg")]).jobs["default/pg"]
    assert job.problem is None
    assert (job.min_member, job.queue, job.spec.mode, job.spec.preemptible) == (
        2, "team", GangMode.NON_STRICT, False)
    assert job.spec.priority_class == "train"
    assert job.spec.min_resources == Resource.of(cpu=4000)
    assert [(s.name, s.min_member) for s in job.spec.subgroups] == [("master", 1), ("worker", 1)]
    assert job.spec.declared


def test_queue_comes_from_podgroup_then_pod_label_then_default() -> None:
    cluster = snapshot([build_podgroup("pg", queue="from-pg"),
                        build_pod("a", group="pg", queue="from-label"),
                        build_pod("b", queue="from-label"), build_pod("c")])
    assert cluster.jobs["default/pg"].queue == "from-pg"
    assert cluster.jobs["default/b"].queue == "from-label"
    assert cluster.jobs["default/c"].queue == "default"


def test_pods_of_one_podgroup_form_one_job() -> None:
    cluster = snapshot([build_podgroup("pg", min_member=2),
                        build_pod("a", group="pg"), build_pod("b", group="pg"),
                        build_pod("c", group="pg", node="n1")])
    job = cluster.jobs["default/pg"]
    assert sorted(job.tasks) == ["default/a", "default/b", "default/c"]
    assert job.count([TaskStatus.PENDING]) == 2 and job.count([TaskStatus.RUNNING]) == 1


# -- other schedulers' gang declarations ------------------------------------------------

def xk8s_podgroup(name: str, min_member: int) -> dict[str, Any]:
    return build_podgroup(name, min_member=min_member, api=XK8S_API)


GANGS = {
    "scheduler-plugins": (
        [xk8s_podgroup("g", 3)],
        {"labels": {"scheduling.x-k8s.io/pod-group": "g"}}),
    "koordinator": (
        [],
        {"annotations": {f"{KOORD}/name": "g", f"{KOORD}/min-available": "3"}}),
    "koordinator-label": (
        [],
        {"labels": {"pod-group.scheduling.sigs.k8s.io": "g"},
         "annotations": {f"{KOORD}/min-available": "3"}}),
    "volcano": (
        [],
        {"annotations": {"scheduling.k8s.io/group-name": "g",
                         "scheduling.k8s.io/group-pod-num": "3"}}),
}


@pytest.mark.parametrize("style", sorted(GANGS))
def test_foreign_gang_declaration_is_read_as_a_gang(style: str) -> None:
    extra, meta = GANGS[style]
    pods = [build_pod(f"p{i}", **meta) for i in range(3)]
    job = snapshot([*extra, *pods]).jobs["default/g"]
    assert job.problem is None
    assert job.min_member == 3
    assert len(job.tasks) == 3


@pytest.mark.parametrize("style", sorted(GANGS))
@pytest.mark.parametrize(("nodes", "bound"), [(2, 0), (3, 3)])
def test_foreign_gang_is_placed_all_or_nothing(style: str, nodes: int, bound: int) -> None:
    extra, meta = GANGS[style]
    objs = [build_node(f"n{i}", cpu=1) for i in range(nodes)]
    objs += [*extra, *(build_pod(f"p{i}", cpu=1, **meta) for i in range(3))]
    assert len(run_cycle(objs).bindings) == bound


def test_volcano_group_without_pod_num_is_a_gang_of_one() -> None:
    pod = build_pod("p", annotations={"scheduling.k8s.io/group-name": "g"})
    assert snapshot([pod]).jobs["default/g"].min_member == 1


def test_koordinator_bad_min_available_is_a_problem() -> None:
    pod = build_pod("p", annotations={f"{KOORD}/name": "g", f"{KOORD}/min-available": "many"})
    problem = snapshot([pod]).jobs["default/g"].problem
    assert problem is not None and "min-available" in problem


def test_missing_scheduler_plugins_podgroup_is_a_problem() -> None:
    pod = build_pod("p", labels={"scheduling.x-k8s.io/pod-group": "ghost"})
    problem = snapshot([pod]).jobs["default/ghost"].problem
    assert problem is not None and "does not exist" in problem


# -- pods waiting for the PodGrouper --------------------------------------------------------

@pytest.mark.parametrize(("api", "kind"), [
    ("kubeflow.org/v1", "PyTorchJob"),
    ("kubeflow.org/v2beta1", "MPIJob"),
    ("batch/v1", "Job"),
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
    ("argoproj.io/v1alpha1", "Workflow"),
])
def test_gang_owner_without_declaration_waits_for_the_podgrouper(api: str, kind: str) -> None:
    objs = [build_node("n1", cpu=16), build_pod("w0", owner=owner(api, kind))]
    job = snapshot(objs).jobs["default/w0"]
    assert job.problem is not None and "PodGrouper" in job.problem and kind in job.problem
    cycle = run_cycle(objs)
    assert cycle.bindings == {}
    assert "PodGrouper" in pod_scheduled_message(cycle.cluster, "w0")


@pytest.mark.parametrize(("label", "value", "shown"), [
    ("leaderworkerset.sigs.k8s.io/name", "vllm", "leaderworkerset vllm"),
    ("serving.knative.dev/revision", "hello-00001", "serving hello-00001"),
])
def test_statefulset_pods_of_a_gang_operator_wait_for_the_podgrouper(label: str, value: str,
                                                                      shown: str) -> None:
    objs = [build_node("n1", cpu=16),
            build_pod("w0", owner=owner("apps/v1", "StatefulSet"), labels={label: value})]
    job = snapshot(objs).jobs["default/w0"]
    assert job.problem is not None and "PodGrouper" in job.problem and shown in job.problem
    assert run_cycle(objs).bindings == {}


@pytest.mark.parametrize(("api", "kind"), [("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet")])
def test_other_owner_is_a_gang_of_one(api: str, kind: str) -> None:
    """(Made a while ago: a pod made just now first waits for the PodGrouper,
    tests/unit/kaisched/framework/test_session_grouping_wait.py.)"""
    objs = [build_node("n1"), build_pod("p", owner=owner(api, kind), creation="2025-01-01T00:00:00Z")]
    assert run_cycle(objs).bindings == {"default/p": "n1"}


def test_gang_owner_with_a_declared_podgroup_is_scheduled() -> None:
    objs = [build_node("n1", cpu=16), build_podgroup("pg", min_member=1),
            build_pod("w0", group="pg", owner=owner("kubeflow.org/v1", "PyTorchJob"))]
    assert run_cycle(objs).bindings == {"default/w0": "n1"}


# -- watch events ----------------------------------------------------------------------------

def test_deleted_objects_leave_the_snapshot() -> None:
    from kaisched.cluster.kinds import NODE
    cache = Cache()
    node, pod = build_node("n1"), build_pod("p")
    cache.apply(WatchEvent("ADDED", NODE, node))
    cache.apply(WatchEvent("ADDED", POD, pod))
    assert set(cache.snapshot(0.0).jobs) == {"default/p"}
    cache.apply(WatchEvent("DELETED", POD, pod))
    cache.apply(WatchEvent("DELETED", NODE, node))
    cluster = cache.snapshot(0.0)
    assert cluster.jobs == {} and cluster.nodes == {}


def test_task_on_an_unknown_node_keeps_its_status_but_takes_no_room() -> None:
    cluster = snapshot([build_node("n1"), build_pod("p", node="gone")])
    assert cluster.jobs["default/p"].tasks["default/p"].status is TaskStatus.RUNNING
    assert cluster.nodes["n1"].used.get("cpu") == 0
