"""`kaisched bench cold-50k`: a scheduler starts cold over a full 50,000-node cluster.

Every replica starting at once (an upgrade, a lost node) finds no standby to
take over: the first one to lead lists everything and decides. The cluster is
scale-50k's (scale-10k's mix five times over: 50,000 nodes, 1,500,000 pods),
already in the memory backend when the clock starts. The clock starts when
the scheduler is made and stops at its first committed decision: the first
bind its binder lands, handed over as the session commits it (the binder
runs as `kaisched run`'s does). The scheduler takes the head start a first
leader takes over a cluster this big (kaisched.runtime.headstart): where the
time went is its snapshot (every object listed, the running gangs counted,
the rest converted) and its session up to that first decision; then the
first cycle: the sync converting what was counted, its snapshot and session.

The imports a `kaisched run` process does before its first list are timed
apart (`import_seconds`), in a fresh interpreter reading them compiled, as
an installed one does (kaisched.bench.installed): this process has them
already.
"""
from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kaisched.bench import scale10k as bench_scale
from kaisched.bench.failover import BINDERS, FirstBind, first_cycle, where_it_went
from kaisched.bench.installed import RUN_MODULES, installed_env
from kaisched.builtins.catalog import register_builtins
from kaisched.framework import default_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.defaults import HEAD_START_PODS
from kaisched.runtime.scheduler import Scheduler

SIZE = 5                # scale-10k times five: 50,000 nodes
_IMPORTS = (f"import time; t = time.perf_counter(); import {', '.join(RUN_MODULES)}; "
            "print(time.perf_counter() - t)")


def import_seconds() -> float:
    """The imports of `kaisched run` in a fresh interpreter, in seconds."""
    with tempfile.TemporaryDirectory(prefix="kaisched-pycache-") as cache:
        out = subprocess.run([sys.executable, "-c", _IMPORTS], capture_output=True, text=True,
                             check=True, env=installed_env(Path(cache)))
    return float(out.stdout.strip())


def run_cold_start(scale: float = 1.0, profile: int = 0,
                   head_start_pods: int = HEAD_START_PODS) -> dict[str, Any]:
    clock, cluster, node_count, pods = bench_scale.filled(SIZE * scale)
    registry = register_builtins()
    config = default_config(registry)
    observer = FirstBind()
    figures: dict[str, Any] = {}
    started = time.perf_counter()       # the scheduler starts against a full API server
    scheduler = Scheduler(cluster, config, registry, clock,
                          Binder(cluster, clock.now, workers=BINDERS, observer=observer))
    scheduler.head_start_pods = head_start_pods
    synced, result, ended = first_cycle(scheduler, profile, figures, head_start=True)
    decided = observer.decided
    figures.update({
        "scenario": "cold-50k", "nodes": node_count, "pods": pods,
        "first_decision_seconds": round(decided - started, 3) if decided is not None else None,
        **where_it_went(started, synced, ended, result, decided),
        "import_seconds": round(import_seconds(), 3),
        "peak_memory_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    })
    if "head_start_binds" in figures:
        # The first decision was the head start's: the sync is the one after it.
        head_start = figures["head_start_snapshot_seconds"] + figures["head_start_session_seconds"]
        figures["sync_seconds"] = round(synced - started - head_start, 3)
        figures["first_decision_in_session_seconds"] = round(
            decided - started - figures["head_start_snapshot_seconds"], 3) \
            if decided is not None else None
    if "profile" in figures:
        figures["profile"] = figures.pop("profile")
    return figures
