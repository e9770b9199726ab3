"""The gang APIs of other schedulers, read into kaisched's model: the upstream
Workload API per version (kaisched/cache/convert/workloads.py), and what the model makes
of a gang of any API (priority, preemptibility, age, one scheduler per group, the
condition written back). KAI's PodGroup and Queue as read: test_kai.py."""
from __future__ import annotations

from typing import Any

import pytest

from kaisched.api.clock import from_rfc3339
from kaisched.api.job import PodGroupStatus
from kaisched.api.types import Disruption, GangRules
from kaisched.cache import convert
from kaisched.cache.convert.workloads import upstream_status
from tests.builders.objects import build_kai_podgroup, build_node, build_pod, build_upstream_podgroup, snapshot

Obj = dict[str, Any]


def member(name: str, spec: Obj, **kw: Any) -> Obj:
    pod = build_pod(name, **kw)
    pod["spec"].update(spec)
    return pod


# -- the upstream Workload API, one adapter per version ---------------------------------------

def test_v1alpha1_workload_is_its_podgroups() -> None:
    wl = convert.workload_v1alpha1({"metadata": {"name": "w"}, "spec": {"podGroups": [
        {"name": "workers", "policy": {"gang": {"minCount": 4}}},
        {"name": "tools", "policy": {"basic": {}}}]}})
    assert wl.problem is None
    workers, tools = wl.gang("workers"), wl.gang("tools")
    assert workers is not None and tools is not None and wl.gang("other") is None
    assert (workers.min_member, tools.min_member) == (4, 1)      # basic: a gang of one
    assert workers.rules is GangRules.WORKLOAD and workers.status_target is None


@pytest.mark.parametrize("policy, problem", [
    ({"gang": {"minCount": 0}}, "minCount must be an integer >= 1"),
    ({"basic": {}, "gang": {"minCount": 2}}, "exactly one of basic, gang"),
    ({}, "exactly one of basic, gang"),
])
def test_a_bad_policy_is_a_problem_and_a_gang_of_one(policy: Obj, problem: str) -> None:
    gang, _, found = convert.podgroup_v1beta1(build_upstream_podgroup("v1beta1", schedulingPolicy=policy))
    assert problem in (found or "") and gang.min_member == 1


@pytest.mark.parametrize("version, mode, want", [
    ("v1alpha2", None, Disruption.SINGLE), ("v1alpha2", "Pod", Disruption.SINGLE),
    ("v1alpha2", "PodGroup", Disruption.ALL),
    ("v1beta1", None, Disruption.SINGLE), ("v1beta1", {"single": {}}, Disruption.SINGLE),
    ("v1beta1", {"all": {}}, Disruption.ALL), ("v1alpha3", {"all": {}}, Disruption.ALL),
])
def test_disruption_modes_per_version(version: str, mode: Any, want: Disruption) -> None:
    read = convert.podgroup_v1alpha2 if version == "v1alpha2" else convert.podgroup_v1beta1
    spec = {} if mode is None else {"disruptionMode": mode}
    gang, _, problem = read(build_upstream_podgroup(version, **spec))
    assert (gang.disruption, problem) == (want, None)


@pytest.mark.parametrize("version, mode", [("v1alpha2", "Gang"), ("v1beta1", {"single": {}, "all": {}}),
                                           ("v1beta1", "all")])
def test_a_disruption_mode_outside_the_version_is_a_problem(version: str, mode: Any) -> None:
    read = convert.podgroup_v1alpha2 if version == "v1alpha2" else convert.podgroup_v1beta1
    assert "disruptionMode" in (read(build_upstream_podgroup(version, disruptionMode=mode))[2] or "")


