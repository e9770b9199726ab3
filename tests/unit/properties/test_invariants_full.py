"""The scheduler's invariants with every action (reclaim, preempt and stale
gang eviction too; and again with the enqueue gate and a starvation guard that
acts at once), over three sessions on the memory backend: evicted pods leave,
bound pods start. After EVERY session, for EVERY gang and node:
- no node is over-committed (pods being deleted still hold their room);
- no gang the scheduler touched (bound or evicted any pod of) is left partly
  placed: it has none of its pods or at least its minimum;
- no queue exceeds its limit by what the scheduler placed;
- a job refused for a reason no eviction can fix (minResources larger than
  the cluster, gated pods, an incomplete gang group, a node selector no node
  meets, preemptionPolicy Never) never evicts anyone and holds nothing;
- a gated pod is never bound (nor a bind of one attempted), also in a gang
  whose ungated pods meet its minimum and start;
and the same input gives the same decisions.

The generators fill nodes with running jobs of two queues and bring pending
jobs of both, at several priorities, so that preemption and reclaim are
common (see `contended`). Some running pods are already being deleted when
the first session opens, and evicted pods may take a session more to go
(evictions in flight): room is often releasing, so gangs are pipelined onto
it, some of their pods placed on idle room and the rest waiting -- the state
in which a gang must not be bound in part.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import attrs
from hypothesis import event, given, settings

from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD, PODGROUP
from kaisched.framework import SchedulerConfig, default_config
from kaisched.framework.effects import Evict
from tests.builders.strategies import GPU, Contended, Scenario, contended, scenarios, sessions


def gated_config() -> SchedulerConfig:
    """enqueue before allocate, and every waiting gang starving at once."""
    config = default_config(register_builtins())
    return attrs.evolve(config, actions=("enqueue", *config.actions), starvation_threshold=1e-6)


# -- a cluster where room is contended -------------------------------------------------


# -- sessions and checks -----------------------------------------------------------------


def _cpu(value: Any) -> float:
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def _requests(pod: dict[str, Any]) -> dict[str, float]:
    req = pod["spec"]["containers"][0].get("resources", {}).get("requests", {})
    return {"cpu": _cpu(req.get("cpu", "0")), GPU: float(req.get(GPU, 0))}


def check(objects: list[dict[str, Any]], config: SchedulerConfig | None,
          doomed: set[str] = frozenset(), gated: set[str] = frozenset(),
          never: set[str] = frozenset(), linger: int = 0) -> list[tuple]:
    """Run the sessions, checking every invariant after each; the decisions.
    doomed: jobs refused for a reason no eviction fixes (never placed, never
    evicting); never: jobs that may be placed but never evict."""
    nodes = {o["metadata"]["name"]: o["status"]["allocatable"] for o in objects if o["kind"] == "Node"}
    minimum = {f"default/{o['metadata']['name']}": o["spec"]["minMember"]
               for o in objects if o["kind"] == "PodGroup"}
    limits = {o["metadata"]["name"]: o["spec"].get("resources") or {}
              for o in objects if o["kind"] == "Queue"}
    parents = {o["metadata"]["name"]: o["spec"].get("parentQueue")
               for o in objects if o["kind"] == "Queue"}

    def chain(queue: str) -> list[str]:
        out = [queue]
        while parents.get(out[-1]):
            out.append(parents[out[-1]])
        return out

    before: dict[tuple[str, str], float] = defaultdict(float)  # what ran before, per queue
    for o in objects:
        if o["kind"] == "Pod" and o["spec"].get("nodeName"):
            for q in chain(o["metadata"]["labels"].get("kaisched.io/queue", "default")):
                for res, amount in _requests(o).items():
                    before[(q, res)] += amount
    touched: set[str] = set()
    decisions = []
    evicted: list[str] = []
    causes: set[str] = set()
    pipelined = False
    for result, cluster in sessions(objects, config, linger):
        pipelined = pipelined or bool(result.reservations)
        pods = cluster.list(POD)
        job_of = {f"default/{p['metadata']['name']}":
                  f"default/{p['metadata']['annotations']['kaisched.io/pod-group']}" for p in pods}
        evicts = [e for e in result.effects if isinstance(e, Evict)]
        evicted += [e.pod for e in evicts]
        causes |= {e.cause.value for e in evicts}
        touched |= {job_of.get(p, p) for p in result.placed} | {e.job for e in evicts}
        decisions.append((dict(result.placed), sorted(e.pod for e in evicts),
                          dict(result.reservations)))
        # nothing for the refused, and never a gated pod
        for e in evicts:
            assert e.by is None or e.by.job not in doomed | never, ("refused job evicted", e)
        for key in [*result.placed, *result.reservations]:
            assert job_of.get(key) not in doomed, ("refused job placed", key)
            assert key not in gated, ("gated pod placed", key)
        assert not [f for f in result.report.failed if getattr(f.effect, "pod", None) in gated]
        for job in doomed:      # nor room held for it, and its own reason kept
            status = cluster.get(PODGROUP, *job.split("/", 1)).get("status") or {}
            said = " ".join(c.get("message", "") for c in status.get("conditions") or ())
            assert "reserving" not in said and "pipelined" not in said, (job, said)
        # nodes
        load: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for p in pods:
            node = p["spec"].get("nodeName")
            if node:
                for res, amount in _requests(p).items():
                    load[node][res] += amount
        for node, used in load.items():
            assert used["cpu"] <= _cpu(nodes[node]["cpu"]) + 1e-6, (node, dict(used))
            assert used[GPU] <= float(nodes[node].get(GPU, 0)) + 1e-6, (node, dict(used))
        # every gang the scheduler touched: none of it, or its minimum
        alive: dict[str, int] = defaultdict(int)
        for p in pods:
            if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp"):
                alive[job_of[f"default/{p['metadata']['name']}"]] += 1
        for job in touched:
            got = alive.get(job, 0)
            assert got == 0 or got >= minimum.get(job, 1), (job, got, minimum.get(job), evicted)
        # queue limits: only what ran before may exceed them
        usage: dict[tuple[str, str], float] = defaultdict(float)
        for p in pods:
            if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp"):
                for q in chain(p["metadata"]["labels"].get("kaisched.io/queue", "default")):
                    for res, amount in _requests(p).items():
                        usage[(q, res)] += amount
        for queue, spec in limits.items():
            for res, values in spec.items():
                if values.get("limit") is not None:
                    limit = _cpu(values["limit"]) if res == "cpu" else float(values["limit"])
                    assert usage[(queue, res)] <= max(limit, before[(queue, res)]) + 1e-6, \
                        (queue, res, usage[(queue, res)], limit)
    event(f"evicted: {bool(evicted)}")
    event(f"pipelined: {pipelined}")
    event(f"releasing at the start: {any(o['metadata'].get('deletionTimestamp') for o in objects)}")
    for cause in sorted(causes):
        event(f"evicted by {cause}")
    return decisions


def _doomed(scenario: Contended) -> tuple[set[str], set[str]]:
    doomed = {f"default/{j.name}" for j in scenario.jobs if j.doom and j.doom != "never"}
    return doomed, {f"default/{j.name}" for j in scenario.jobs if j.doom == "never"}


@settings(max_examples=300, deadline=None)
@given(contended())
def test_invariants_hold_where_room_is_contended(scenario: Contended) -> None:
    doomed, never = _doomed(scenario)
    decisions = check(scenario.objects(), None, doomed, scenario.gated_pods(), never, scenario.linger)
    assert check(scenario.objects(), None, doomed, scenario.gated_pods(), never, scenario.linger) \
        == decisions


@settings(max_examples=100, deadline=None)
@given(contended())
def test_invariants_hold_contended_with_enqueue_and_the_starvation_guard(
        scenario: Contended) -> None:
    doomed, never = _doomed(scenario)
    check(scenario.objects(), gated_config(), doomed, scenario.gated_pods(), never, scenario.linger)


@settings(max_examples=100, deadline=None)
@given(scenarios())
def test_invariants_hold_with_every_action(scenario: Scenario) -> None:
    decisions = check(scenario.objects(), None)
    assert check(scenario.objects(), None) == decisions


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_invariants_hold_with_enqueue_and_the_starvation_guard(scenario: Scenario) -> None:
    check(scenario.objects(), gated_config())
