"""Wire tests: KubeCluster drives the real `kubernetes` client over loopback
HTTP to kmock's KubernetesEmulator (kaisched/emulator.py: an API server's
stamping, the binding and eviction subresources); nothing of the client is
patched. Tests change the emulator through `apiserver.call(fn)`, which runs
fn on its event loop.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterator

import pytest
from kubernetes import client as k8s_client

from kaisched.bench.emulator import (  # noqa: F401 - re-exported for the wire tests
    GANG_APIS,
    PG_API,
    PODGROUPS,
    PODS,
    QUEUES,
    RESOURCES,
    WAIT,
    ApiServer,
    Emulator,
    install_subresources,
)
from kaisched.cluster.client import WatchEvent
from kaisched.cluster.kube import KubeCluster

Obj = dict[str, Any]


@pytest.fixture
def apiserver() -> Iterator[Emulator]:
    server = Emulator()
    yield server
    server.stop()


def api_client(url: str) -> k8s_client.ApiClient:
    cfg = k8s_client.Configuration(host=url)
    cfg.retries = 0             # a refused connection is an answer, not something to retry
    return k8s_client.ApiClient(cfg)


@pytest.fixture
def cluster(apiserver: Emulator) -> Iterator[KubeCluster]:
    client = api_client(apiserver.url)
    # Short delays so that backoff and re-watches fit the wire suite's time budget.
    cluster = KubeCluster(api_client=client, timeout=5.0, watch_timeout=5, backoff=0.05,
                          max_backoff=0.2, missing_retry=0.5)
    yield cluster
    cluster.close()
    client.close()
    left = [t.name for t in threading.enumerate() if t.name.startswith("watch-")]
    assert not left, f"watch threads outlived close(): {left}"


def collect(sub: Any, done: Callable[[list[WatchEvent]], bool],
            timeout: float = WAIT) -> list[WatchEvent]:
    """Drain sub until done(all events so far) holds; fail after timeout."""
    events: list[WatchEvent] = []
    deadline = time.monotonic() + timeout
    while True:
        events += sub.drain()
        if done(events):
            return events
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting; got {[(e.type, name(e.obj)) for e in events]}")
        time.sleep(0.02)


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
