"""`kaisched bench list-10k`: the list a cold start begins with, over HTTP.

scale-10k's cluster (10,000 nodes, 300,000 pods, their PodGroups and Queues)
is held by kmock's emulator in a process of its own; the scheduler's client
(the real `kubernetes` client's connection pool, the raw JSON path) lists
each kind page by page (500 objects a page, a `continue` token between), as
`kaisched run` does before its first decision. Measured per kind: seconds,
pages, objects a second; and the whole list, with the conversion of what it
brought into the cache timed apart. The emulator is Python too and shares
the machine's cores: it stands for an API server's watch cache only roughly,
so the figures say what the client side costs and bound the rest.
"""
from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import orjson

from kaisched.bench import scale10k as bench_scale
from kaisched.bench.binds import emulator_process, needs_emulator
from kaisched.cache import Cache
from kaisched.cluster import collector
from kaisched.cluster.client import WatchEvent
from kaisched.cluster.kinds import NODE, POD, PODGROUP, QUEUE, Kind
from kaisched.cluster.kube import PAGE_SIZE, KubeCluster

KINDS: tuple[Kind, ...] = (NODE, QUEUE, PODGROUP, POD)
Obj = dict[str, Any]


def run_wire_list(scale: float = 1.0) -> dict[str, Any]:
    needs_emulator()
    nodes, others = bench_scale.scale_10k(scale)
    objects = nodes + others
    del nodes, others
    with tempfile.NamedTemporaryFile("wb", suffix=".json", delete=False) as f:
        f.write(orjson.dumps(objects))
    counts = {kind.kind: sum(1 for o in objects if o["kind"] == kind.kind) for kind in KINDS}
    del objects
    try:
        with emulator_process(f.name) as url:
            listed, per_kind, list_seconds = _list(KubeCluster.at(url))
    finally:
        os.unlink(f.name)
    cache = Cache()
    began = time.perf_counter()
    with collector.paused():            # as the scheduler's sync applies a list
        for kind in KINDS:
            for obj in listed.pop(kind.kind):
                cache.apply(WatchEvent("ADDED", kind, obj))
    convert_seconds = time.perf_counter() - began
    pods = per_kind["Pod"]["objects"]
    assert pods == counts["Pod"], (pods, counts)
    pod_seconds, pod_cpu = per_kind["Pod"]["seconds"], per_kind["Pod"]["client_cpu_seconds"]
    return {
        "scenario": "list-10k", "nodes": per_kind["Node"]["objects"], "pods": pods,
        "page_size": PAGE_SIZE, "kinds": per_kind,
        "list_seconds": round(list_seconds, 3),
        "convert_seconds": round(convert_seconds, 3),
        # At these rates, the list of scale-50k's 1,500,000 pods: as served here, and the
        # client's own part of it (what a faster server leaves).
        "pods_1_5m_list_seconds": round(pod_seconds * 1_500_000 / pods, 1) if pods else None,
        "pods_1_5m_client_cpu_seconds": round(pod_cpu * 1_500_000 / pods, 1) if pods else None,
    }


def _list(client: KubeCluster) -> tuple[dict[str, list[Obj]], dict[str, dict[str, Any]], float]:
    """Each kind listed, and how it went; the seconds of them all."""
    listed: dict[str, list[Obj]] = {}
    per_kind: dict[str, dict[str, Any]] = {}
    started = time.perf_counter()
    try:
        for kind in KINDS:
            began, cpu = time.perf_counter(), time.process_time()
            items, _ = client.list_with_version(kind)
            seconds = time.perf_counter() - began
            listed[kind.kind] = items
            per_kind[kind.kind] = {
                "objects": len(items), "pages": -(-len(items) // PAGE_SIZE) or 1,   # as asked
                "seconds": round(seconds, 3),
                # The client's own share: the HTTP exchange and parsing the pages.
                "client_cpu_seconds": round(time.process_time() - cpu, 3),
                "per_second": round(len(items) / seconds, 1) if seconds else 0.0}
    finally:
        client.close()
    return listed, per_kind, time.perf_counter() - started
