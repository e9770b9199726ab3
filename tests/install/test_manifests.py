"""The Kubernetes manifests under config/: they parse, the CRDs match the API contract
and are structural, and the deployment agrees with rbac and scheduler.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.builders import ROOT

CONFIG = ROOT / "config"
EXAMPLES = CONFIG / "examples"
GROUP = "scheduling.kaisched.io"
VERSION = "v1alpha1"
SCALAR_TYPES = {"string", "integer", "number", "boolean"}


def load(path: Path) -> list:
    with path.open(encoding="utf-8") as f:
        return [doc for doc in yaml.safe_load_all(f) if doc is not None]


def yaml_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


MANIFESTS = [p for p in yaml_files(CONFIG) if EXAMPLES not in p.parents]
EXAMPLE_FILES = yaml_files(EXAMPLES) if EXAMPLES.is_dir() else []


def objects(name: str) -> list[dict]:
    return load(CONFIG / name)


def find(docs: list[dict], kind: str, name: str) -> dict:
    matches = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name}, found {len(matches)}"
    return matches[0]


def crd(plural: str) -> dict:
    return find(objects(f"crds/{plural}.yaml"), "CustomResourceDefinition", f"{plural}.{GROUP}")


def schema(plural: str) -> dict:
    (version,) = [v for v in crd(plural)["spec"]["versions"] if v["name"] == VERSION]
    return version["schema"]["openAPIV3Schema"]


def has_name(doc: object) -> bool:
    return (
        isinstance(doc, dict)
        and bool(doc.get("apiVersion"))
        and bool(doc.get("kind"))
        and isinstance(doc.get("metadata"), dict)
        and bool(doc["metadata"].get("name"))
    )


# --- every file parses -------------------------------------------------------------------


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(CONFIG)))
def test_manifest_parses_into_named_objects(path: Path) -> None:
    docs = load(path)
    if path.name == "scheduler.yaml":  # the scheduler's own config, not a Kubernetes object
        assert isinstance(docs[0], dict)
        return
    if path.name == "kustomization.yaml":   # kustomize's own file: what `kubectl apply -k` reads
        # A Kustomization, or a Component (config/components) an overlay opts into.
        assert docs[0]["kind"] in ("Kustomization", "Component") and docs[0]["resources"]
        return
    assert docs, f"{path} holds no document"
    for doc in docs:
        assert has_name(doc), f"{path}: document without apiVersion/kind/metadata.name: {doc!r:.200}"


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: str(p.relative_to(CONFIG)))
def test_example_parses(path: Path) -> None:
    docs = load(path)
    assert docs, f"{path} holds no document"
    if not any(isinstance(d, dict) and "apiVersion" in d for d in docs):
        return  # a `kaisched simulate` scenario, not Kubernetes objects: parsing is enough
    for doc in docs:
        assert has_name(doc), f"{path}: document without apiVersion/kind/metadata.name: {doc!r:.200}"


# --- the CRDs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("plural", "kind", "scope"), [("podgroups", "PodGroup", "Namespaced"), ("queues", "Queue", "Cluster")]
)
def test_crd_identity(plural: str, kind: str, scope: str) -> None:
    spec = crd(plural)["spec"]
    assert spec["group"] == GROUP
    assert spec["scope"] == scope
    assert spec["names"]["kind"] == kind
    assert spec["names"]["plural"] == plural
    versions = {v["name"]: v for v in spec["versions"]}
    assert list(versions) == [VERSION]
    v = versions[VERSION]
    assert v["served"] is True and v["storage"] is True
    assert v["subresources"]["status"] == {}


def test_podgroup_contract() -> None:
    root = schema("podgroups")
    spec = root["properties"]["spec"]
    # minMember or (for a tree) minSubGroup: one of them, by a CEL rule.
    assert "required" not in spec
    rules = [r["rule"] for r in spec["x-kubernetes-validations"]]
    assert "has(self.minMember) != has(self.minSubGroup)" in rules
    assert spec["properties"]["minSubGroup"]["minimum"] == 1
    item = spec["properties"]["subGroups"]["items"]["properties"]
    assert {"name", "minMember", "parent", "minSubGroup", "topology"} <= set(item)
    assert spec["properties"]["minMember"]["type"] == "integer"
    assert spec["properties"]["minMember"]["minimum"] == 1
    assert spec["properties"]["mode"]["enum"] == ["Strict", "NonStrict"]
    assert spec["properties"]["mode"]["default"] == "Strict"
    assert spec["properties"]["preemptible"]["default"] is True
    assert crd("podgroups")["spec"]["names"]["shortNames"] == ["kpg", "kpgs"]
    phases = root["properties"]["status"]["properties"]["phase"]["enum"]
    assert phases == ["Pending", "Inqueue", "Running", "Succeeded", "Failed", "Unknown"]


def test_queue_contract() -> None:
    spec = schema("queues")["properties"]["spec"]["properties"]
    assert spec["priority"]["default"] == 100
    per_resource = spec["resources"]["additionalProperties"]["properties"]
    assert set(per_resource) == {"quota", "limit", "overQuotaWeight"}
    assert per_resource["quota"]["x-kubernetes-int-or-string"] is True
    assert per_resource["overQuotaWeight"]["minimum"] == 0


def structural_errors(node: dict, path: str) -> list[str]:
    """The rules of a structural schema that these CRDs could break (a subset of the apiserver's)."""
    errors: list[str] = []
    if node.get("x-kubernetes-preserve-unknown-fields"):
        errors.append(f"{path}: x-kubernetes-preserve-unknown-fields is not wanted")
    if node.get("x-kubernetes-int-or-string"):
        if "type" in node:
            errors.append(f"{path}: int-or-string must not set type")
        if "anyOf" in node and node["anyOf"] != [{"type": "integer"}, {"type": "string"}]:
            errors.append(f"{path}: int-or-string anyOf must be [integer, string]")
        for key in ("properties", "additionalProperties", "items"):
            if key in node:
                errors.append(f"{path}: int-or-string with {key}")
        return errors
    for key in ("anyOf", "allOf", "oneOf", "not"):
        if key in node:
            errors.append(f"{path}: {key} outside int-or-string")
    kind = node.get("type")
    if kind not in SCALAR_TYPES | {"object", "array"}:
        errors.append(f"{path}: missing or bad type {kind!r}")
    if ("properties" in node or "additionalProperties" in node) and kind != "object":
        errors.append(f"{path}: properties on a non-object")
    if "properties" in node and "additionalProperties" in node:
        errors.append(f"{path}: both properties and additionalProperties")
    if kind == "object" and not ("properties" in node or "additionalProperties" in node):
        if path != "$.metadata":
            errors.append(f"{path}: object with no fields would prune everything")
    for field in node.get("required", []):
        if field not in node.get("properties", {}):
            errors.append(f"{path}: required {field!r} is not a property")
    if "default" in node:
        default = node["default"]
        if "enum" in node and default not in node["enum"]:
            errors.append(f"{path}: default {default!r} not in enum")
        expected = {"string": str, "integer": int, "number": (int, float), "boolean": bool}.get(kind)
        if expected and not isinstance(default, expected):
            errors.append(f"{path}: default {default!r} is not {kind}")
    if kind == "array":
        items = node.get("items")
        if not isinstance(items, dict):
            errors.append(f"{path}: array without items")
        else:
            if node.get("x-kubernetes-list-type") == "map":
                keys = node.get("x-kubernetes-list-map-keys") or []
                if items.get("type") != "object" or not keys:
                    errors.append(f"{path}: list-type map needs object items and keys")
                for key in keys:
                    if key not in items.get("required", []):
                        errors.append(f"{path}: list map key {key!r} must be required")
            errors += structural_errors(items, f"{path}[]")
    for name, child in node.get("properties", {}).items():
        errors += structural_errors(child, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        errors += structural_errors(node["additionalProperties"], f"{path}.*")
    return errors


@pytest.mark.parametrize("plural", ["podgroups", "queues"])
def test_crd_schema_is_structural(plural: str) -> None:
    root = schema(plural)
    assert root["type"] == "object"
    assert structural_errors(root, "$") == []


def jsonpath_parts(path: str) -> list[str]:
    """The keys of a simple printer-column JSONPath; `\\.` is a dot inside a key
    (`.status.allocated.nvidia\\.com/gpu`)."""
    assert path.startswith("."), path
    return [p.replace("\0", ".") for p in path[1:].replace("\\.", "\0").split(".")]


@pytest.mark.parametrize("plural", ["podgroups", "queues"])
def test_printer_columns_point_into_the_schema(plural: str) -> None:
    (version,) = crd(plural)["spec"]["versions"]
    for column in version["additionalPrinterColumns"]:
        parts = jsonpath_parts(column["jsonPath"])
        if parts[0] == "metadata":
            continue
        node = schema(plural)
        for part in parts:
            node = node["properties"][part] if part in node.get("properties", {}) \
                else node["additionalProperties"]
        if node.get("x-kubernetes-int-or-string"):
            assert column["type"] == "string", column     # a quantity, as written
        else:
            assert node["type"] == column["type"], column


# --- the schemas accept the contract's objects and reject bad ones ---------------------------

GOOD_SPEC = {
    "minMember": 4,
    "queue": "team-a",
    "priorityClassName": "train",
    "minResources": {"cpu": "8", "nvidia.com/gpu": 4, "memory": "64Gi"},
    "scheduleTimeoutSeconds": 600,
    "mode": "NonStrict",
    "gangGroup": ["ns-a/gang-a", "ns-b/gang-b"],
    "subGroups": [{"name": "master", "minMember": 1}, {"name": "worker", "minMember": 3}],
    "preemptible": False,
    "staleGangGracePeriodSeconds": 0,
}


def validator(plural: str):
    import jsonschema
    return jsonschema.Draft4Validator(schema(plural))


def podgroup(**spec: object) -> dict:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ns"},
        "spec": {**GOOD_SPEC, **spec},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "Scheduled", "status": "False", "reason": "Unschedulable",
                            "message": "3/8 tasks placed", "lastTransitionTime": "2024-01-01T00:00:00Z"}],
            "scheduled": 0, "running": 0, "succeeded": 0, "failed": 0, "pending": 8,
            "staleSince": "2024-01-01T00:00:00Z",
        },
    }


