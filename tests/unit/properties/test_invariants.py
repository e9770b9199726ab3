"""The scheduler's invariants over random small clusters, after one cycle of
allocate + backfill: no node over-committed, gangs all-or-nothing, queues
within their limits, and the same input always giving the same decisions."""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders.objects import run_cycle
from tests.builders.strategies import GPU, Scenario, scenarios


def placements(scenario: Scenario, bindings: dict[str, str]) -> dict[str, str]:
    """pod name -> node, for pods running before and pods bound this cycle."""
    out = {p.name: p.node for p in scenario.pods if p.node}
    for key, node in bindings.items():
        name = key.split("/", 1)[1]
        assert name not in out, f"{name} was bound although it runs already"
        out[name] = node
    return out


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_invariants_hold_after_one_cycle(scenario: Scenario) -> None:
    bindings = run_cycle(scenario.objects()).bindings
    placed = placements(scenario, bindings)
    by_name = {p.name: p for p in scenario.pods}

    # no node is over-committed
    load: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for name, node in placed.items():
        load[node]["cpu"] += by_name[name].cpu
        load[node][GPU] += by_name[name].gpu
        load[node]["pods"] += 1
    for node, amounts in load.items():
        alloc = scenario.nodes[node]
        assert amounts["cpu"] <= alloc["cpu"] + 1e-6, (node, dict(amounts), alloc)
        assert amounts[GPU] <= alloc[GPU] + 1e-6, (node, dict(amounts), alloc)
        assert amounts["pods"] <= 110

    # every gang either got nothing new, or has its minimum (running + newly bound)
    for job, (min_member, _) in scenario.jobs.items():
        new = sum(1 for key in bindings if by_name[key.split("/", 1)[1]].job == job)
        ready = sum(1 for p in scenario.pods if p.job == job and p.name in placed)
        assert new == 0 or ready >= min_member, (job, new, ready, min_member)

    # no queue goes over its limit (a parent's limit covers its children)
    usage: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for name in placed:
        pod = by_name[name]
        for queue in scenario.ancestors(scenario.jobs[pod.job][1]):
            usage[queue]["cpu"] += pod.cpu
            usage[queue][GPU] += pod.gpu
    for queue, (_, limits) in scenario.queues.items():
        for res, limit in limits.items():
            assert usage[queue][res] <= limit + 1e-6, (queue, res, usage[queue][res], limit)

    # jobs in a queue with children are not placed (only leaves hold jobs)
    parents = {p for p, _ in scenario.queues.values() if p}
    for key in bindings:
        assert scenario.jobs[by_name[key.split("/", 1)[1]].job][1] not in parents

    # the same input gives the same decisions
    assert run_cycle(scenario.objects()).bindings == bindings


@settings(max_examples=60, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False))
def test_object_order_does_not_change_decisions(scenario: Scenario, rnd: Any) -> None:
    objects = scenario.objects()
    shuffled = list(objects)
    rnd.shuffle(shuffled)
    assert run_cycle(shuffled).bindings == run_cycle(objects).bindings
