"""Which pods consolidation moves: the fewest, and of sets moving as many
the first in KAI's victim order (queue order, job order and task order, all
reversed); a pod moves alone, a group the Workload API disrupts only whole
moves with all of it."""
from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from actions.common.movable import VictimOrder, unit_of
from actions.common.moveset import SETS_TRIED, Block, move_sets
from kaisched.api.types import Disruption, JobKey
from tests.builders.objects import build_node, build_pod, build_podgroup, open_session

OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "uid": "uid", "controller": True}


def _pod(name: str, group: str, node: str, creation: str, **kw: Any) -> dict[str, Any]:
    return build_pod(name, gpu=1, group=group, node=node, creation=creation,
                     owner={**OWNER, "name": group}, **kw)


def _group(name: str, creation: str, **spec: Any) -> dict[str, Any]:
    group = build_podgroup(name, **spec)
    group["metadata"]["creationTimestamp"] = creation
    return group


def test_the_victim_order_is_the_job_order_reversed() -> None:
    ssn = open_session([
        build_node("n0", cpu=8, gpu=8),
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": "high"}, "value": 100},
        _group("old", "2026-01-01T00:00:00Z"), _group("new", "2026-01-01T00:05:00Z"),
        _group("high", "2026-01-01T00:09:00Z", priorityClassName="high"),
        _pod("old-0", "old", "n0", "2026-01-01T00:00:00Z"),
        _pod("new-0", "new", "n0", "2026-01-01T00:05:00Z"),
        _pod("new-1", "new", "n0", "2026-01-01T00:05:00Z"),
        _pod("high-0", "high", "n0", "2026-01-01T00:09:00Z", priority=100)])
    by_job = {j.key: list(j.tasks.values()) for j in ssn.cluster.jobs.values()}
    pods = [t for tasks in by_job.values() for t in tasks]
    order = [p.key for p in sorted(pods, key=VictimOrder(ssn, by_job).of)]
    # The newest job of the lowest priority first, its last task first; the
    # higher priority last, though it is the newest.
    assert order == ["default/new-1", "default/new-0", "default/old-0", "default/high-0"]


def _block(index: int, gpus: float, rank: int, pods: int = 1) -> Block:
    return Block(index, np.array([gpus]), pods, (rank, 0))


def test_the_fewest_pods_move_then_the_first_victims() -> None:
    # Needs 2 GPUs: one 2-GPU block does it alone; of the two that do, the
    # first in the victim order comes first; two 1-GPU blocks only after.
    blocks = [_block(0, 1, 0), _block(1, 2, 3), _block(2, 1, 1), _block(3, 2, 2)]
    assert move_sets(blocks, np.array([2.0]))[:3] == [(3,), (1,), (0, 2)]


def test_a_block_that_moves_a_whole_group_costs_all_of_it() -> None:
    # A 2-GPU block of a group of three moved whole costs three pods: two
    # single 1-GPU pods move fewer.
    blocks = [_block(0, 2, 0, pods=3), _block(1, 1, 1), _block(2, 1, 2)]
    assert move_sets(blocks, np.array([2.0]))[0] == (1, 2)


def test_the_sets_tried_are_bounded() -> None:
    blocks = [_block(i, 1, i) for i in range(40)]
    found = move_sets(blocks, np.array([1.0]))
    assert len(found) == SETS_TRIED and found[0] == (0,)


def _gang_session() -> Any:
    return open_session([
        build_node("n0", cpu=8, gpu=4), build_node("n1", cpu=8, gpu=4),
        _group("g", "2026-01-01T00:00:00Z", min_member=2), _group("p", "2026-01-01T00:01:00Z"),
        _pod("g-0", "g", "n0", "2026-01-01T00:00:00Z"), _pod("g-1", "g", "n1", "2026-01-01T00:00:00Z"),
        build_pod("p-0", gpu=4, group="p")])


def test_a_pod_of_a_gang_moves_alone() -> None:
    """Placed again in the same plan, it leaves its job its count; its mate,
    not in the way, stays (as KAI's solver puts back a victim that still fits
    on its own node)."""
    ssn = _gang_session()
    job = ssn.cluster.jobs[JobKey("default/g")]
    unit = unit_of(ssn, job.tasks["default/g-0"], 600.0, {}, ssn.cluster.jobs[JobKey("default/p")])
    assert [t.key for t in (unit or [])] == ["default/g-0"]


def test_a_group_disrupted_only_whole_moves_whole() -> None:
    ssn = _gang_session()
    job = ssn.cluster.jobs[JobKey("default/g")]
    job.spec = attrs.evolve(job.spec, disruption=Disruption.ALL)
    unit = unit_of(ssn, job.tasks["default/g-0"], 600.0, {}, ssn.cluster.jobs[JobKey("default/p")])
    assert sorted(t.key for t in (unit or [])) == ["default/g-0", "default/g-1"]