def test_podgroup_schema_accepts_the_contract_example() -> None:
    assert list(validator("podgroups").iter_errors(podgroup())) == []


@pytest.mark.parametrize(
    "bad",
    [
        {"minMember": 0},
        {"minMember": -1},
        {"minMember": "abc"},
        {"mode": "Lenient"},
        {"gangGroup": ["no-namespace"]},
        {"subGroups": [{"name": "Bad_Role", "minMember": 1}]},
        {"subGroups": [{"name": "worker"}]},
        {"minResources": {"cpu": "eight"}},
        {"scheduleTimeoutSeconds": 0},
        {"preemptible": "yes"},
    ],
    ids=repr,
)
def test_podgroup_schema_rejects(bad: dict) -> None:
    assert podgroup_errors(podgroup(**bad))


def podgroup_errors(obj: dict) -> list[str]:
    """What an API server with the CRD says: its schema, then its CEL rules."""
    from kaisched.validation.celrules import rule_errors
    found = [e.message for e in validator("podgroups").iter_errors(obj)]
    return found or [message for _, message in rule_errors(schema("podgroups"), obj)]


def test_podgroup_schema_requires_min_member() -> None:
    obj = podgroup()
    del obj["spec"]["minMember"]
    assert podgroup_errors(obj) == [
        "give minMember (pods) or minSubGroup (top-level subgroups), one of them"]


