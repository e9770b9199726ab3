"""Objects as the API server sees them: every YAML the project ships passes the
checks a kube-apiserver (with kaisched's CRDs) makes on create, except the
objects that are wrong on purpose, which are flagged naming the object and
the rule; each rule on its own; snapshots are valid by construction."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Iterator

import orjson
import pytest
import yaml

from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import SCHEDULING_KINDS
from kaisched.cluster.snapshot import build_snapshot, load_file, load_text
from kaisched.framework import default_config
from kaisched.tools.replay import replay
from kaisched.validation import (
    KUBERNETES_VERSION,
    check_object,
    partition,
    summarize,
    use_kube_version,
)
from tests.builders import ROOT
from tests.builders.malformed import BROKEN

GANG = ROOT / "config" / "examples" / "gang.yaml"


def shipped_yaml() -> list[Path]:
    """Every YAML file the project ships, found by globbing (new examples are picked up)."""
    patterns = ["config/*.yaml", "config/crds/**/*.yaml", "config/examples/**/*.yaml",
                "config/examples/**/*.yml", "kaisched/examples/*.yaml", "tests/scenarios/**/*.yaml",
                "tests/podgrouper/manifests/**/*.yaml"]
    found = {p for pattern in patterns for p in ROOT.glob(pattern)}
    # Expected decisions of a scenario, and kustomize's own file (read by kubectl, never sent
    # to the API server): not objects.
    return sorted(p for p in found
                  if not p.name.endswith(".expect.yaml") and p.name != "kustomization.yaml")


SHIPPED = shipped_yaml()

# Objects that are wrong on purpose, and the rule each must be flagged for.
DELIBERATE: dict[tuple[str, str], str] = {
    # minMember 0, -1 and "abc": the scheduler's own answer to bad PodGroups is tested there.
    ("tests/scenarios/bad-input.yaml", "PodGroup default/zero"): "spec.minMember: 0 is less than the minimum of 1",
    ("tests/scenarios/bad-input.yaml", "PodGroup default/negative"): "spec.minMember: -1 is less than the minimum of 1",
    ("tests/scenarios/bad-input.yaml", "PodGroup default/letters"): "spec.minMember: 'abc' is not of type 'integer'",
    # Hand-written ownerReferences without uids, which the PodGrouper follows by name.
    **{("tests/podgrouper/manifests/mpijob.yaml", obj): "metadata.ownerReferences[0]: 'uid' is a required property"
       for obj in ["Job default/pi-launcher", "Pod default/pi-launcher-x7bq2",
                   *(f"Pod default/pi-worker-{i}" for i in range(4))]},
}


def embedded_objects(node: Any) -> Iterator[dict[str, Any]]:
    """Kubernetes objects inside a document that is not one (a simulate scenario)."""
    if isinstance(node, dict):
        if {"apiVersion", "kind", "metadata"} <= set(node):
            yield node
            return
        for value in node.values():
            yield from embedded_objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from embedded_objects(value)


def simulated_objects(path: Path) -> list[dict[str, Any]]:
    """What `kaisched simulate` creates for a scenario's jobs: each operator's objects
    and the pods it makes (uids given as the API server would)."""
    from kaisched.sim.operators import blueprint, pod_object
    from kaisched.sim.scenario import Base, load_scenario

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    base = None
    if "nodePools" not in data:
        # A what-if's arrivals: they go onto a snapshot's cluster, here the starvation example's.
        cluster = load_scenario(path.parent / "starvation.yaml")
        base = Base("starvation", cluster.pools, cluster.queues, cluster.priority_classes)
    scenario = load_scenario(path, base=base)
    priorities = dict(scenario.priority_classes)
    out: list[dict[str, Any]] = []
    for number, job in enumerate(scenario.jobs):
        plan = blueprint(job, "kaisched")
        made = [{**obj, "metadata": {**obj["metadata"], "uid": f"00000000-0000-4000-{number:04d}-{i:012d}"}}
                for i, obj in enumerate(plan.objects)]
        out += made
        for pod in plan.pods:
            owner = made[pod.parent] if pod.parent is not None else None
            out.append(pod_object(pod, plan.templates[pod.role], job.namespace, owner, priorities))
    return out


def objects_of(path: Path) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    if all(isinstance(d, dict) and "apiVersion" in d for d in docs):
        return load_file(path, check_kinds=False).objects
    if len(docs) == 1 and isinstance(docs[0], dict) and ("jobs" in docs[0] or "generate" in docs[0]):
        return simulated_objects(path)      # a `kaisched simulate` scenario
    return list(embedded_objects(docs))     # the scheduler's config: no objects


def _is_scheduler_config(path: Path) -> bool:
    """A scheduler config to compare with (kaisched/examples/no-starvation-guard.yaml): no objects."""
    from kaisched.builtins.catalog import register_builtins
    from kaisched.errors import KaischedError
    from kaisched.framework import parse_config

    try:
        parse_config(path.read_text(encoding="utf-8"), register_builtins(), str(path))
    except KaischedError:
        return False
    return True


def test_the_shipped_files_are_found() -> None:
    names = {str(p.relative_to(ROOT)) for p in SHIPPED}
    assert {"config/examples/gang.yaml", "config/examples/queues.yaml", "config/crds/podgroups.yaml",
            "config/deployment.yaml", "tests/scenarios/bad-input.yaml",
            "tests/podgrouper/manifests/pytorchjob.yaml"} <= names
    assert not any(n.endswith(".expect.yaml") for n in names)
    assert {file for file, _ in DELIBERATE} <= names


def scenario_version(path: Path) -> tuple[str, list[str]]:
    """The Kubernetes version a scenario is written for (its expectations'
    kubeVersion, else the default) and the refusals it expects of it."""
    expect = path.with_name(path.stem + ".expect.yaml")
    if "scenarios" not in path.parts or not expect.exists():
        return KUBERNETES_VERSION, []
    want = yaml.safe_load(expect.read_text(encoding="utf-8")) or {}
    return str(want.get("kubeVersion", KUBERNETES_VERSION)), list(want.get("refused") or [])


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_yaml_is_what_a_cluster_accepts(path: Path) -> None:
    rel = str(path.relative_to(ROOT))
    version, refused = scenario_version(path)
    use_kube_version(version)
    try:
        kept, problems = partition(objects_of(path))
    finally:
        use_kube_version(KUBERNETES_VERSION)
    # What is refused of each object, in one line (as replay reports it).
    flagged = {line.split(": ", 1)[0]: line for line in summarize(problems)}
    expected = {obj: rule for (file, obj), rule in DELIBERATE.items() if file == rel}
    # A scenario that shows what its version refuses says so in its expectations.
    expected.update({obj: line for obj, line in flagged.items()
                     if any(part in line for part in refused)})
    unexpected = [line for obj, line in flagged.items() if obj not in expected]
    assert unexpected == [], f"{rel}: a cluster would refuse: {unexpected}"
    for obj, rule in expected.items():
        assert obj in flagged, f"{rel}: {obj} is meant to be flagged ({rule})"
        assert rule in flagged[obj]
    if path.name != "scheduler.yaml" and not _is_scheduler_config(path):
        assert kept or expected, f"{rel}: no object at all"


def is_manifest(path: Path) -> bool:
    return all(isinstance(d, dict) and "apiVersion" in d
               for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None)


@pytest.mark.parametrize("path", [p for p in SHIPPED if "examples" in p.parts and is_manifest(p)],
                         ids=lambda p: p.name)
def test_examples_apply_in_order(path: Path) -> None:
    """What `kubectl apply -f` needs beyond the schema: a namespace exists before
    its objects (or is a built-in one), and every container names an image."""
    namespaces = {"default", "kube-system", "kube-public", "kube-node-lease"}
    for obj in objects_of(path):
        if obj["kind"] == "Namespace":
            namespaces.add(obj["metadata"]["name"])
        assert obj["metadata"].get("namespace", "default") in namespaces, obj["metadata"]
        for container in (obj.get("spec") or {}).get("containers") or () if obj["kind"] == "Pod" else ():
            assert container.get("image"), obj["metadata"]


# --- the README's first example ---------------------------------------------------------------

def test_the_first_example_passes_and_a_gpu_pod_without_limit_is_refused() -> None:
    objects = load_file(GANG).objects
    assert partition(objects)[1] == []
    broken = copy.deepcopy(objects)
    master = next(o for o in broken if o["metadata"]["name"] == "bert-master-0")
    del master["spec"]["containers"][0]["resources"]["limits"]
    kept, problems = partition(broken)
    assert [str(p) for p in problems] == [
        "Pod research/bert-master-0: spec.containers[0].resources.limits: a limit must be set for "
        "nvidia.com/gpu: it is not overcommittable, so requests must equal limits"]
    assert master not in kept and len(kept) == len(objects) - 1


# --- the objects test_malformed.py feeds the scheduler are what a cluster refuses ---------------

MALFORMED_FIELDS = {
    "labels-list": "metadata.labels", "containers-dict": "spec.containers",
    "requests-list": "spec.containers[0].resources.requests",
    "bad-quantity": "spec.containers[0].resources.requests[cpu]", "tolerations-str": "spec.tolerations",
    "selector-list": "spec.nodeSelector", "affinity-str": "spec.affinity", "status-list": "status",
    "annotations-str": "metadata.annotations", "node-broken": "status", "node-taints": "spec.taints",
    "pg-list": "spec", "q-broken": "spec.resources.cpu", "pc": "value",
}


def test_every_malformed_object_is_flagged_naming_the_field() -> None:
    for obj in BROKEN:
        name = obj["metadata"]["name"]
        problems = check_object(obj)
        assert [p.field for p in problems] == [MALFORMED_FIELDS[name]], (name, problems)
        assert problems[0].object.endswith(name) and problems[0].rule


# --- each rule -------------------------------------------------------------------------------

def pod(resources: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", "resources": resources or {}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [container], **spec}}


def rules(obj: dict[str, Any]) -> list[str]:
    return [f"{p.field}: {p.rule}" for p in check_object(obj)]


GPU = "nvidia.com/gpu"


@pytest.mark.parametrize("resources, expected", [
    ({"requests": {GPU: "1"}}, "spec.containers[0].resources.limits: a limit must be set for nvidia.com/gpu"),
    ({"requests": {"example.com/fpga": 2}}, "limits: a limit must be set for example.com/fpga"),
    ({"requests": {"hugepages-2Mi": "1Gi", "memory": "1Gi"}}, "limits: a limit must be set for hugepages-2Mi"),
    ({"requests": {GPU: "1"}, "limits": {GPU: "2"}}, "requests[nvidia.com/gpu]: must be equal to the nvidia.com/gpu limit of 2"),
    ({"limits": {GPU: "0.5"}}, "limits[nvidia.com/gpu]: must be an integer"),
    ({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}, "requests[cpu]: must be less than or equal to the cpu limit of 1"),
    ({"requests": {"cpu": "-1"}}, "requests[cpu]: must be greater than or equal to 0"),
    ({"requests": {"gpu": "1"}}, "requests[gpu]: must be a standard resource for containers"),
    ({"requests": {"memory": "lots"}}, "requests[memory]: 'lots' is not a quantity"),
], ids=repr)
def test_resource_rules(resources: dict[str, Any], expected: str) -> None:
    found = rules(pod(resources))
    assert len(found) == 1 and expected in found[0], found


@pytest.mark.parametrize("resources", [
    {"requests": {GPU: "2"}, "limits": {GPU: "2"}},
    {"limits": {GPU: 2}},                          # requests default to limits
    {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2"}},
    {"requests": {"cpu": "1"}},
], ids=repr)
def test_resources_a_cluster_accepts(resources: dict[str, Any]) -> None:
    assert rules(pod(resources)) == []


@pytest.mark.parametrize("mutate, expected", [
    (lambda o: o["metadata"].update(name="Bert_0"), "metadata.name: must be a DNS-1123 subdomain"),
    (lambda o: o["metadata"].update(name="x" * 254), "metadata.name: must be no more than 253 characters"),
    (lambda o: o["metadata"].update(namespace="Research"), "metadata.namespace: must be a DNS-1123 label"),
    (lambda o: o["spec"]["containers"][0].update(name="Main"), "spec.containers[0].name: must be a DNS-1123 label"),
    (lambda o: o["spec"]["containers"].append({"name": "main", "image": "x"}), "duplicate container name 'main'"),
    (lambda o: o["spec"].update(containers=[]), "spec.containers: at least one container is required"),
    (lambda o: o["metadata"].update(labels={"kaisched.io/queue": "team a"}), "metadata.labels[kaisched.io/queue]: value must be"),
    (lambda o: o["metadata"].update(labels={"bad key!": "x"}), "metadata.labels[bad key!]: key must be a qualified name"),
    (lambda o: o["spec"].update(nodeSelector={"zone": "-a"}), "spec.nodeSelector[zone]: value must be"),
    (lambda o: o["spec"].update(tolerations=[{"operator": "Equal", "value": "x"}]), "tolerations[0].operator: must be Exists when key is empty"),
    (lambda o: o["spec"].update(tolerations=[{"key": "k", "operator": "Exists", "value": "x"}]), "tolerations[0].value: must be empty"),
    (lambda o: o["spec"].update(tolerations=[{"key": "k", "effect": "NoWay"}]), "tolerations[0].effect: unsupported value 'NoWay'"),
    (lambda o: o["spec"].update(tolerations=[{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]), "must be NoExecute"),
    (lambda o: o["spec"].update(schedulerNam="kaisched"), "spec: unknown field 'schedulerNam'"),
    (lambda o: o["spec"].update(priority="high"), "spec.priority: 'high' is not of type 'integer'"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_pod_rules(mutate: Any, expected: str) -> None:
    obj = pod()
    mutate(obj)
    found = rules(obj)
    assert any(expected in line for line in found), found


def test_generate_name_is_accepted_and_checked() -> None:
    obj = pod()
    obj["metadata"] = {"generateName": "job-", "namespace": "default"}
    assert rules(obj) == []
    obj["metadata"]["generateName"] = "Job-"
    assert rules(obj) == ["metadata.generateName: must be a DNS-1123 subdomain: lower case letters, "
                          "digits, '-' and '.', starting and ending with a letter or digit"]


def test_a_workload_template_is_held_to_the_pod_rules() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"selector": {"matchLabels": {"app": "d"}},
                           "template": {"metadata": {"labels": {"app": "d"}},
                                        "spec": pod({"requests": {GPU: "1"}})["spec"]}}}
    assert rules(deployment) == ["spec.template.spec.containers[0].resources.limits: a limit must be set "
                                 "for nvidia.com/gpu: it is not overcommittable, so requests must equal limits"]


@pytest.mark.parametrize("status, expected", [
    ({"allocatable": {GPU: "1.5"}}, "status.allocatable[nvidia.com/gpu]: must be an integer"),
    ({"capacity": {"cpu": "-4"}}, "status.capacity[cpu]: must be greater than or equal to 0"),
])
def test_node_rules(status: dict[str, Any], expected: str) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n-1"}, "status": status}
    assert [expected in line for line in rules(node)] == [True]


def test_priority_class_rules() -> None:
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "train"},
          "value": 2_000_000_000}
    assert rules(pc) == ["value: must be at most 1000000000 (higher values are for "
                         "system-node-critical and system-cluster-critical)"]
    pc["metadata"]["name"], pc["value"] = "system-mine", 10
    assert rules(pc) == ["metadata.name: names starting with 'system-' are reserved"]


def podgroup(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "bert", "namespace": "research"}, "spec": {"minMember": 2, **spec}}


@pytest.mark.parametrize("obj, expected", [
    (podgroup(minMember=0), "spec.minMember: 0 is less than the minimum of 1"),
    (podgroup(minMembers=3), "spec: unknown field 'minMembers'"),
    (podgroup(subGroups=[{"name": "Master", "minMember": 1}]), "spec.subGroups[0].name: 'Master' does not match"),
    ({**podgroup(), "metadata": {"name": "Bert", "namespace": "research"}}, "metadata.name: must be a DNS-1123 subdomain"),
    ({**podgroup(), "metadata": {"name": "bert", "namespace": "research", "labels": "x"}}, "metadata.labels: 'x' is not of type"),
    ({**podgroup(), "apiVersion": "scheduling.kaisched.io/v1beta1"},
     "apiVersion: scheduling.kaisched.io serves no PodGroup in v1beta1"),
    ({"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "Queue", "metadata": {"name": "q"},
      "spec": {"resources": {"cpu": {"quota": "lots"}}}}, "spec.resources.cpu.quota: 'lots' does not match"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_kaisched_kinds_against_the_crds(obj: dict[str, Any], expected: str) -> None:
    found = rules(obj)
    assert any(line.startswith(expected) for line in found), found


def provisioning_request(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": "big", "namespace": "research"},
            "spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                     "podSets": [{"podTemplateRef": {"name": "big-0"}, "count": 2}], **spec}}


def test_provisioning_requests_against_cluster_autoscalers_crd() -> None:
    """kaisched reads the requests it makes: replay and simulate check them as a cluster with
    cluster-autoscaler's CRD would. Its immutable fields' rules (self == oldSelf) are
    transition rules, not checked on create."""
    assert rules(provisioning_request()) == []
    none = rules(provisioning_request(podSets=[{"podTemplateRef": {"name": "x"}, "count": 0}]))
    assert any(line.startswith("spec.podSets[0].count: 0 is less than the minimum of 1")
               for line in none), none
    assert any("'provisioningClassName' is a required property" in line
               for line in rules({**provisioning_request(), "spec": {"podSets": []}}))


@pytest.mark.parametrize("obj, expected", [
    ({"apiVersion": "v1", "kind": "Podd", "metadata": {"name": "x"}},
     f"kind: unknown kind Podd in v1: Kubernetes {KUBERNETES_VERSION} serves no such kind"),
    ({"apiVersion": "batch/v1beta1", "kind": "CronJob", "metadata": {"name": "x"}},
     f"kind: unknown kind CronJob in batch/v1beta1: Kubernetes {KUBERNETES_VERSION} serves no such kind"),
    ({"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
      "metadata": {"name": "x"}},
     "apiVersion: unknown kind FlinkDeployment in flink.apache.org/v1beta1"),
], ids=["core-typo", "removed-version", "unknown-group"])
def test_kinds_nobody_serves(obj: dict[str, Any], expected: str) -> None:
    assert [line.startswith(expected) for line in rules(obj)] == [True]


def test_kinds_kaisched_reads_without_their_crds_are_kept() -> None:
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
           "metadata": {"name": "bert", "namespace": "nlp"}, "spec": {"anything": True}}
    assert rules(job) == []
    job["metadata"]["name"] = "Bert"
    assert rules(job) == ["metadata.name: must be a DNS-1123 subdomain: lower case letters, digits, "
                          "'-' and '.', starting and ending with a letter or digit"]


def test_partition_keeps_order_and_refuses_a_second_object_of_one_name() -> None:
    first, second = pod(), pod({"requests": {"cpu": "2"}})
    other = {**pod(), "metadata": {"name": "p", "namespace": "other"}}
    kept, problems = partition([first, podgroup(minMember=0), second, other])
    assert kept == [first, other]
    assert summarize(problems) == [
        "PodGroup research/bert: spec.minMember: 0 is less than the minimum of 1",
        "Pod default/p: metadata.name: already exists: an earlier object in the input has this name"]


# --- snapshots are valid by construction ---------------------------------------------------------

@pytest.mark.parametrize("redacted", [False, True], ids=["whole", "redacted"])
def test_a_dumped_snapshot_passes_the_check(redacted: bool) -> None:
    """What snapshot-dump writes, from a cluster after a session (bound pods, PodGroups the
    PodGrouper made, statuses written by the scheduler), passes the same check."""
    registry = register_builtins()
    config = default_config(registry)
    cluster = replay(load_file(GANG).objects, config, registry, 2).cluster
    items = [obj for kind in SCHEDULING_KINDS for obj in cluster.list(kind)]
    data = orjson.dumps(build_snapshot(items, config.to_dict(), redacted))
    loaded = load_text(data.decode(), "snapshot", check_kinds=False)
    kept, problems = partition(loaded.objects)
    assert problems == [] and len(kept) == len(items) > 10
