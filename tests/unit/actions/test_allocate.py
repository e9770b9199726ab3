"""allocate + backfill through one scheduler cycle: gangs
all-or-nothing, pipelined reservations, minimums first, and the orderings.

Backfill, which places what allocate leaves, is tested here with it."""
from __future__ import annotations

import pytest

from kaisched.cluster.kinds import PODGROUP
from tests.builders.objects import (
    build_node,
    build_pod,
    build_podgroup,
    pod_scheduled_message,
    run_cycle,
)


def gang(name: str, size: int, min_member: int | None = None, cpu: float = 1) -> list[dict]:
    """A PodGroup and its pods, named name-0, name-1, ..."""
    return [build_podgroup(name, min_member=size if min_member is None else min_member),
            *(build_pod(f"{name}-{i}", cpu=cpu, group=name) for i in range(size))]


def releasing(name: str, cpu: float, node: str) -> dict:
    pod = build_pod(name, cpu=cpu, node=node)
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return pod


@pytest.mark.parametrize(("room", "bound"), [(2, 0), (3, 3), (5, 3)])
def test_gang_is_all_or_nothing(room: int, bound: int) -> None:
    cycle = run_cycle([build_node("n1", cpu=room), *gang("pg", 3)])
    assert len(cycle.bindings) == bound


def test_gang_spans_nodes() -> None:
    cycle = run_cycle([build_node("n1", cpu=1), build_node("n2", cpu=2), *gang("pg", 3)])
    assert sorted(cycle.bindings.values()) == ["n1", "n2", "n2"]


def test_waiting_gang_says_why_in_numbers() -> None:
    cycle = run_cycle([build_node("n1", cpu=2), *gang("pg", 3)])
    status = cycle.cluster.get(PODGROUP, "default", "pg")["status"]
    assert status["phase"] == "Pending"
    (cond,) = [c for c in status["conditions"] if c["type"] == "Scheduled"]
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    for part in ("2/3", "minMember 3", "insufficient cpu"):
        assert part in cond["message"], cond["message"]
    assert cond["message"] == pod_scheduled_message(cycle.cluster, "pg-0")


def test_placed_gang_is_running() -> None:
    cycle = run_cycle([build_node("n1", cpu=4), *gang("pg", 3)])
    status = cycle.cluster.get(PODGROUP, "default", "pg")["status"]
    assert status["phase"] == "Running" and status["scheduled"] == 3


def test_running_pods_count_towards_the_gang() -> None:
    objs = [build_node("n1", cpu=4), build_podgroup("pg", min_member=3),
            build_pod("a", group="pg", node="n1"), build_pod("b", group="pg", node="n1"),
            build_pod("c", group="pg")]
    assert run_cycle(objs).bindings == {"default/c": "n1"}


def test_min_member_beyond_the_pods_waits() -> None:
    objs = [build_node("n1", cpu=8), *gang("pg", 2, min_member=3)]
    cycle = run_cycle(objs)
    assert cycle.bindings == {}
    assert "minMember" in pod_scheduled_message(cycle.cluster, "pg-0")


# -- pipelining -------------------------------------------------------------------------

def test_gang_that_fits_only_after_releases_is_reserved_not_bound() -> None:
    objs = [build_node("n1", cpu=4), releasing("old", 3, "n1"), *gang("pg", 2, cpu=2)]
    cycle = run_cycle(objs)
    assert cycle.bindings == {}
    assert cycle.result.reservations == {"default/pg-0": "n1", "default/pg-1": "n1"}


def test_reserved_room_is_not_taken_by_a_later_job() -> None:
    objs = [build_node("n1", cpu=4), releasing("old", 3, "n1"), *gang("pg", 2, cpu=2),
            build_pod("z-late", cpu=1)]
    cycle = run_cycle(objs)
    assert cycle.bindings == {}
    assert "default/z-late" not in cycle.result.reservations