STAGES = [{"name": f"stage-{i}", "minMember": 2} for i in range(4)]


@pytest.mark.parametrize("spec", [
    {"minSubGroup": 2, "subGroups": STAGES},
    {"minMember": 10, "subGroups": [
        {"name": "decode", "minSubGroup": 2},
        {"name": "decode-leader", "parent": "decode", "minMember": 1},
        {"name": "decode-workers", "parent": "decode", "minMember": 4},
        {"name": "prefill"},
        {"name": "prefill-leader", "parent": "prefill", "minMember": 1},
        {"name": "prefill-workers", "parent": "prefill", "minMember": 4}]},
], ids=["two-of-four-stages", "two-levels"])
def test_podgroup_schema_accepts_subgroup_trees(spec: dict) -> None:
    obj = podgroup()
    obj["spec"] = {k: v for k, v in obj["spec"].items() if k not in ("minMember", "subGroups")}
    obj["spec"].update(spec)
    assert podgroup_errors(obj) == []


@pytest.mark.parametrize("spec, message", [
    ({"minMember": 2, "minSubGroup": 2, "subGroups": STAGES}, "one of them"),
    ({"minSubGroup": 5, "subGroups": STAGES}, "minSubGroup exceeds the top-level"),
    ({"minMember": 2, "subGroups": [{"name": "w", "minMember": 1, "parent": "nowhere"}]},
     "parent must be another subgroup"),
    ({"minMember": 2, "subGroups": [{"name": "w", "minSubGroup": 1}]}, "not minSubGroup"),
    ({"minMember": 2, "subGroups": [{"name": "s", "minMember": 2},
                                    {"name": "w", "minMember": 1, "parent": "s"}]}, "not minMember"),
    ({"minMember": 2, "subGroups": [{"name": "s", "minSubGroup": 2},
                                    {"name": "w", "minMember": 1, "parent": "s"}]},
     "at most as many"),
], ids=["both-minimums", "too-many-stages", "no-parent", "leaf-min-subgroup",
        "inner-min-member", "inner-too-many"])
