"""For the tests against a real kube-apiserver (tests/realapi/, whose conftest.py holds the
fixtures and says how to run them): installing kaisched as shipped, processes of this
checkout, gangs, waits and what to print when one fails."""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml
from kubernetes import client as k8s_client

from kaisched.api.clock import to_rfc3339
from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import EVENT, LEASE, POD, PODGROUP, PROVISIONING_REQUEST, Kind, kind_of
from kaisched.cluster.kube import KubeCluster, load_configuration
from kaisched.errors import ConflictError, NotFoundError

ROOT = Path(__file__).resolve().parents[2]


CONFIG = ROOT / "config"


# cluster-autoscaler's ProvisioningRequest CRD, for the tests that play the autoscaler.
PROVISIONING_CRD = ROOT / "kaisched" / "validation" / "crds" / "provisioningrequests.yaml"


ENV = "KAISCHED_TEST_KUBECONFIG"


SYSTEM = "kaisched-system"


CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions",
           namespaced=False)


SERVICE_ACCOUNT = Kind("v1", "ServiceAccount", "serviceaccounts")


PATIENCE = 120.0


# The loopback kube-apiserver these tests were written against is a fork that keeps
# pods in per-Node storage shards: a Node created without this label, while any
# pods watch has ever been open, makes it dial a shard that does not exist and
# crash (a nil storage in a watch goroutine). Upstream servers ignore the label.
NO_SHARD = "no-shard"


def eventually(check: Callable[[], Any], timeout: float = PATIENCE, what: str = "") -> Any:
    """check()'s first truthy value; fails after timeout (patience, not a measure)."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting{': ' + what if what else ''}")
        time.sleep(0.2)
    return result


def owner_of(request: pytest.FixtureRequest) -> str:
    return str(getattr(request.module, "OWNER", "realapi"))


def describe(client: KubeCluster, namespace: str) -> str:
    """What a namespace holds, for a failing assertion: each pod's node, PodGroup and
    PodScheduled condition, each PodGroup's spec and conditions, the Events."""
    lines = []
    for pod in client.list(POD, namespace):
        meta, cond = pod["metadata"], next(
            (c for c in (pod.get("status") or {}).get("conditions") or ()
             if c.get("type") == "PodScheduled"), {})
        lines.append(f"pod {meta['name']} node={pod['spec'].get('nodeName')} "
                     f"group={(meta.get('annotations') or {}).get('kaisched.io/pod-group')} "
                     f"scheduled={cond.get('status')} {cond.get('message', '')}")
    for group in client.list(PODGROUP, namespace):
        lines.append(f"podgroup {group['metadata']['name']} spec={group['spec']} "
                     f"status={group.get('status')}")
    for event in client.list(EVENT, namespace):
        lines.append(f"event {event['involvedObject'].get('name')} {event.get('reason')}: "
                     f"{event.get('message')}")
    return "\n".join(lines)


