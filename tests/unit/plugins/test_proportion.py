"""proportion: water-filling, hierarchical fair share, queue
limits and the quota cap of non-preemptible jobs."""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaisched.cluster.kinds import POD
from plugins.proportion import water_fill
from tests.builders.objects import (
    Cycle,
    build_node,
    build_pod,
    build_podgroup,
    build_queue,
    open_session,
    run_cycle,
)

INF = float("inf")


# -- water_fill ----------------------------------------------------------------------------

@pytest.mark.parametrize(("capacity", "quotas", "caps", "weights", "expected"), [
    # quota first, the rest split by weight
    (10, [3, 2], [INF, INF], [1, 1], [5.5, 4.5]),
    (12, [0, 0], [INF, INF], [1, 2], [4, 8]),
    (12, [0, 0, 0], [INF, INF, INF], [1, 1, 2], [3, 3, 6]),
    # capped by demand (or limit): the excess goes to the others
    (10, [0, 0], [2, INF], [1, 1], [2, 8]),
    (10, [0, 0, 0], [1, 2, INF], [1, 1, 1], [1, 2, 7]),
    # quota is capped by demand too
    (10, [5, 0], [2, INF], [1, 1], [2, 8]),
    # zero weight: quota only
    (10, [2, 0], [INF, INF], [0, 1], [2, 8]),
    (10, [0, 0], [INF, INF], [0, 0], [0, 0]),
    # leftover when every demand is met stays unassigned
    (10, [0, 0], [2, 3], [1, 1], [2, 3]),
    (10, [1, 1], [1, 1], [1, 1], [1, 1]),
    # nothing to share
    (0, [0, 0], [5, 5], [1, 1], [0, 0]),
    (5, [], [], [], []),
], ids=["quota-first", "weights", "weights-3", "demand-cap", "demand-caps-3", "quota-capped",
        "zero-weight", "all-zero-weight", "leftover", "all-quota", "empty-capacity", "no-children"])
def test_water_fill(capacity: float, quotas: list[float], caps: list[float],
                    weights: list[float], expected: list[float]) -> None:
    assert water_fill(capacity, quotas, caps, weights) == pytest.approx(expected)


children = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 20), st.integers(0, 4)),
                    min_size=1, max_size=5)


@settings(max_examples=100, deadline=None)
@given(capacity=st.integers(0, 40), kids=children)
def test_water_fill_properties(capacity: int, kids: list[tuple[int, int, int]]) -> None:
    quotas = [float(q) for q, _, _ in kids]
    caps = [float(c) for _, c, _ in kids]
    weights = [float(w) for _, _, w in kids]
    shares = water_fill(float(capacity), quotas, caps, weights)
    floor = [min(q, c) for q, c in zip(quotas, caps, strict=True)]
    for share, low, cap in zip(shares, floor, caps, strict=True):
        assert low - 1e-6 <= share <= max(cap, low) + 1e-6       # quota first, never above cap
    handed_out = sum(shares) - sum(floor)
    assert handed_out <= max(capacity - sum(floor), 0) + 1e-6
    hungry = [i for i in range(len(kids)) if weights[i] > 0 and shares[i] < caps[i] - 1e-6]
    if hungry and sum(floor) < capacity:                        # water fills to the brim
        assert sum(shares) == pytest.approx(capacity)


# -- hierarchical fair share through a session -----------------------------------------------

def two_level(running: dict[str, int], pending: dict[str, int]) -> list[dict]:
    """16 cpu on 4 nodes; org-a (a1 weight 1, a2 weight 3) and org-b, equal weights."""
    objs = [build_node(f"n{i}", cpu=4) for i in range(4)]
    objs += [build_queue("org-a"), build_queue("org-b"), build_queue("a1", parent="org-a"),
             build_queue("a2", parent="org-a", resources={"cpu": {"overQuotaWeight": 3}})]
    slot = 0
    for queue, count in running.items():
        for i in range(count):
            objs.append(build_pod(f"{queue}-run-{i}", cpu=1, queue=queue, node=f"n{slot // 4}"))
            slot += 1
    for queue, count in pending.items():
        objs += [build_pod(f"{queue}-{i:02d}", cpu=1, queue=queue) for i in range(count)]
    return objs


def per_queue(cycle: Cycle) -> Counter:
    return Counter(pod.split("/")[1].rsplit("-", 1)[0] for pod in cycle.bindings)


def test_hierarchical_fair_share_divides_a_contended_cluster() -> None:
    cycle = run_cycle(two_level({}, {"a1": 16, "a2": 16, "org-b": 16}))
    assert per_queue(cycle) == {"a1": 2, "a2": 6, "org-b": 8}


def test_queue_order_is_least_share_of_fair_share_first() -> None:
    # fair shares a1 2, a2 6, org-b 8: a1 uses 2/2, a2 1/6, org-b 2/8
    ssn = open_session(two_level({"a1": 2, "a2": 1, "org-b": 2},
                                 {"a1": 14, "a2": 15, "org-b": 14}))
    queues = ssn.cluster.queues
    order = sorted(["a1", "a2", "org-b"], key=lambda q: ssn.queue_order_key(queues[q]))
    assert order == ["a2", "org-b", "a1"]