def test_a_podgroup_says_its_priority_topology_and_where_its_condition_goes() -> None:
    gang, status, problem = convert.podgroup_v1beta1(build_upstream_podgroup(
        "v1beta1", priorityClassName="high", priority=7,
        schedulingConstraints={"topology": [{"key": "rack"}]}))
    assert problem is None and status == PodGroupStatus()
    assert (gang.priority_class, gang.priority, gang.topology.required) == ("high", 7, "rack")
    assert gang.status_target is not None
    assert (gang.status_target.api_version, gang.status_target.condition,
            gang.status_target.terminal) == ("scheduling.k8s.io/v1beta1", "PodGroupInitiallyScheduled",
                                             True)
    old, _, _ = convert.podgroup_v1alpha2(build_upstream_podgroup("v1alpha2"))
    assert old.status_target is not None
    assert (old.status_target.condition, old.status_target.terminal) == ("PodGroupScheduled", False)
    assert (gang.generation, gang.declared) == (3, False)       # no kaisched status to write


def test_two_topology_constraints_are_a_problem() -> None:
    _, _, problem = convert.podgroup_v1beta1(build_upstream_podgroup("v1beta1", schedulingConstraints={
        "topology": [{"key": "rack"}, {"key": "zone"}]}))
    assert "at most one" in (problem or "")