def render(folder: Path) -> list[Obj]:
    """`kubectl kustomize folder`, or where kubectl is absent our own reading of a
    kustomization made only of resources (files and folders)."""
    kubectl = shutil.which("kubectl")
    if kubectl is not None:
        done = subprocess.run([kubectl, "kustomize", str(folder)], capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        return [d for d in yaml.safe_load_all(done.stdout) if d]
    spec = yaml.safe_load((folder / "kustomization.yaml").read_text())
    assert set(spec) <= {"apiVersion", "kind", "resources"}, "needs kubectl kustomize"
    out: list[Obj] = []
    for entry in spec["resources"]:
        path = folder / entry
        out += render(path) if path.is_dir() else [
            d for d in yaml.safe_load_all(path.read_text()) if d]
    return out


def apply(client: KubeCluster, obj: Obj) -> Obj:
    """Create, or merge the object over what is there (lists replace, as apply does)."""
    kind = kind_of(obj)
    meta = obj["metadata"]
    try:
        return client.create(obj)
    except ConflictError:
        body = {k: v for k, v in obj.items() if k not in ("status", "apiVersion", "kind")}
        return client.patch(kind, meta.get("namespace", ""), meta["name"], body)


def established(client: KubeCluster, name: str) -> bool:
    crd = client.get(CRD, "", name)
    return bool(crd) and any(c.get("type") == "Established" and c.get("status") == "True"
                             for c in (crd.get("status") or {}).get("conditions") or ())


def delete_quietly(client: KubeCluster, kind: Kind, namespace: str, name: str) -> None:
    try:
        client.delete(kind, namespace, name)
    except NotFoundError:
        pass


def admin_kubeconfig_from(env: str, missing: str) -> str:
    """The admin kubeconfig the variable env names; the test is skipped (missing: why)
    when it names none."""
    path = os.environ.get(env)
    if not path:
        pytest.skip(f"{env} names no {missing}")
    return path


def admin_cluster(kubeconfig: str) -> Iterator[KubeCluster]:
    """A KubeCluster with the admin credentials, closed at the end (a fixture's body)."""
    client = KubeCluster(kubeconfig, timeout=60.0, connect_timeout=60.0)
    yield client
    client.close()


def admin_api_client(kubeconfig: str) -> Iterator[k8s_client.ApiClient]:
    """The kubernetes client's ApiClient with the admin credentials, for what KubeCluster
    does not do (TokenRequests, deletes with a grace period); closed at the end."""
    api = k8s_client.ApiClient(load_configuration(kubeconfig))
    yield api
    api.close()


def install(client: KubeCluster, objects: list[Obj]) -> None:
    """config/ as rendered, applied as `kubectl apply -k` would: the namespace and the
    CRDs first, the rest once the CRDs are established."""
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    for obj in [o for o in objects if o["kind"] == "Namespace"] + crds:
        apply(client, obj)
    for crd in crds:
        eventually(lambda: established(client, crd["metadata"]["name"]),
                   what=f"CRD {crd['metadata']['name']} established")
    for obj in objects:
        if obj["kind"] not in ("Namespace", "CustomResourceDefinition"):
            apply(client, obj)


def uninstall(client: KubeCluster, objects: list[Obj]) -> None:
    """What install applied, but the namespace (on a server without a controller-manager a
    deleted namespace stays Terminating, and the next install could not create into it),
    and the Leases the components took."""
    for obj in reversed(objects):
        kind, meta = kind_of(obj), obj["metadata"]
        if obj["kind"] != "Namespace":
            delete_quietly(client, kind, meta.get("namespace", ""), meta["name"])
    for lease in client.list(LEASE, SYSTEM):
        delete_quietly(client, LEASE, SYSTEM, lease["metadata"]["name"])


def gone(client: KubeCluster, kind: Kind, namespace: str, name: str) -> bool:
    return client.get(kind, namespace, name) is None


def mint_token(api: k8s_client.ApiClient, namespace: str, account: str) -> str:
    """A token of the ServiceAccount through the TokenRequest API."""
    body = k8s_client.AuthenticationV1TokenRequest(
        spec=k8s_client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600))
    made = k8s_client.CoreV1Api(api).create_namespaced_service_account_token(
        account, namespace, body)
    return str(made.status.token)


def account_kubeconfig(admin_kubeconfig: str, token: str, path: Path) -> Path:
    """A kubeconfig of the admin's server and CA, authenticating with token only."""
    admin_cfg = yaml.safe_load(Path(admin_kubeconfig).read_text())
    context = next(c for c in admin_cfg["contexts"]
                   if c["name"] == admin_cfg.get("current-context")) \
        if admin_cfg.get("current-context") else admin_cfg["contexts"][0]
    cluster = next(c for c in admin_cfg["clusters"] if c["name"] == context["context"]["cluster"])
    cluster = {"name": "cluster", "cluster": dict(cluster["cluster"])}
    ca = cluster["cluster"].get("certificate-authority")
    if ca and not os.path.isabs(ca):
        cluster["cluster"]["certificate-authority"] = str(Path(admin_kubeconfig).parent / ca)
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [cluster], "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "cluster", "user": "sa"}}]}))
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Process:
    """One command of this checkout run as a cluster would run it (a subprocess)."""

    def __init__(self, name: str, module: str, args: list[str], log_path: Path,
                 port: int | None) -> None:
        self.name = name
        self.module = module
        self.args = args
        self.log_path = log_path
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("POD_NAMESPACE", None)
        env.pop("POD_NAME", None)
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"from {self.module} import main; main()", *self.args],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))
        log.close()

    def url(self, path: str) -> str:
        assert self.port, f"{self.name} serves no HTTP port"
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path: str) -> tuple[int, str]:
        """(status, body) of a GET on its HTTP port; (0, reason) when nothing answers."""
        try:
            with urllib.request.urlopen(self.url(path), timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError as exc:
            return 0, str(exc)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> tuple[int | None, float]:
        """SIGTERM; (exit code, seconds until it exited). Killed after timeout."""
        if self.proc is None:
            return None, 0.0
        started = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        took = time.monotonic() - started
        code = self.proc.returncode
        self.proc = None
        return code, took


class Components:
    def __init__(self, scheduler: Process, podgrouper: Process) -> None:
        self.scheduler = scheduler
        self.podgrouper = podgrouper

    def start(self) -> None:
        self.scheduler.start()
        self.podgrouper.start()

    def stop(self) -> None:
        self.scheduler.stop()
        self.podgrouper.stop()

    def logs(self) -> str:
        return (f"--- scheduler ---\n{self.scheduler.log()}\n"
                f"--- podgrouper ---\n{self.podgrouper.log()}")


def shipped_config(folder: Path, scheduler_name: str, **settings: Any) -> Path:
    """The shipped config/scheduler.yaml under a schedulerName of its own (so
    other schedulers of a shared server leave the test's pods alone, and it
    theirs), with settings over it, written into folder."""
    config = yaml.safe_load((CONFIG / "scheduler.yaml").read_text())
    config.update(settings, schedulerName=scheduler_name)
    path = folder / f"{scheduler_name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def as_account(admin_kubeconfig: str, admin_api: k8s_client.ApiClient, folder: Path,
               account: str = "kaisched") -> Path:
    """A kubeconfig with a token minted for the shipped ServiceAccount: the
    shipped RBAC is what a process run with it may do."""
    return account_kubeconfig(admin_kubeconfig, mint_token(admin_api, SYSTEM, account),
                              folder / f"{account}.kubeconfig")


