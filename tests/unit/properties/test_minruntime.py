"""Min-runtime holds over random clusters where preemption and reclaim are
common (the generator of test_invariants_full): with the minruntime plugin
configured, no session ever evicts a pod of a job that is within its
min-runtime, beyond that job's pods above its minimum (KAI's elastic rule; a pod the same
session binds counts toward it).

The oracle is worked out here, apart from the plugin: a job's start is the
minMember-th earliest startTime of its pods on nodes (a bound pod not started
yet starts now); its min-runtime is its leaf queue's own field, else the
plugin's default (reclaimResolveMethod queue; the generated queues set their
fields on leaves only). Running jobs are drawn young (started 2 minutes ago)
or old (an hour ago); pods the scheduler binds start young.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from kaisched.api.clock import ManualClock, from_rfc3339, to_rfc3339
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD
from kaisched.framework import parse_config
from kaisched.framework.effects import Bind, Cause, Evict
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from kaisched.tools.replay import load_cluster
from tests.builders.strategies import Contended, contended

SESSIONS = 3
MINUTE = 60.0
CONFIG = """
tiers:
  - plugins: [{name: priority}, {name: gang}, {name: podgroupstatus}]
  - plugins:
    - {name: proportion}
    - {name: predicates}
    - {name: nodeorder}
    - name: minruntime
      arguments: {defaultPreemptMinRuntime: %s, defaultReclaimMinRuntime: %s, reclaimResolveMethod: queue}
"""


@st.composite
def protected(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """A contended cluster with start times, queue min-runtimes and plugin defaults."""
    scenario: Contended = draw(contended())
    now = ManualClock().now()
    objects = scenario.objects()
    young = {j.name: draw(st.booleans()) for j in scenario.jobs}
    for obj in objects:
        if obj["kind"] == "Pod" and obj["spec"].get("nodeName"):
            job = obj["metadata"]["annotations"]["kaisched.io/pod-group"]
            obj["status"]["startTime"] = to_rfc3339(now - (2 if young[job] else 60) * MINUTE)
        if obj["kind"] == "Queue" and obj["metadata"]["name"] != "top":
            for field in ("preemptMinRuntime", "reclaimMinRuntime"):
                setting = draw(st.sampled_from([None, "0s", "10m"]))
                if setting is not None:
                    obj["spec"][field] = setting
    defaults = {Cause.PREEMPT.value: draw(st.sampled_from([0.0, 10 * MINUTE])),
                Cause.RECLAIM.value: draw(st.sampled_from([0.0, 10 * MINUTE]))}
    return objects, defaults


def _minimum(objects: list[dict[str, Any]], queue: str, kind: Cause, defaults: dict[str, float]) -> float:
    field = "preemptMinRuntime" if kind is Cause.PREEMPT else "reclaimMinRuntime"
    spec = next((o["spec"] for o in objects if o["kind"] == "Queue"
                 and o["metadata"]["name"] == queue), {})
    if field in spec:
        return {"0s": 0.0, "10m": 10 * MINUTE}[spec[field]]
    return defaults[kind.value]


@settings(max_examples=150, deadline=None)
@given(protected())
def test_protected_jobs_are_never_taken_below_their_minimum(
        case: tuple[list[dict[str, Any]], dict[str, float]]) -> None:
    objects, defaults = case
    registry = register_builtins()
    config = parse_config(CONFIG % (f"{defaults['preempt']:g}s", f"{defaults['reclaim']:g}s"),
                          registry)
    clock = ManualClock()
    cluster = load_cluster(objects, clock)
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    minimum = {f"default/{o['metadata']['name']}": o["spec"]["minMember"]
               for o in objects if o["kind"] == "PodGroup"}
    queue_of = {f"default/{o['metadata']['name']}": o["spec"]["queue"]
                for o in objects if o["kind"] == "PodGroup"}
    held_back = 0
    for number in range(SESSIONS):
        if number:
            for pod in cluster.list(POD):
                meta, spec = pod["metadata"], pod.get("spec") or {}
                if meta.get("deletionTimestamp"):
                    cluster.delete(POD, meta["namespace"], meta["name"])
                elif spec.get("nodeName") and (pod.get("status") or {}).get("phase") == "Pending":
                    cluster.replace({**pod, "status": {**pod["status"], "phase": "Running",
                                                       "startTime": to_rfc3339(clock.now())}})
            clock.advance(config.schedule_period)
        now = clock.now()
        # Each job's pods on nodes, and its start, as the session will see them.
        starts: dict[str, list[float]] = defaultdict(list)
        for pod in cluster.list(POD):
            meta, status = pod["metadata"], pod.get("status") or {}
            if pod["spec"].get("nodeName") and not meta.get("deletionTimestamp"):
                job = f"default/{meta['annotations']['kaisched.io/pod-group']}"
                starts[job].append(from_rfc3339(status.get("startTime")) or now)
        result = scheduler.run_once()
        evicted: dict[tuple[str, Cause], int] = defaultdict(int)
        # A pod the same session binds keeps its job running too: a job may
        # lose its older pods above the minimum that counts them.
        bound: dict[str, int] = defaultdict(int)
        for effect in result.effects:
            if isinstance(effect, Evict) and effect.by is not None:
                evicted[(effect.job, effect.cause)] += 1
            elif isinstance(effect, Bind):
                bound[effect.job] += 1
        for (job, kind), count in evicted.items():
            running = sorted(starts[job])
            started = running[min(minimum[job], len(running)) - 1]
            if started + _minimum(objects, queue_of[job], kind, defaults) > now:
                held_back += 1
                assert count <= len(running) + bound[job] - minimum[job], (
                    f"{job} within its min-runtime lost {count} of {len(running)} pods "
                    f"(+{bound[job]} bound this session; minMember {minimum[job]}) to {kind.value}")
    event(f"protected jobs that lost surplus pods: {bool(held_back)}")