def test_podgroup_schema_refuses_bad_trees(spec: dict, message: str) -> None:
    obj = podgroup()
    obj["spec"] = {k: v for k, v in obj["spec"].items() if k not in ("minMember", "subGroups")}
    obj["spec"].update(spec)
    errors = podgroup_errors(obj)
    assert any(message in e for e in errors), errors


def test_kaisched_objects_in_config_validate_against_their_crd() -> None:
    plurals = {"PodGroup": "podgroups", "Queue": "queues"}
    seen = 0
    for path in MANIFESTS + EXAMPLE_FILES:
        for doc in load(path):
            if isinstance(doc, dict) and doc.get("apiVersion") == f"{GROUP}/{VERSION}":
                errors = [e.message for e in validator(plurals[doc["kind"]]).iter_errors(doc)]
                assert errors == [], f"{path}: {doc['metadata']['name']}: {errors}"
                seen += 1
    assert seen, "no kaisched object found under config/"


def test_queue_schema_rejects_bad_quantities() -> None:
    queue = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue", "metadata": {"name": "q"},
             "spec": {"resources": {"cpu": {"quota": "lots"}}}}
    assert list(validator("queues").iter_errors(queue))
    queue["spec"]["resources"] = {"cpu": {"quota": 1, "limit": "500m", "overQuotaWeight": -1}}
    assert list(validator("queues").iter_errors(queue))


# --- deployment, rbac and the scheduler config agree -----------------------------------------


def test_configmap_matches_scheduler_yaml() -> None:
    default = CONFIG / "scheduler.yaml"
    cm = find(objects("deployment.yaml"), "ConfigMap", "kaisched-config")
    assert yaml.safe_load(cm["data"]["scheduler.yaml"]) == load(default)[0]


