"""What a platform team opts into: config/components/monitoring, config/components/ha
and config/components/shard-b, kustomize Components included from an overlay of config/. Each renders with
`kubectl kustomize` (where kubectl is on PATH) on top of config/, and holds what it
promises; without kubectl, the component files are checked as they are."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import attrs
import pytest
import yaml

from kaisched.builtins.catalog import register_builtins
from kaisched.framework import parse_config
from kaisched.framework.config import NodePool
from tests.builders import ROOT

CONFIG = ROOT / "config"
COMPONENTS = CONFIG / "components"


def overlay(tmp_path: Path, components: list[str]) -> list[dict]:
    """`kubectl kustomize` of an overlay of config/ with these components, as a user's
    own overlay would include them."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not on PATH")
    base = os.path.relpath(CONFIG, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [base], "components": [f"{base}/components/{c}" for c in components]}))
    done = subprocess.run([kubectl, "kustomize", str(tmp_path)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def component_objects(name: str) -> list[dict]:
    spec = yaml.safe_load((COMPONENTS / name / "kustomization.yaml").read_text())
    assert spec["kind"] == "Component"
    return [d for entry in spec.get("resources", ())
            for d in yaml.safe_load_all((COMPONENTS / name / entry).read_text()) if d]


def kinds(objects: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for obj in objects:
        out.setdefault(obj["kind"], []).append(obj)
    return out


def deployments() -> dict[str, dict]:
    docs = yaml.safe_load_all((CONFIG / "deployment.yaml").read_text())
    return {d["metadata"]["name"]: d for d in docs if d and d["kind"] == "Deployment"}


def test_monitoring_selects_both_components_metrics_ports() -> None:
    objects = kinds(component_objects("monitoring"))
    ports = {name: next(p for p in d["spec"]["template"]["spec"]["containers"][0]["ports"]
                        if p["name"] == "metrics")
             for name, d in deployments().items()}
    services = {s["spec"]["selector"]["app.kubernetes.io/name"]: s for s in objects["Service"]}
    assert set(services) == set(ports)
    (monitor,) = objects["ServiceMonitor"]
    for name, service in services.items():
        (port,) = service["spec"]["ports"]
        assert port["targetPort"] == "metrics" and port["port"] == ports[name]["containerPort"]
        assert all(service["metadata"]["labels"][k] == v
                   for k, v in monitor["spec"]["selector"]["matchLabels"].items())
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    (dashboard,) = objects["ConfigMap"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"


def test_ha_budgets_each_component() -> None:
    objects = kinds(component_objects("ha"))
    budgets = {b["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"]: b
               for b in objects["PodDisruptionBudget"]}
    for name, deployment in deployments().items():
        assert budgets[name]["spec"]["minAvailable"] < deployment["spec"]["replicas"]


def test_monitoring_renders_on_top_of_config(tmp_path: Path) -> None:
    rendered = kinds(overlay(tmp_path, ["monitoring"]))
    assert {s["metadata"]["name"] for s in rendered["Service"]} == {
        "kaisched-metrics", "kaisched-podgrouper-metrics"}
    assert len(rendered["ServiceMonitor"]) == 1
    assert "kaisched-dashboard" in {c["metadata"]["name"] for c in rendered["ConfigMap"]}


def test_ha_renders_on_top_of_config(tmp_path: Path) -> None:
    rendered = kinds(overlay(tmp_path, ["ha"]))
    assert len(rendered["PodDisruptionBudget"]) == 2
    for deployment in rendered["Deployment"]:
        spec = deployment["spec"]["template"]["spec"]
        assert spec["priorityClassName"] == "system-cluster-critical", deployment["metadata"]
    # Without the component nothing is critical: it is opted into.
    for deployment in deployments().values():
        assert "priorityClassName" not in deployment["spec"]["template"]["spec"]


def test_both_render_together(tmp_path: Path) -> None:
    rendered = kinds(overlay(tmp_path, ["monitoring", "ha"]))
    assert {"ServiceMonitor", "PodDisruptionBudget", "Service"} <= set(rendered)


# -- a second shard: config/components/shard-b -------------------------------------------

def test_shard_b_renders_a_scheduler_per_pool_on_top_of_config(tmp_path: Path) -> None:
    registry = register_builtins()
    rendered = kinds(overlay(tmp_path, ["shard-b"]))
    shards = {d["metadata"]["name"]: d for d in rendered["Deployment"]
              if d["metadata"]["labels"]["app.kubernetes.io/component"] == "scheduler"}
    assert set(shards) == {"kaisched", "kaisched-b"}
    configs = {c["metadata"]["name"]: parse_config(c["data"]["scheduler.yaml"], registry)
               for c in rendered["ConfigMap"] if "scheduler.yaml" in c.get("data", {})}
    pool_of = {}
    for name, deployment in shards.items():
        (volume,) = [v for v in deployment["spec"]["template"]["spec"]["volumes"]
                     if v["name"] == "config"]
        pool_of[name] = configs[volume["configMap"]["name"]].node_pool
    assert pool_of == {"kaisched": NodePool("kaisched.io/pool", "a", default=True),
                       "kaisched-b": NodePool("kaisched.io/pool", "b")}
    # Both schedule with the default configuration otherwise.
    base = parse_config((CONFIG / "scheduler.yaml").read_text(), registry)
    for config in configs.values():
        assert attrs.evolve(config, node_pool=None) == base


def test_shard_b_is_the_scheduler_deployment_under_another_name() -> None:
    objects = kinds(component_objects("shard-b"))
    (shard,) = objects["Deployment"]
    base = deployments()["kaisched"]

    def without_names(deployment: dict) -> dict:
        text = yaml.safe_dump(deployment)
        for name in ("kaisched-config-b", "kaisched-b"):
            text = text.replace(name, name[:-2])
        out = yaml.safe_load(text)
        for meta in (out["metadata"], out["spec"]["template"]["metadata"]):
            meta["labels"].pop("kaisched.io/pool", None)
        return out

    assert without_names(shard) == without_names(base)
