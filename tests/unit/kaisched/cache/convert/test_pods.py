"""What a pod asks for and which status it is in (kaisched.cache.convert):
pod_request as kube-scheduler computes it, task_status as the model maps phases."""
from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaisched.api import labels as L
from kaisched.api.resource import CPU, GPU, MEMORY, PODS, Resource
from kaisched.api.types import TaskStatus
from kaisched.cache.convert import pod_facts, pod_request, task_status
from kaisched.cache.convert.pods import _request
from tests.builders.objects import build_pod

MI = 2**20


def c(cpu: str | None = None, memory: str | None = None, gpu: str | None = None,
      sidecar: bool = False) -> dict[str, Any]:
    """A container with requests; sidecar=True is an init container with restartPolicy Always."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory), ("nvidia.com/gpu", gpu)) if v}
    out: dict[str, Any] = {"name": "c", "resources": {"requests": requests}}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def want(cpu: float = 0, memory: float = 0, gpu: float = 0) -> Resource:
    """Expected request in model units (millicpu, bytes), with the pod slot."""
    return Resource.of({CPU: cpu, MEMORY: memory, GPU: gpu, PODS: 1})


def request(spec: dict[str, Any]) -> Resource:
    problems: list[str] = []
    got = pod_request(spec, problems)
    assert problems == []
    return got


@pytest.mark.parametrize(("spec", "expected"), [
    ({"containers": []}, want()),
    ({}, want()),
    ({"containers": [{"name": "c"}]}, want()),
    ({"containers": [c(cpu="500m")]}, want(cpu=500)),
    ({"containers": [c(cpu="1", memory="256Mi"), c(cpu="250m", memory="256Mi")]},
     want(cpu=1250, memory=512 * MI)),
    ({"containers": [c(gpu="1"), c(gpu="2")]}, want(gpu=3)),
], ids=["empty", "no-containers", "no-requests", "one", "sum-of-two", "gpus-add-up"])
def test_sum_of_containers(spec: dict, expected: Resource) -> None:
    assert request(spec) == expected


@pytest.mark.parametrize(("spec", "expected"), [
    # the largest init step wins over the containers' sum, per resource
    ({"containers": [c(cpu="1")], "initContainers": [c(cpu="3")]}, want(cpu=3000)),
    ({"containers": [c(cpu="2")], "initContainers": [c(cpu="1")]}, want(cpu=2000)),
    ({"containers": [c(cpu="1", memory="1Gi")], "initContainers": [c(cpu="2", memory="100Mi")]},
     want(cpu=2000, memory=1024 * MI)),
    # init containers run one after another: max, not sum
    ({"containers": [c(cpu="1")], "initContainers": [c(cpu="2"), c(cpu="2")]}, want(cpu=2000)),
], ids=["init-bigger", "containers-bigger", "per-resource-max", "inits-do-not-add"])
def test_max_with_init_containers(spec: dict, expected: Resource) -> None:
    assert request(spec) == expected


@pytest.mark.parametrize(("spec", "expected"), [
    # a sidecar keeps running next to the containers: it adds to their sum
    ({"containers": [c(cpu="1")], "initContainers": [c(cpu="500m", sidecar=True)]},
     want(cpu=1500)),
    # an init step after a sidecar runs beside it
    ({"containers": [c(cpu="1")],
      "initContainers": [c(cpu="500m", sidecar=True), c(cpu="2")]}, want(cpu=2500)),
    # an init step before the sidecar does not
    ({"containers": [c(cpu="1")],
      "initContainers": [c(cpu="2"), c(cpu="500m", sidecar=True)]}, want(cpu=2000)),
    # two sidecars both stay
    ({"containers": [c(cpu="1")],
      "initContainers": [c(cpu="250m", sidecar=True), c(cpu="250m", sidecar=True)]},
     want(cpu=1500)),
], ids=["sidecar-adds", "init-after-sidecar", "init-before-sidecar", "two-sidecars"])
def test_sidecar_init_containers(spec: dict, expected: Resource) -> None:
    assert request(spec) == expected


@pytest.mark.parametrize(("spec", "expected"), [
    ({"containers": [c(cpu="1")], "overhead": {"cpu": "250m", "memory": "64Mi"}},
     want(cpu=1250, memory=64 * MI)),
    ({"containers": [c(cpu="1")], "initContainers": [c(cpu="3")], "overhead": {"cpu": "100m"}},
     want(cpu=3100)),
], ids=["overhead", "overhead-on-top-of-init"])
def test_overhead_is_added(spec: dict, expected: Resource) -> None:
    assert request(spec) == expected


def test_every_pod_takes_one_pod_slot() -> None:
    assert request({"containers": [c(cpu="1"), c(cpu="1")]}).get(PODS) == 1


def test_malformed_request_is_a_problem_not_an_exception() -> None:
    problems: list[str] = []
    got = pod_request({"containers": [c(cpu="1"), {"name": "x", "resources": {
        "requests": {"cpu": "lots"}}}]}, problems)
    assert got == want(cpu=1000)
    assert len(problems) == 1
    assert "containers[1].resources.requests" in problems[0] and "cpu" in problems[0]


def test_malformed_request_becomes_the_pods_problem() -> None:
    pod = build_pod("p", cpu="lots")
    assert "cpu" in (pod_facts(pod).problem or "")


# -- task_status -------------------------------------------------------------------------

def pod(phase: str | None = None, node: str | None = None, deleting: bool = False) -> dict:
    out: dict[str, Any] = {"metadata": {"name": "p", "namespace": "default"}, "spec": {},
                           "status": {}}
    if phase:
        out["status"]["phase"] = phase
    if node:
        out["spec"]["nodeName"] = node
    if deleting:
        out["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return out


@pytest.mark.parametrize(("raw", "status"), [
    (pod(), TaskStatus.PENDING),
    (pod("Pending"), TaskStatus.PENDING),
    (pod("Pending", node="n1"), TaskStatus.BOUND),
    (pod(None, node="n1"), TaskStatus.BOUND),
    (pod("Running", node="n1"), TaskStatus.RUNNING),
    (pod("Running", node="n1", deleting=True), TaskStatus.RELEASING),
    (pod("Pending", node="n1", deleting=True), TaskStatus.RELEASING),
    (pod("Succeeded", node="n1"), TaskStatus.SUCCEEDED),
    (pod("Failed", node="n1"), TaskStatus.FAILED),
    (pod("Failed"), TaskStatus.FAILED),
    (pod("Unknown", node="n1"), TaskStatus.UNKNOWN),
    (pod("Pending", deleting=True), None),           # going away with no node: ignored
    # stopped on its way out (an eviction): it did not finish, and holds nothing
    (pod("Succeeded", node="n1", deleting=True), None),
    (pod("Failed", node="n1", deleting=True), None),
], ids=["no-phase", "pending", "bound", "bound-no-phase", "running", "releasing",
        "releasing-pending", "succeeded", "failed", "failed-no-node", "unknown",
        "deleted-unbound", "succeeded-deleting", "failed-deleting"])
def test_task_status(raw: dict, status: TaskStatus | None) -> None:
    assert task_status(raw) is status


# -- every fact from its own field ---------------------------------------------------------

def test_every_fact_is_read_from_its_own_field() -> None:
    """pod_facts makes its facts by position: a pod saying something of every
    field shows each where its name says."""
    raw: dict[str, Any] = {
        "metadata": {
            "name": "p", "namespace": "team", "uid": "u-1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {L.QUEUE_LABEL: "q", L.SUBGROUP_LABEL: "workers", "app": "a"},
            "annotations": {L.POD_GROUP_ANNOTATION: "g", L.KAI_PREEMPTION_DELAY: "soon",
                            "scheduling.k8s.io/group-name": "g", "unread": "x"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                 "uid": "job-uid", "controller": True}]},
        "spec": {
            "schedulerName": "kaisched", "nodeName": "n1", "priority": 7,
            "priorityClassName": "pc", "preemptionPolicy": "Never",
            "schedulingGates": [{"name": "wait"}], "nodeSelector": {"zone": "a"},
            "activeDeadlineSeconds": 60, "terminationGracePeriodSeconds": 5,
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]},
        "status": {
            "phase": "Pending", "startTime": "2026-01-01T00:01:00Z",
            "conditions": [{"type": "PodScheduled", "status": "False",
                            "reason": "Unschedulable", "message": "no room"}]},
    }
    facts = pod_facts(raw)
    assert (facts.key, facts.uid, facts.job) == ("team/p", "u-1", "team/g")
    assert (facts.scheduler_name, facts.status, facts.node_name) == \
        ("kaisched", TaskStatus.BOUND, "n1")
    assert facts.resreq == want()               # its cpu does not parse
    assert "cpu" in (facts.problem or "")
    assert (facts.priority, facts.priority_class, facts.never_preempts) == (7, "pc", True)
    assert (facts.queue_label, facts.subgroup) == ("q", "workers")
    assert (facts.gang.source, facts.gang.name) == ("kaisched", "g")
    assert facts.annotations == (("kai.scheduler/preemption-delay", "soon"),
                                 ("scheduling.k8s.io/group-name", "g"))
    assert facts.creation == 1767225600.0 and facts.started == 1767225660.0
    assert facts.placement.node_selector == (("zone", "a"),)
    assert not facts.critical
    assert (facts.unschedulable, facts.unschedulable_reason) == ("no room", "Unschedulable")
    assert ("app", "a") in facts.labels and facts.labels == tuple(sorted(facts.labels))
    assert facts.gates == ("wait",)
    assert [c.key for c in facts.pvcs] == ["team/d"]
    assert facts.claims == () and facts.claim_refs == ()
    assert facts.controlled
    assert len(facts.warnings) == 1 and "soon" in facts.warnings[0]
    assert (facts.gpu, facts.reserves, facts.kai_reservation) == (None, None, False)
    assert facts.runtime is not None and facts.runtime.limit == 65.0
    assert facts.runtime.job is not None and facts.runtime.job.uid == "job-uid"


def test_values_no_cache_can_hold_are_read_all_the_same() -> None:
    """Labels, annotations and gang names are shared between alike pods through
    caches; a hand-written file's list value (an API server takes strings only)
    is read as before, not refused for being no key."""
    facts = pod_facts({"metadata": {"name": "p", "namespace": "n", "labels": {"a": ["x"]},
                                    "annotations": {"scheduling.k8s.io/group-name": ["g"]}},
                       "spec": {}})
    assert facts.labels == (("a", "['x']"),)
    assert facts.annotations == (("scheduling.k8s.io/group-name", "['g']"),)
    assert facts.job == "n/['g']" and facts.problem is None


# A one-container pod's ask is worked out from its resources alone (the usual
# case, kept by them): the same ask, and the same problems, as read field by field.
_QUANTITY = st.one_of(st.sampled_from(["1", "500m", "2Gi", "0", "lots", "-1", "1e3", ""]),
                      st.integers(-5, 10**20), st.floats(allow_nan=False), st.none(),
                      st.lists(st.integers(), max_size=1))
_RESOURCES = st.one_of(
    st.none(), st.text(max_size=3), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["requests", "limits", "claims"]), st.one_of(
        st.none(), st.integers(),
        st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods", "x/y"]),
                        _QUANTITY, max_size=3)), max_size=2))


@settings(max_examples=300, deadline=None)
@given(resources=_RESOURCES, policy=st.sampled_from([None, "Always"]))
def test_one_containers_ask_is_the_ask_read_field_by_field(resources: object,
                                                           policy: str | None) -> None:
    container: dict[str, Any] = {"name": "c", "resources": resources}
    if policy:
        container["restartPolicy"] = policy
    spec = {"containers": [container]}
    fast: list[str] = []
    slow: list[str] = []
    try:
        expected = _request(spec, slow)
    except (AttributeError, TypeError, ValueError) as exc:
        with pytest.raises(type(exc)):
            pod_request(spec, fast)
        return
    assert pod_request(spec, fast) == expected
    assert fast == slow


@pytest.mark.parametrize("containers", [1, 2], ids=["one container", "two containers"])
def test_an_infinite_ask_is_not_taken_for_a_missing_one(containers: int) -> None:
    # orjson writes inf and nan as null: a key alone would make them one ask
    # (only a hand-written file holds such a number; YAML's .inf is one).
    for cpu in (None, math.inf, -math.inf, math.nan, None):
        spec = {"containers": [{"name": f"c{i}", "resources": {"requests": {"cpu": cpu}}}
                               for i in range(containers)]}
        fast: list[str] = []
        slow: list[str] = []
        assert repr(pod_request(spec, fast)) == repr(_request(spec, slow))
        assert fast == slow
