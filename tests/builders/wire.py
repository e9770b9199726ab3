"""For the wire tests: KubeCluster drives the real `kubernetes` client over loopback
HTTP to kmock's KubernetesEmulator (kaisched/bench/emulator.py: an API server's
stamping, the binding and eviction subresources); nothing of the client is
patched. Tests change the emulator through `apiserver.call(fn)`, which runs
fn on its event loop. The fixtures (apiserver, cluster, looking) are in
tests/wire/conftest.py.
"""
from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import yaml
from kubernetes import client as k8s_client

from kaisched.bench.emulator import (  # noqa: F401 - re-exported for the wire tests
    GANG_APIS,
    PATIENCE,
    PG_API,
    PODGROUPS,
    PODS,
    QUEUES,
    RESOURCES,
    ApiServer,
    Emulator,
    install_subresources,
)
from kaisched.cluster.client import WatchEvent
from kaisched.cluster.kube import KubeCluster
from kaisched.runtime.scheduler import Scheduler

Obj = dict[str, Any]
K = TypeVar("K", bound=KubeCluster)


# The client's request timeout in the wire suite: long, so that a loaded machine
# (the emulator shares two cores with the tests and whatever else runs) is slow,
# not unreachable. Tests of timeouts themselves pass their own.
REQUEST_TIMEOUT = 60.0


def api_client(url: str) -> k8s_client.ApiClient:
    cfg = k8s_client.Configuration(host=url)
    cfg.retries = 0             # a refused connection is an answer, not something to retry
    return k8s_client.ApiClient(cfg)


def kube(client: k8s_client.ApiClient, factory: Callable[..., K] = KubeCluster,
         **options: Any) -> K:
    """The wire suite's KubeCluster: long request timeouts; short backoff, so a
    failed watch resumes at once; kinds the emulator does not serve looked for
    again rarely, as in production (every look is a request the emulator keeps)."""
    settings: dict[str, Any] = dict(timeout=REQUEST_TIMEOUT, connect_timeout=REQUEST_TIMEOUT,
                                    watch_timeout=60, backoff=0.05, max_backoff=0.2,
                                    missing_retry=60.0)
    return factory(api_client=client, **{**settings, **options})


def watch_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("watch-")}


@contextlib.contextmanager
def connected(apiserver: Emulator, **options: Any) -> Iterator[KubeCluster]:
    """kube() to the emulator, closed on the way out, its watch threads with it."""
    client = api_client(apiserver.url)
    before = watch_threads()
    cluster = kube(client, **options)
    try:
        yield cluster
    finally:
        cluster.close()
        client.close()
    # Only this client's threads: one that outlived an earlier test is that test's failure.
    eventually(lambda: not watch_threads() - before,
               what=lambda: f"watch threads outlived close(): "
                            f"{sorted(t.name for t in watch_threads() - before)}")


def eventually(check: Callable[[], Any], timeout: float = PATIENCE,
               what: str | Callable[[], str] = "gave up waiting") -> Any:
    """check()'s first truthy answer, asked every 20 ms. The timeout is patience:
    it only keeps a test that would wait forever from hanging the suite."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            raise AssertionError(what() if callable(what) else what)
        time.sleep(0.02)
    return result


def collect(sub: Any, done: Callable[[list[WatchEvent]], bool],
            timeout: float = PATIENCE) -> list[WatchEvent]:
    """Drain sub until done(all events so far) holds; fail after timeout."""
    events: list[WatchEvent] = []

    def more() -> bool:
        events.extend(sub.drain())
        return done(events)
    eventually(more, timeout,
               what=lambda: f"gave up waiting; got {[(e.type, name(e.obj)) for e in events]}")
    return events


def name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name"))


def seen(events: list[WatchEvent], type_: str, obj_name: str,
         check: Callable[[Obj], bool] = lambda _: True) -> bool:
    return any(e.type == type_ and name(e.obj) == obj_name and check(e.obj) for e in events)


# -- builders ----------------------------------------------------------------------

def build_node(name_: str, cpu: str = "4", memory: str = "16Gi") -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name_, "labels": {}},
            "spec": {},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def build_pod(name_: str, namespace: str = "default", cpu: str = "1", group: str | None = None,
              owner: Obj | None = None, scheduler: str = "kaisched") -> Obj:
    meta: Obj = {"name": name_, "namespace": namespace}
    if group:
        meta["annotations"] = {"kaisched.io/pod-group": group}
    if owner:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"schedulerName": scheduler, "containers": [
                {"name": "main", "image": "trainer", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Pending"}}


def build_podgroup(name_: str, min_member: int = 1, namespace: str = "default",
                   queue: str | None = None) -> Obj:
    spec: Obj = {"minMember": min_member}
    if queue:
        spec["queue"] = queue
    return {"apiVersion": PG_API, "kind": "PodGroup",
            "metadata": {"name": name_, "namespace": namespace}, "spec": spec}


def build_queue(name_: str, parent: str | None = None) -> Obj:
    spec: Obj = {"priority": 100}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": PG_API, "kind": "Queue", "metadata": {"name": name_}, "spec": spec}


# -- storage objects ---------------------------------------------------------------------

def storage_class(name: str, provisioner: str) -> Obj:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"}


def build_claim(name: str, cls: str) -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"storageClassName": cls, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}}


def build_volume(name: str, cls: str, node: str, claim: str | None = None) -> Obj:
    spec: Obj = {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": cls, "local": {"path": "/mnt/x"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}
    if claim:
        spec["claimRef"] = {"namespace": "default", "name": claim}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": spec}


def with_volume(pod: Obj, claim: str) -> Obj:
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return pod


# -- cycles, kubeconfigs ----------------------------------------------------------------

def cycles_until(scheduler: Scheduler, done: Callable[[], bool]) -> None:
    """Run cycles until done() holds: the watch may bring a change a moment
    after it was written (the timeout only bounds a hang)."""
    deadline = time.monotonic() + PATIENCE
    while True:
        result = scheduler.run_once()
        assert not result.report.failed, result.report.failed
        if done():
            return
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.05)


def kubeconfig(tmp_path: Path, url: str) -> Path:
    """A kubeconfig naming the emulator, for the command lines (`kaisched run`)."""
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "emulator",
        "clusters": [{"name": "emulator", "cluster": {"server": url}}],
        "users": [{"name": "tester", "user": {"token": "not-checked"}}],
        "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "tester"}}],
    }))
    return path
