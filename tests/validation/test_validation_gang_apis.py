"""What the API servers refuse of the gang APIs, checked as replay checks its
input: the Workload API per served version, and KAI's PodGroup and Queue
(their CRD schemas, bundled, and KAI's admission webhooks' rules)."""
from __future__ import annotations

from typing import Any, Iterator

import pytest

from kaisched.validation import KUBERNETES_VERSION, check_object, use_kube_version

Obj = dict[str, Any]


@pytest.fixture(autouse=True)
def default_version_after() -> Iterator[None]:
    yield
    use_kube_version(KUBERNETES_VERSION)


def rules(obj: Obj, version: str = "1.37") -> list[str]:
    use_kube_version(version)
    return [f"{p.field}: {p.rule}" for p in check_object(obj)]


def podgroup(version: str = "v1beta1", **spec: Any) -> Obj:
    return {"apiVersion": f"scheduling.k8s.io/{version}", "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, **spec}}


def pod(**spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "main", "image": "x"}], **spec}}


def test_each_version_serves_its_own_kinds_and_pod_fields() -> None:
    workload = {"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
                "metadata": {"name": "w", "namespace": "default"},
                "spec": {"podGroups": [{"name": "main", "policy": {"gang": {"minCount": 2}}}]}}
    assert rules(workload, "1.35") == []
    assert rules(pod(workloadRef={"name": "w", "podGroup": "main"}), "1.35") == []
    assert rules(podgroup("v1alpha2"), "1.36") == []
    assert rules(pod(schedulingGroup={"podGroupName": "pg"}), "1.36") == []
    assert rules(podgroup("v1beta1"), "1.37") == []
    assert rules(podgroup("v1alpha3"), "1.37") == []
    for obj, version in ((workload, "1.36"), (podgroup("v1alpha2"), "1.37"),
                         (podgroup("v1beta1"), "1.36"), (podgroup("v1beta1"), "1.34")):
        assert any("serves no such kind" in r for r in rules(obj, version)), (obj["apiVersion"], version)
    assert rules(pod(workloadRef={"name": "w", "podGroup": "main"}), "1.36") == \
        ["spec: unknown field 'workloadRef'"]
    assert rules(pod(schedulingGroup={"podGroupName": "pg"}), "1.35") == \
        ["spec: unknown field 'schedulingGroup'"]


@pytest.mark.parametrize("spec, rule", [
    ({"schedulingPolicy": {"gang": {"minCount": 0}}},
     "spec.schedulingPolicy.gang.minCount: must be greater than or equal to 1, got 0"),
    ({"schedulingPolicy": {}}, "spec.schedulingPolicy: exactly one of basic, gang is required"),
    ({"disruptionMode": {}}, "spec.disruptionMode: exactly one of single, all is required"),
    ({"schedulingConstraints": {"topology": [{"key": "-rack"}]}},
     "spec.schedulingConstraints.topology[0].key: must be a qualified name"),
    ({"priority": 1_000_000_001}, "spec.priority: must be at most 1000000000"),
    ({"priorityClassName": "Not_A_Name"}, "spec.priorityClassName: must be a DNS-1123 subdomain"),
    ({"workloadRef": {"workloadName": "w", "templateName": "Bad"}},
     "spec.workloadRef.templateName: must be a DNS-1123 label"),
    ({"preemptionPolicy": "Sometimes"}, "spec.preemptionPolicy: unsupported value 'Sometimes'"),
    ({"resourceClaims": [{"name": "gpu"}]},
     "spec.resourceClaims[0]: exactly one of resourceClaimName, resourceClaimTemplateName"),
])
def test_v1beta1_podgroup_rules(spec: Obj, rule: str) -> None:
    found = rules(podgroup(**spec))
    assert any(r.startswith(rule) for r in found), found


@pytest.mark.parametrize("version, kube, mode", [
    ("v1beta1", "1.37", {"all": {}}), ("v1alpha2", "1.36", "PodGroup")])
def test_a_basic_group_may_be_disrupted_whole(version: str, kube: str, mode: Any) -> None:
    """kube-scheduler's preemption tests create such groups: the API server takes them."""
    group = podgroup(version, schedulingPolicy={"basic": {}}, disruptionMode=mode)
    assert rules(group, kube) == []


def test_a_system_class_may_carry_a_system_priority() -> None:
    assert rules(podgroup(priorityClassName="system-node-critical", priority=2_000_001_000)) == []


def test_workload_templates_rules() -> None:
    too_many = [{"name": f"t{i}", "schedulingPolicy": {"basic": {}}} for i in range(9)]
    found = rules({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "Workload",
                   "metadata": {"name": "w", "namespace": "default"},
                   "spec": {"podGroupTemplates": too_many}}, "1.36")
    assert found == ["spec.podGroupTemplates: must have at most 8 items"]
    found = rules({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
                   "metadata": {"name": "w", "namespace": "default"}, "spec": {}}, "1.37")
    assert "spec: exactly one of podGroupTemplates, compositePodGroupTemplates is required" in found


@pytest.mark.parametrize("spec, rule", [
    ({"schedulingGroup": {"podGroupName": "Bad_Name"}},
     "spec.schedulingGroup.podGroupName: must be a DNS-1123 subdomain"),
])
def test_pod_reference_formats(spec: Obj, rule: str) -> None:
    assert any(r.startswith(rule) for r in rules(pod(**spec), "1.37"))


# -- KAI ---------------------------------------------------------------------------------------

def kai(**spec: Any) -> Obj:
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "default"}, "spec": spec}


def test_kai_podgroup_schema_and_webhook() -> None:
    assert rules(kai(minMember=2, queue="q", preemptibility="semi-preemptible",
                     subGroups=[{"name": "a", "minMember": 1}, {"name": "b", "parent": "a"}])) == []
    assert rules(kai(minMember=-1)) == ["spec.minMember: -1 is less than the minimum of 0"]
    assert rules(kai(mystery=1)) == ["spec: unknown field 'mystery'"]
    assert rules(kai(preemptibility="never"))[0].startswith("spec.preemptibility: 'never' is not one of")
    assert rules(kai(subGroups=[{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}])) == \
        ["spec.subGroups: cycle detected in subgroups"]
    assert rules(kai(subGroups=[{"name": "a"}, {"name": "a"}])) == \
        ["spec.subGroups[1].name: duplicate subgroup name a"]
    assert rules(kai(subGroups=[{"name": "a", "parent": "z"}])) == \
        ["spec.subGroups[0].parent: parent z of a was not found"]


def test_kai_queue_needs_resources() -> None:
    queue = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "q"},
             "spec": {"parentQueue": "dept"}}
    assert rules(queue) == ["spec.resources: required: a KAI Queue sets its gpu, cpu and memory "
                            "resources"]
    queue["spec"]["resources"] = {"gpu": {"quota": 1, "limit": -1, "overQuotaWeight": 1}}
    assert rules(queue) == []