def test_conditions_round_trip_with_their_generation() -> None:
    raw = {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "False",
                           "reason": "Unschedulable", "message": "m",
                           "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2},
                          {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                           "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    assert convert.upstream_status_dict(upstream_status(raw)) == raw


# -- what the model makes of them ---------------------------------------------------------------

def test_podgroup_priority_wins_over_its_pods_value_then_class() -> None:
    classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": n}, "value": v} for n, v in (("low", 10), ("high", 1000))]
    pods = [member(f"{g}-0", {"schedulingGroup": {"podGroupName": g}, "priorityClassName": "high"})
            for g in ("valued", "classed", "plain")]
    cluster = snapshot([*classes, build_node("n1"), *pods,
                        build_upstream_podgroup("v1beta1", "valued", priorityClassName="low", priority=5),
                        build_upstream_podgroup("v1beta1", "classed", priorityClassName="low"),
                        build_upstream_podgroup("v1beta1", "plain")])
    jobs = cluster.jobs
    assert [jobs[f"default/{g}"].priority for g in ("valued", "classed", "plain")] == [5, 10, 1000]


def test_kai_preemptibility_follows_priority_unless_said() -> None:
    classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": n}, "value": v} for n, v in (("train", 50), ("inference", 125))]
    groups = [build_kai_podgroup("a", priorityClassName="train"), build_kai_podgroup("b", priorityClassName="inference"),
              build_kai_podgroup("c", priorityClassName="inference", preemptibility="preemptible")]
    pods = [build_pod(f"{g}-0", annotations={"pod-group-name": g}) for g in "abc"]
    jobs = snapshot([*classes, build_node("n1"), *groups, *pods]).jobs
    assert [jobs[f"default/{g}"].spec.preemptible for g in "abc"] == [True, False, True]


def test_an_upstream_gang_is_as_old_as_the_pod_that_completed_it() -> None:
    pods = [member(f"p-{i}", {"schedulingGroup": {"podGroupName": "pg"}},
                   creation=f"2026-01-01T00:0{i}:00Z") for i in range(3)]
    group = build_upstream_podgroup("v1beta1")
    group["metadata"]["creationTimestamp"] = "2025-12-31T00:00:00Z"
    job = snapshot([build_node("n1"), group, *pods]).jobs["default/pg"]
    assert job.creation == from_rfc3339("2026-01-01T00:01:00Z")     # minCount 2: the second pod


def test_a_group_whose_pods_name_several_schedulers_waits_with_why() -> None:
    pods = [member("p-0", {"schedulingGroup": {"podGroupName": "pg"}}),
            member("p-1", {"schedulingGroup": {"podGroupName": "pg"}}, scheduler="other"),
            member("p-2", {"schedulingGroup": {"podGroupName": "pg"}}, scheduler="other",
                   node="n1", phase="Succeeded")]            # a finished pod is not counted
    job = snapshot([build_node("n1"), build_upstream_podgroup("v1beta1"), *pods]).jobs["default/pg"]
    assert job.problem == ("its pods name more than one scheduler: kaisched (1 pod), "
                           "other (1 pod); all pods of a group must name one")


def test_a_v1alpha1_gang_names_a_podgroup_of_its_workload() -> None:
    workload = {"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
                "metadata": {"name": "w", "namespace": "default"},
                "spec": {"podGroups": [{"name": "main", "policy": {"gang": {"minCount": 2}}}]}}
    pods = [member("a", {"workloadRef": {"name": "w", "podGroup": "main"}}),
            member("b", {"workloadRef": {"name": "w", "podGroup": "typo"}}),
            member("c", {"workloadRef": {"name": "gone", "podGroup": "main"}})]
    jobs = snapshot([build_node("n1"), workload, *pods]).jobs
    assert jobs["default/w:main"].min_member == 2 and jobs["default/w:main"].problem is None
    assert jobs["default/w:typo"].problem == "Workload default/w has no podGroup 'typo'"
    assert jobs["default/gone:main"].problem == "Workload (scheduling.k8s.io) default/gone does not exist"


def test_two_served_versions_of_one_podgroup_are_read_once() -> None:
    """A 1.37 cluster with the alpha gate on serves each PodGroup in v1beta1
    and v1alpha3: v1beta1's is read (and its status written there)."""
    pods = [member(f"p-{i}", {"schedulingGroup": {"podGroupName": "pg"}}) for i in range(2)]
    job = snapshot([build_node("n1"), build_upstream_podgroup("v1beta1"),
                    {**build_upstream_podgroup("v1alpha3"), "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}},
                    *pods]).jobs["default/pg"]
    assert job.min_member == 2 and job.spec.status_target is not None
    assert job.spec.status_target.api_version == "scheduling.k8s.io/v1beta1"


# -- the condition written back --------------------------------------------------------------

def upstream_writes(objects: list[Obj]) -> list[Any]:
    from kaisched.framework.effects import SetPodGroupStatus
    from tests.builders.objects import run_cycle
    return [e for e in run_cycle(objects).effects
            if isinstance(e, SetPodGroupStatus) and e.api_version]


def scheduled_before(version: str) -> Obj:
    group = build_upstream_podgroup(version)
    group["status"] = {"conditions": [{
        "type": "PodGroupInitiallyScheduled" if version == "v1beta1" else "PodGroupScheduled",
        "status": "True", "reason": "Scheduled", "message": "2/2 tasks scheduled",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}, {
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    return group


def test_v1beta1_initially_scheduled_is_never_written_again() -> None:
    """Its pods gone and new ones that fit nowhere: v1beta1's condition stays
    True (a terminal state); v1alpha2's turns False, the others kept."""
    pods = [member(f"p-{i}", {"schedulingGroup": {"podGroupName": "pg"}}, cpu=64) for i in range(2)]
    assert upstream_writes([build_node("n1"), scheduled_before("v1beta1"), *pods]) == []
    [write] = upstream_writes([build_node("n1"), scheduled_before("v1alpha2"), *pods])
    assert write.api_version == "scheduling.k8s.io/v1alpha2"
    disruption, scheduled = write.status.conditions
    assert (disruption.type, scheduled.type, scheduled.status, scheduled.reason) == \
        ("DisruptionTarget", "PodGroupScheduled", "False", "Unschedulable")
    assert scheduled.observed_generation == 1        # the generation the server gave it


def test_an_unusable_group_says_scheduler_error() -> None:
    pods = [member("p-0", {"schedulingGroup": {"podGroupName": "pg"}}),
            member("p-1", {"schedulingGroup": {"podGroupName": "pg"}}, scheduler="other")]
    [write] = upstream_writes([build_node("n1"), build_upstream_podgroup("v1beta1"), *pods])
    [cond] = write.status.conditions
    assert (cond.type, cond.status, cond.reason) == ("PodGroupInitiallyScheduled", "False",
                                                     "SchedulerError")
    assert "more than one scheduler" in cond.message


def test_kai_min_sub_group_zero_is_no_gang() -> None:
    gang, _, problem = convert.kai_podgroup(build_kai_podgroup(minSubGroup=0, subGroups=[
        {"name": "a", "minMember": 2}, {"name": "b", "minMember": 3}]))
    assert problem is None and gang.min_member == 1
    assert [sg.min_member for sg in gang.subgroups] == [0, 0]
