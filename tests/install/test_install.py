"""Installing kaisched from the repository: `kubectl apply -k config/` holds every
object it needs, the Dockerfile builds the image the Deployments run (the tag the
README says to build), and the README's PyTorchJob example is scheduled as one gang."""
from __future__ import annotations

import configparser
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD, PODGROUP, QUEUE, kind_of
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import default_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from podgrouper.controller import PodGrouper
from tests.builders import ROOT
from tests.builders.install import instructions

CONFIG = ROOT / "config"
GROUP = "scheduling.kaisched.io"
EXPECTED = {
    ("Namespace", "", "kaisched-system"),
    ("CustomResourceDefinition", "", f"podgroups.{GROUP}"),
    ("CustomResourceDefinition", "", f"queues.{GROUP}"),
    ("ServiceAccount", "kaisched-system", "kaisched"),
    ("ServiceAccount", "kaisched-system", "kaisched-podgrouper"),
    ("ClusterRole", "", "kaisched"),
    ("ClusterRole", "", "kaisched-podgrouper"),
    ("ClusterRoleBinding", "", "kaisched"),
    ("ClusterRoleBinding", "", "kaisched-podgrouper"),
    ("Role", "kaisched-system", "kaisched-gpu-reservations"),
    ("Role", "kaisched-system", "kaisched-leader-election"),
    ("RoleBinding", "kaisched-system", "kaisched-gpu-reservations"),
    ("RoleBinding", "kaisched-system", "kaisched-leader-election"),
    ("ConfigMap", "kaisched-system", "kaisched-config"),
    ("Deployment", "kaisched-system", "kaisched"),
    ("Deployment", "kaisched-system", "kaisched-podgrouper"),
    ("Queue", "", "default"),
}


def identity(obj: dict) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def read_kustomization(folder: Path) -> list[dict]:
    """The objects a kustomization holds, as kustomize collects them: files in
    order, folders through their own kustomization (no patches or generators:
    ours use none, which the first assertion checks)."""
    spec = yaml.safe_load((folder / "kustomization.yaml").read_text())
    assert set(spec) <= {"apiVersion", "kind", "resources"}, "a kustomize feature this reader lacks"
    out: list[dict] = []
    for entry in spec["resources"]:
        path = folder / entry
        if path.is_dir():
            out += read_kustomization(path)
        else:
            out += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return out


def kubectl_kustomize() -> list[dict] | None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None
    done = subprocess.run([kubectl, "kustomize", str(CONFIG)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@pytest.fixture(scope="module")
def rendered() -> list[dict]:
    """kubectl's rendering where kubectl is on PATH, else our own reading."""
    return kubectl_kustomize() or read_kustomization(CONFIG)


def test_the_kustomization_installs_every_object(rendered: list[dict]) -> None:
    assert sorted(identity(o) for o in rendered) == sorted(EXPECTED)


def test_our_reading_agrees_with_kubectl() -> None:
    by_kubectl = kubectl_kustomize()
    if by_kubectl is None:
        pytest.skip("kubectl is not on PATH")
    ours = read_kustomization(CONFIG)
    assert sorted(map(identity, by_kubectl)) == sorted(map(identity, ours))


def test_kubectl_applies_them_in_order() -> None:
    """The namespace first; the CRDs before the Queue; accounts, roles and the
    ConfigMap before the Deployments that use them."""
    by_kubectl = kubectl_kustomize()
    if by_kubectl is None:
        pytest.skip("kubectl is not on PATH")
    kinds = [o["kind"] for o in by_kubectl]
    position = {kind: kinds.index(kind) for kind in kinds}
    assert kinds[0] == "Namespace"
    assert position["CustomResourceDefinition"] < position["Queue"]
    for before in ("ServiceAccount", "ClusterRoleBinding", "RoleBinding", "ConfigMap"):
        assert position[before] < position["Deployment"], before


def test_no_manifest_is_left_out_of_the_kustomization() -> None:
    listed = {identity(o) for o in read_kustomization(CONFIG)}
    for path in sorted(CONFIG.rglob("*.yaml")):
        if "examples" in path.parts or "components" in path.parts \
                or path.name in ("scheduler.yaml", "kustomization.yaml"):
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                assert identity(doc) in listed, f"{path.relative_to(ROOT)}: {identity(doc)}"


def test_the_scheduler_may_write_queue_status(rendered: list[dict]) -> None:
    (role,) = [o for o in rendered if identity(o) == ("ClusterRole", "", "kaisched")]
    verbs = {v for rule in role["rules"] if GROUP in rule["apiGroups"]
             and "queues/status" in rule["resources"] for v in rule["verbs"]}
    assert "patch" in verbs             # merge patches of the status subresource


# -- the image ------------------------------------------------------------------------

def dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def version() -> str:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return cfg["metadata"]["version"]


def test_the_image_is_slim_python_non_root_with_kaisched_as_entrypoint() -> None:
    steps = instructions(dockerfile())
    final = [arg for op, arg in steps if op == "FROM"][-1]
    assert re.fullmatch(r"python:3\.1[1-9]-slim", final), final
    (user,) = [arg for op, arg in steps if op == "USER"]
    uid = int(user.split(":")[0])                          # numeric: runAsNonRoot can check it
    assert uid != 0
    assert ("ENTRYPOINT", '["kaisched"]') in steps
    deployments = [o for o in read_kustomization(CONFIG) if o["kind"] == "Deployment"]
    for deployment in deployments:
        assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == uid


def test_the_image_installs_the_package_from_the_checkout() -> None:
    steps = instructions(dockerfile())
    copied = [source for op, arg in steps if op == "COPY" and "--from" not in arg
              for source in arg.split()[:-1]]
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    packages = [p for p in cfg["options.packages.find"]["include"].split() if "." not in p]
    for needed in ["setup.cfg", "pyproject.toml", "README.md", *packages]:
        assert needed in copied, needed
        assert (ROOT / needed).exists(), needed
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert not set(copied) & set(ignored), "the build context leaves out what the image copies"
    assert any(op == "RUN" and "pip wheel" in arg and arg.rstrip().endswith(" .")
               for op, arg in steps)


def test_the_readme_builds_the_tag_the_deployments_run() -> None:
    readme = (ROOT / "README.md").read_text()
    built = set(re.findall(r"docker build -t (\S+) \.", readme))
    images = {c["image"] for o in read_kustomization(CONFIG) if o["kind"] == "Deployment"
              for c in o["spec"]["template"]["spec"]["containers"]}
    assert built == images == {f"kaisched:{version()}"}
    assert f"docker build -t kaisched:{version()} ." in dockerfile()
    for command in ("kubectl apply -k config/", "kubectl get podgroups,queues",
                    "kubectl apply -f config/examples/pytorchjob.yaml"):
        assert command in readme, command


# -- the example the README submits -------------------------------------------------------

def operator_pods(job: dict) -> list[dict]:
    """The pods the Kubeflow training operator makes for a PyTorchJob."""
    meta = job["metadata"]
    owner = {"apiVersion": job["apiVersion"], "kind": job["kind"], "name": meta["name"],
             "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}
    pods = []
    for role, replica in job["spec"]["pytorchReplicaSpecs"].items():
        template = replica["template"]
        for i in range(replica["replicas"]):
            labels = {**(template.get("metadata") or {}).get("labels", {}),
                      "training.kubeflow.org/job-name": meta["name"],
                      "training.kubeflow.org/replica-type": role.lower(),
                      "training.kubeflow.org/replica-index": str(i)}
            pods.append({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": f"{meta['name']}-{role.lower()}-{i}",
                                      "namespace": meta["namespace"], "labels": labels,
                                      "ownerReferences": [owner]},
                         "spec": template["spec"], "status": {"phase": "Pending"}})
    return pods


def gpu_node(name: str, gpus: int) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110",
                                       "nvidia.com/gpu": str(gpus)}}}


