"""`kaisched bench binds`: binds a second over HTTP, against kmock's emulator.

The issue's cluster -- 500 nodes and 5,000 pods in PodGroups of 8, all queued
before the scheduler starts -- is preloaded into an emulator in a process of
its own; then a fresh scheduler (the same parts as `kaisched run`: a live
binder, its rate limit and write throttle, the real `kubernetes` client)
runs cycles until every pod is bound. Measured per binder count: start to
first bind, start to last bind, and binds a second between the two. The
emulator is Python too, and shares the machine's cores with the scheduler:
the figures compare binder counts, they do not stand for a real API server.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Iterator

import orjson

from kaisched.api.clock import WallClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kube import KubeCluster
from kaisched.errors import InputError
from kaisched.framework import default_config
from kaisched.framework.effects import Bind, Effect
from kaisched.runtime.binder import Binder
from kaisched.runtime.defaults import BURST, QPS
from kaisched.runtime.scheduler import Scheduler
from kaisched.runtime.throttle import WriteThrottle

BINDERS = (1, 8, 32, 64, 128)
GANG = 8
Obj = dict[str, Any]


def cluster_objects(scale: float) -> list[Obj]:
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i:04d}"},
              "spec": {},
              "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                         "conditions": [{"type": "Ready", "status": "True"}]}}
             for i in range(max(1, int(500 * scale)))]
    objs: list[Obj] = []
    for g in range(max(1, int(5000 * scale) // GANG)):
        name = f"gang-{g:04d}"
        objs.append({"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup",
                     "metadata": {"name": name, "namespace": "default"},
                     "spec": {"minMember": GANG}})
        for i in range(GANG):
            objs.append({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": f"{name}-{i}", "namespace": "default",
                                      "annotations": {"kaisched.io/pod-group": name}},
                         "spec": {"schedulerName": "kaisched", "containers": [
                             {"name": "main", "image": "trainer",
                              "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
                         "status": {"phase": "Pending"}})
    return nodes + objs


class _Clock:
    """Counts binds as the binder reports them (a BindObserver)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.bound = 0
        self.first = self.last = 0.0
        self.done = threading.Event()
        self._lock = threading.Lock()

    def applied(self, effect: Effect, seconds: float = 0.0) -> None:
        if not isinstance(effect, Bind):
            return
        with self._lock:
            now = time.perf_counter()
            self.bound += 1
            self.first = self.first or now
            self.last = now
            if self.bound >= self.total:
                self.done.set()

    def failed(self, effect: Effect, error: str) -> None:
        return None         # counted by what never binds: the run reports it


def needs_emulator() -> None:
    """The emulator is a test extra; the runtime never imports it."""
    if importlib.util.find_spec("kmock") is None:
        raise InputError("this bench runs against kmock's API emulator, which is not "
                         "installed: pip install 'kaisched[test]'")


@contextlib.contextmanager
def emulator_process(seed: str) -> Iterator[str]:
    """kmock's emulator in a process of its own, holding the objects of the
    JSON file seed from the start; its URL, until the block ends."""
    emulator = subprocess.Popen([sys.executable, "-m", "kaisched.bench.emulator", seed],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        url = (emulator.stdout.readline() if emulator.stdout else "").strip()
        if not url:
            raise RuntimeError("the emulator did not start (is kmock installed? "
                               "pip install 'kaisched[test]')")
        yield url
    finally:
        if emulator.stdin:
            emulator.stdin.close()
        try:
            emulator.wait(30)
        except subprocess.TimeoutExpired:
            emulator.kill()


def _one(seed: str, binders: int, pods: int, timeout: float) -> dict[str, Any]:
    with emulator_process(seed) as url:
        client = KubeCluster.at(url, workers=binders)
        clock = WallClock()
        seen = _Clock(pods)
        binder = Binder(client, clock.now, workers=binders, qps=QPS, burst=BURST,
                        throttle=WriteThrottle(), observer=seen)
        registry = register_builtins()
        scheduler = Scheduler(client, default_config(registry), registry, clock, binder)
        started = time.perf_counter()
        deadline = started + timeout
        cycles = 0
        while not seen.done.is_set() and time.perf_counter() < deadline:
            scheduler.run_once()
            cycles += 1
        binder.stop(1.0)
        client.close()
        span = seen.last - seen.first
        return {"binders": binders, "bound": seen.bound, "cycles": cycles,
                "first_bind_seconds": round(seen.first - started, 2) if seen.first else None,
                "last_bind_seconds": round(seen.last - started, 2) if seen.last else None,
                "binds_per_second": round((seen.bound - 1) / span, 1) if span > 0 else 0.0}


def run_binds(scale: float = 1.0, binders: tuple[int, ...] = BINDERS,
              timeout: float = 300.0) -> dict[str, Any]:
    needs_emulator()
    objects = cluster_objects(scale)
    pods = sum(1 for o in objects if o["kind"] == "Pod")
    with tempfile.NamedTemporaryFile("wb", suffix=".json", delete=False) as f:
        f.write(orjson.dumps(objects))
    try:
        runs = [_one(f.name, b, pods, timeout) for b in binders]
    finally:
        os.unlink(f.name)
    return {"scenario": "binds", "nodes": sum(1 for o in objects if o["kind"] == "Node"),
            "pods": pods, "gang": GANG, "qps": QPS, "burst": BURST, "runs": runs}
