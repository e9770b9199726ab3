"""The scheduler's invariants with every action (reclaim, preempt and stale
gang eviction too; and again with the enqueue gate and a starvation guard that
acts at once), over three replayed sessions: evicted pods leave, bound pods
start, and still no node is over-committed, no gang is left partly bound by the
scheduler, no queue exceeds its limit, and replays agree."""
from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings

import attrs

from kaisched.builtins import register_builtins
from kaisched.framework import SchedulerConfig, default_config
from kaisched.tools.replay import replay

from .test_invariants import GPU, Scenario, scenarios

SESSIONS = 3


def gated() -> SchedulerConfig:
    """enqueue before allocate, and every waiting gang starving at once."""
    config = default_config(register_builtins())
    return attrs.evolve(config, actions=("enqueue", *config.actions), starvation_threshold=1e-6)


def run(scenario: Scenario, config: SchedulerConfig | None = None):
    registry = register_builtins()
    return replay(scenario.objects(), config or default_config(registry), registry, SESSIONS)


@settings(max_examples=40, deadline=None)
@given(scenarios())
def test_invariants_hold_with_every_action(scenario: Scenario) -> None:
    check(scenario, None)


@settings(max_examples=25, deadline=None)
@given(scenarios())
def test_invariants_hold_with_enqueue_and_the_starvation_guard(scenario: Scenario) -> None:
    check(scenario, gated())


def check(scenario: Scenario, config: SchedulerConfig | None) -> None:
    result = run(scenario, config)
    by_name = {p.name: p for p in scenario.pods}
    evicted = {key.split("/", 1)[1] for key in result.evictions}
    assert len(result.evictions) == len(set(result.evictions)), "a pod was evicted twice"
    placed = {p.name: p.node for p in scenario.pods if p.node and p.name not in evicted}
    for key, node in result.bindings.items():
        name = key.split("/", 1)[1]
        if name not in evicted:
            placed[name] = node

    load: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for name, node in placed.items():
        load[node]["cpu"] += by_name[name].cpu
        load[node][GPU] += by_name[name].gpu
    for node, amounts in load.items():
        assert amounts["cpu"] <= scenario.nodes[node]["cpu"] + 1e-6, (node, dict(amounts))
        assert amounts[GPU] <= scenario.nodes[node][GPU] + 1e-6, (node, dict(amounts))

    bound_jobs = {by_name[key.split("/", 1)[1]].job for key in result.bindings}
    for job in bound_jobs:
        min_member = scenario.jobs[job][0]
        alive = sum(1 for p in scenario.pods if p.job == job and p.name in placed)
        assert alive == 0 or alive >= min_member, (job, alive, min_member)

    usage: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for name in placed:
        for queue in scenario.ancestors(scenario.jobs[by_name[name].job][1]):
            usage[queue]["cpu"] += by_name[name].cpu
            usage[queue][GPU] += by_name[name].gpu
    for queue, (_, limits) in scenario.queues.items():
        for res, limit in limits.items():
            if usage[queue][res] > limit + 1e-6:
                # only what ran before the scheduler may exceed a limit
                before = sum(getattr(p, "cpu" if res == "cpu" else "gpu") for p in scenario.pods
                             if p.node and queue in scenario.ancestors(scenario.jobs[p.job][1]))
                assert usage[queue][res] <= before + 1e-6, (queue, res, usage[queue][res], limit)

    again = run(scenario, config)
    assert (again.bindings, again.evictions, again.pipelined) == \
        (result.bindings, result.evictions, result.pipelined)