def test_the_example_pytorchjob_binds_as_one_gang_in_its_queue() -> None:
    docs = [d for d in yaml.safe_load_all((CONFIG / "examples" / "pytorchjob.yaml").read_text()) if d]
    for doc in docs:
        for container in (c for r in doc.get("spec", {}).get("pytorchReplicaSpecs", {}).values()
                          for c in r["template"]["spec"]["containers"]):
            res = container["resources"]
            assert res["limits"]["nvidia.com/gpu"] == res["requests"]["nvidia.com/gpu"]
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    for obj in sorted(docs, key=lambda d: d["kind"] != "Queue"):
        cluster.create(obj)
    job = next(o for o in docs if o["kind"] == "PyTorchJob")
    created = cluster.get(kind_of(job), job["metadata"]["namespace"], job["metadata"]["name"])
    for node in (gpu_node("gpu-1", 2), gpu_node("gpu-2", 2)):
        cluster.create(node)
    for pod in operator_pods(created):
        cluster.create(pod)
    registry = register_builtins()
    scheduler = Scheduler(cluster, default_config(registry), registry, clock,
                          Binder(cluster, clock.now))
    PodGrouper(cluster, clock).sync()
    result = scheduler.run_once()

    (group,) = cluster.list(PODGROUP)
    assert group["spec"]["minMember"] == 4 and group["spec"]["queue"] == "training"
    assert sorted(result.placed) == sorted(f"default/{p['metadata']['name']}"
                                           for p in cluster.list(POD))
    status = cluster.get(QUEUE, "", "training")["status"]
    assert status["allocated"]["nvidia.com/gpu"] == "4"
    assert (status["runningJobs"], status["pendingJobs"]) == (1, 0)


def test_the_readme_picture_is_in_the_repository_with_its_command() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "(docs/simulate.png)" in readme
    assert "python -m kaisched.cli simulate --plot docs/simulate.png" in readme
    assert (ROOT / "docs" / "simulate.png").stat().st_size > 10_000
    git = shutil.which("git")
    if git is not None and (ROOT / ".git").exists():
        ignored = subprocess.run([git, "check-ignore", "-q", "docs/simulate.png"], cwd=ROOT,
                                 check=False).returncode == 0
        assert not ignored, ".gitignore drops the README's picture"
        assert subprocess.run([git, "check-ignore", "-q", ".venv/"], cwd=ROOT,
                              check=False).returncode == 0