@pytest.mark.parametrize(("queue", "cpu", "over"), [
    # 16 cpu: org-a 8 and org-b 8; org-a's 8 split 1:3 between a1 (2) and a2 (6).
    # Each queue already uses 1 cpu.
    ("a1", 1, False), ("a1", 2, True),
    ("a2", 5, False), ("a2", 6, True),
    ("org-b", 7, False), ("org-b", 8, True),
])
def test_hierarchical_fair_share_through_a_session(queue: str, cpu: int, over: bool) -> None:
    objs = two_level({"a1": 1, "a2": 1, "org-b": 1}, {"a1": 10, "a2": 10, "org-b": 10})
    objs.append(build_pod("probe", cpu=cpu, queue=queue))
    ssn = open_session(objs)
    job = ssn.cluster.jobs["default/probe"]
    reason = ssn.overused(job, job.tasks["default/probe"])
    fair = {"a1": 2, "a2": 6, "org-b": 8}[queue]
    if over:
        assert reason is not None and f"({1 + cpu}/{fair})" in reason, reason
    else:
        assert reason is None


def test_fair_share_follows_the_tree_when_queues_are_uncontended() -> None:
    cycle = run_cycle(two_level({}, {"a1": 1, "a2": 3, "org-b": 4}))
    assert per_queue(cycle) == {"a1": 1, "a2": 3, "org-b": 4}


# -- limits -----------------------------------------------------------------------------

def pod_message(cycle: Cycle, name: str) -> str:
    pod = cycle.cluster.get(POD, "default", name)
    cond = next((c for c in (pod.get("status") or {}).get("conditions") or ()
                 if c.get("type") == "PodScheduled"), {})
    assert cond.get("status") == "False", cond
    return cond.get("message", "")


@pytest.mark.parametrize("nodes", [1, 3])
def test_queue_limit_refuses_allocation_even_with_idle_nodes(nodes: int) -> None:
    objs = [build_node(f"n{i}", cpu=8) for i in range(nodes)]
    objs += [build_queue("team", resources={"cpu": {"limit": "2"}})]
    objs += [build_pod(f"p{i}", cpu=1, queue="team") for i in range(3)]
    cycle = run_cycle(objs)
    assert sorted(cycle.bindings) == ["default/p0", "default/p1"]
    message = pod_message(cycle, "p2")
    assert "at limit for" in message and "team" in message


def test_parent_queue_limit_applies_to_its_children() -> None:
    objs = [build_node("n1", cpu=8),
            build_queue("org", resources={"cpu": {"limit": "2"}}),
            build_queue("child", parent="org")]
    objs += [build_pod(f"p{i}", cpu=1, queue="child") for i in range(3)]
    cycle = run_cycle(objs)
    assert len(cycle.bindings) == 2
    assert "queue org at limit for" in pod_message(cycle, "p2")


def test_limit_counts_what_already_runs() -> None:
    objs = [build_node("n1", cpu=8), build_queue("team", resources={"cpu": {"limit": "2"}}),
            build_pod("old", cpu=2, queue="team", node="n1"), build_pod("new", cpu=1, queue="team")]
    cycle = run_cycle(objs)
    assert cycle.bindings == {}
    assert "at limit for" in pod_message(cycle, "new")


def test_gang_over_the_limit_places_nothing() -> None:
    objs = [build_node("n1", cpu=8), build_queue("team", resources={"cpu": {"limit": "2"}}),
            build_podgroup("pg", min_member=3, queue="team")]
    objs += [build_pod(f"p{i}", cpu=1, group="pg", queue="team") for i in range(3)]
    assert run_cycle(objs).bindings == {}


@pytest.mark.parametrize("limit", ["0", 0])
def test_zero_limit_means_nothing_not_unlimited(limit: object) -> None:
    objs = [build_node("n1", cpu=8), build_queue("team", resources={"cpu": {"limit": limit}}),
            build_pod("p", cpu=1, queue="team")]
    assert run_cycle(objs).bindings == {}


# -- non-preemptible jobs are capped at quota ------------------------------------------

@pytest.mark.parametrize(("preemptible", "bound"), [(False, 2), (True, 4)])
def test_non_preemptible_job_is_capped_at_quota(preemptible: bool, bound: int) -> None:
    objs = [build_node("n1", cpu=8), build_queue("team", resources={"cpu": {"quota": "2"}}),
            build_podgroup("pg", min_member=1, queue="team", preemptible=preemptible)]
    objs += [build_pod(f"p{i}", cpu=1, group="pg", queue="team") for i in range(4)]
    cycle = run_cycle(objs)
    assert len(cycle.bindings) == bound


def test_non_preemptible_gang_larger_than_quota_waits() -> None:
    objs = [build_node("n1", cpu=8), build_queue("team", resources={"cpu": {"quota": "2"}}),
            build_podgroup("pg", min_member=3, queue="team", preemptible=False)]
    objs += [build_pod(f"p{i}", cpu=1, group="pg", queue="team") for i in range(3)]
    cycle = run_cycle(objs)
    assert cycle.bindings == {}
    assert "quota" in pod_message(cycle, "p0")