def test_deployments_use_the_config_and_accounts_that_exist() -> None:
    deploy = objects("deployment.yaml")
    rbac = objects("rbac.yaml")
    accounts = {d["metadata"]["name"] for d in rbac if d["kind"] == "ServiceAccount"}
    assert {d["metadata"]["namespace"] for d in rbac if d["kind"] == "ServiceAccount"} == {"kaisched-system"}
    find(deploy, "Namespace", "kaisched-system")

    scheduler = find(deploy, "Deployment", "kaisched")
    assert scheduler["spec"]["replicas"] == 2
    pod = scheduler["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] in accounts
    (container,) = pod["containers"]
    assert container["command"][:2] == ["kaisched", "run"]
    assert "--kubeconfig" not in container["command"]
    config_path = container["command"][container["command"].index("--config") + 1]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    (config_volume,) = [n for n, v in volumes.items() if "configMap" in v]
    find(deploy, "ConfigMap", volumes[config_volume]["configMap"]["name"])
    assert config_path == f"{mounts[config_volume]}/scheduler.yaml"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True

    grouper = find(deploy, "Deployment", "kaisched-podgrouper")
    assert grouper["spec"]["replicas"] == 2          # one leads, through its own Lease
    (grouper_container,) = grouper["spec"]["template"]["spec"]["containers"]
    port = int(grouper_container["command"][grouper_container["command"].index("--metrics-port") + 1])
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert grouper_container[probe]["httpGet"] == {"path": path, "port": port}
    assert grouper["spec"]["template"]["spec"]["serviceAccountName"] in accounts
    assert grouper_container["command"][:2] == ["podgrouper", "run"]


def test_bindings_point_at_roles_and_accounts_that_exist() -> None:
    rbac = objects("rbac.yaml")
    roles = {d["metadata"]["name"] for d in rbac if d["kind"] == "ClusterRole"}
    accounts = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in rbac if d["kind"] == "ServiceAccount"}
    bindings = [d for d in rbac if d["kind"] == "ClusterRoleBinding"]
    assert {b["roleRef"]["name"] for b in bindings} == roles == {"kaisched", "kaisched-podgrouper"}
    for binding in bindings:
        for subject in binding["subjects"]:
            assert (subject["namespace"], subject["name"]) in accounts


def granted(role: dict, group: str, resource: str) -> set[str]:
    verbs: set[str] = set()
    for rule in role["rules"]:
        if group in rule["apiGroups"] and resource in rule["resources"]:
            verbs |= set(rule["verbs"])
    return verbs


def test_scheduler_can_bind_evict_and_write_status() -> None:
    role = find(objects("rbac.yaml"), "ClusterRole", "kaisched")
    assert "create" in granted(role, "", "pods/binding")
    assert "create" in granted(role, "", "pods/eviction")
    assert "patch" in granted(role, GROUP, "podgroups/status")
    lease_role = find(objects("rbac.yaml"), "Role", "kaisched-leader-election")
    assert {"get", "create", "patch"} <= granted(lease_role, "coordination.k8s.io", "leases")
    assert {"list", "watch"} <= granted(role, "scheduling.x-k8s.io", "podgroups")


def test_podgrouper_can_create_podgroups_and_read_owners() -> None:
    role = find(objects("rbac.yaml"), "ClusterRole", "kaisched-podgrouper")
    assert "create" in granted(role, GROUP, "podgroups")
    assert "patch" in granted(role, "", "pods")
    for group, resource in [("apps", "replicasets"), ("batch", "jobs"), ("kubeflow.org", "pytorchjobs"),
                            ("kubeflow.org", "mpijobs"), ("jobset.x-k8s.io", "jobsets"), ("ray.io", "rayjobs")]:
        assert "get" in granted(role, group, resource), (group, resource)


def test_short_names_do_not_clash_with_volcano_or_kai() -> None:
    """Volcano and KAI Scheduler serve PodGroups as pg/podgroup and Queues as q/queue:
    on a cluster with either, `kubectl get pg` must not be ambiguous."""
    theirs = {"pg", "pgs", "podgroup", "podgroups", "q", "queue", "queues"}
    for plural in ("podgroups", "queues"):
        names = crd(plural)["spec"]["names"]
        assert not set(names.get("shortNames") or ()) & theirs, names
        assert names.get("shortNames"), f"{plural}: a short name of its own"