def test_gang_that_cannot_even_be_pipelined_is_discarded() -> None:
    objs = [build_node("n1", cpu=4), releasing("old", 1, "n1"), build_pod("busy", cpu=2, node="n1"),
            *gang("pg", 2, cpu=2)]
    cycle = run_cycle(objs)
    assert cycle.bindings == {} and cycle.result.reservations == {}


# -- orderings ---------------------------------------------------------------------------

def test_other_gangs_minimums_come_before_extra_tasks() -> None:
    # a wants 2 of 4 pods, b wants 2 of 2; room for 4: a gets only its minimum
    objs = [build_node("n1", cpu=4), *gang("a", 4, min_member=2), *gang("b", 2)]
    bound = sorted(run_cycle(objs).bindings)
    assert bound == ["default/a-0", "default/a-1", "default/b-0", "default/b-1"]


def test_extra_tasks_are_placed_when_there_is_room() -> None:
    objs = [build_node("n1", cpu=8), *gang("a", 4, min_member=2), *gang("b", 2)]
    assert len(run_cycle(objs).bindings) == 6


@pytest.mark.parametrize(("pods", "winner"), [
    ([build_pod("low", priority=1), build_pod("high", priority=10)], "high"),
    ([build_pod("b-old", creation="2025-01-01T00:00:00Z"),
      build_pod("a-new", creation="2025-01-02T00:00:00Z")], "b-old"),
    ([build_pod("b"), build_pod("a")], "a"),
    ([build_pod("a-old", priority=1, creation="2025-01-01T00:00:00Z"),
      build_pod("z-new", priority=2, creation="2025-01-02T00:00:00Z")], "z-new"),
], ids=["priority", "creation", "name", "priority-before-creation"])
def test_job_order(pods: list[dict], winner: str) -> None:
    cycle = run_cycle([build_node("n1", cpu=1), *pods])
    assert cycle.bindings == {f"default/{winner}": "n1"}


def test_subgroups_go_in_declared_order() -> None:
    objs = [build_node("n1", cpu=1),
            build_podgroup("pg", min_member=1, subGroups=[{"name": "master", "minMember": 0},
                                                          {"name": "worker", "minMember": 0}]),
            build_pod("a-worker", group="pg", labels={"kaisched.io/subgroup": "worker"}),
            build_pod("z-master", group="pg", labels={"kaisched.io/subgroup": "master"})]
    assert run_cycle(objs).bindings == {"default/z-master": "n1"}


@pytest.mark.parametrize(("room", "bound"), [(2, 0), (3, 3)])
def test_subgroup_minimums_must_all_be_met(room: int, bound: int) -> None:
    objs = [build_node("n1", cpu=room),
            build_podgroup("pg", min_member=1, subGroups=[{"name": "master", "minMember": 1},
                                                          {"name": "worker", "minMember": 2}]),
            build_pod("m", group="pg", labels={"kaisched.io/subgroup": "master"}),
            *(build_pod(f"w{i}", group="pg", labels={"kaisched.io/subgroup": "worker"})
              for i in range(2))]
    assert len(run_cycle(objs).bindings) == bound


def test_higher_priority_pod_of_a_gang_goes_first() -> None:
    objs = [build_node("n1", cpu=1), build_podgroup("pg", min_member=1),
            build_pod("a", group="pg", priority=1), build_pod("b", group="pg", priority=5)]
    assert run_cycle(objs).bindings == {"default/b": "n1"}


# -- backfill ----------------------------------------------------------------------------

def test_best_effort_pods_are_backfilled() -> None:
    objs = [build_node("n1", cpu=1), build_pod("full", cpu=1), build_pod("be", cpu=0)]
    assert run_cycle(objs).bindings == {"default/full": "n1", "default/be": "n1"}


@pytest.mark.parametrize(("slots", "bound"), [(1, 0), (2, 2)])
def test_best_effort_gang_still_goes_whole(slots: int, bound: int) -> None:
    objs = [build_node("n1", pods=slots), *gang("pg", 2, cpu=0)]
    assert len(run_cycle(objs).bindings) == bound