def scheduler_process(kubeconfig: Path, config: Path, folder: Path, identity: str,
                      *args: str, name: str = "scheduler") -> Process:
    """`kaisched run` of this checkout with the kubeconfig and config, its
    metrics on a free port, its log in folder (not started); args: more flags
    (`--no-leader-elect`, `--lease-name ...`)."""
    port = free_port()
    return Process(name, "kaisched.cli", [
        "run", "--kubeconfig", str(kubeconfig), "--config", str(config),
        "--metrics-port", str(port), "--identity", identity, *args],
        folder / f"{name}.log", port)


def make_gang(admin: KubeCluster, namespace: str, scheduler: str, name: str, size: int,
              **requests: str) -> list[str]:
    """A PodGroup of minMember size and its size pods (one cpu each, unless
    requests say otherwise) for the scheduler; the pods' names."""
    admin.create({"apiVersion": PODGROUP.api_version, "kind": "PodGroup",
                  "metadata": {"name": name, "namespace": namespace},
                  "spec": {"minMember": size}})
    pods = [f"{name}-{i}" for i in range(size)]
    for pod in pods:
        admin.create({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": pod, "namespace": namespace,
                                   "annotations": {"kaisched.io/pod-group": name}},
                      "spec": {"schedulerName": scheduler, "containers": [{
                          "name": "main", "image": "trainer:1",
                          "resources": {"requests": requests or {"cpu": "1"}}}]}})
    return pods


def all_bound(admin: KubeCluster, namespace: str, pods: list[str]) -> bool:
    return all(((admin.get(POD, namespace, p) or {}).get("spec") or {}).get("nodeName")
               for p in pods)


def scheduler_identity(request: pytest.FixtureRequest) -> str:
    return f"rt-{owner_of(request)}-scheduler"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")


def owned(obj: Obj, owner: Obj | None) -> Obj:
    """obj with a controller ownerReference to owner (as the owner's controller sets it)."""
    if owner is None:
        return obj
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"],
           "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
           "controller": True, "blockOwnerDeletion": True}
    return {**obj, "metadata": {**obj["metadata"], "ownerReferences": [ref]}}


def served_provisioning_crd(client: KubeCluster) -> Iterator[None]:
    """cluster-autoscaler's ProvisioningRequest CRD (PROVISIONING_CRD) applied and
    established; deleted at the end (a fixture's body)."""
    crd = yaml.safe_load(PROVISIONING_CRD.read_text())
    name = crd["metadata"]["name"]
    apply(client, crd)
    eventually(lambda: established(client, name), what=f"CRD {name} established")
    yield
    delete_quietly(client, CRD, "", name)


def provisioning_requests(client: KubeCluster, namespace: str) -> list[Obj]:
    return client.list(PROVISIONING_REQUEST, namespace)


def answer(client: KubeCluster, namespace: str, request: Obj, kind: str, message: str) -> None:
    """The autoscaler's answer: condition kind True on the request's status subresource,
    after the conditions of other types it holds (cluster-autoscaler keeps Accepted when it
    adds Provisioned)."""
    name = request["metadata"]["name"]
    held = ((client.get(PROVISIONING_REQUEST, namespace, name) or request).get("status")
            or {}).get("conditions") or []
    client.patch_status(PROVISIONING_REQUEST, namespace, name, {"conditions": [
        *(c for c in held if c.get("type") != kind),
        {"type": kind, "status": "True", "reason": kind, "message": message,
         "lastTransitionTime": to_rfc3339(time.time())}]})


def autoscaling_scheduler(kubeconfig: str, api: k8s_client.ApiClient, folder: Path,
                          scheduler_name: str, account: str,
                          autoscaling: dict[str, Any]) -> Iterator[Process]:
    """`kaisched run` as shipped, under its own schedulerName, with `autoscaling`
    configured and no leader election, as its ServiceAccount (a fixture's body: its log
    is printed at the end, shown when a test failed)."""
    config = shipped_config(folder, scheduler_name, autoscaling=autoscaling)
    process = scheduler_process(as_account(kubeconfig, api, folder), config, folder, account,
                                "--no-leader-elect")
    process.start()
    yield process
    process.stop()
    print(f"--- scheduler ---\n{process.log()[-6000:]}")
