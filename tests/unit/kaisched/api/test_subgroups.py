"""The subgroup tree on its own: when it is met, what placing it takes first,
what an eviction may take, what it says when short, and which declarations
an API server with kaisched's CRD refuses."""
from __future__ import annotations

import pytest

from kaisched.api.gangplan import placement_units
from kaisched.api.job import GangSpec, JobInfo
from kaisched.api.resource import Resource
from kaisched.api.subgroups import ROOT, Step, SubGroup, tree_of, tree_problems
from kaisched.api.task import TaskInfo
from kaisched.api.types import JobKey, NodeName, PodKey, TaskStatus

STAGES = tuple(SubGroup(f"stage-{c}", 2) for c in "abcd")
# KAI's disaggregated serving: decode and prefill, each a leader and workers.
SERVING = (SubGroup("decode"), SubGroup("decode-leader", 1, parent="decode"),
           SubGroup("decode-workers", 4, parent="decode"),
           SubGroup("prefill", min_sub_group=1), SubGroup("prefill-a", 2, parent="prefill"),
           SubGroup("prefill-b", 3, parent="prefill"))


def test_a_flat_list_is_one_level_where_every_subgroup_is_needed() -> None:
    tree = tree_of((SubGroup("master", 1), SubGroup("worker", 3)), None)
    assert not tree.choices and tree.min_pods() == 4
    assert tree.met({"master": 1, "worker": 3})
    assert not tree.met({"master": 1, "worker": 2})


def test_two_of_four_stages_each_by_its_own_minimum() -> None:
    tree = tree_of(STAGES, 2)
    assert tree.choices and tree.min_pods() == 4
    assert tree.met({"stage-a": 2, "stage-c": 2})
    assert not tree.met({"stage-a": 2, "stage-b": 1, "stage-c": 1, "stage-d": 1})


def test_inner_subgroups_need_their_children() -> None:
    tree = tree_of(SERVING, None)
    assert tree.min_pods() == 1 + 4 + 2
    assert tree.met({"decode-leader": 1, "decode-workers": 4, "prefill-a": 2})
    assert not tree.met({"decode-leader": 1, "decode-workers": 3, "prefill-b": 3})
    assert tree.leaves_under("prefill") == ("prefill-a", "prefill-b")
    assert tree.units_for("prefill-b") == ("prefill-b", "prefill")


def test_the_plan_takes_the_cheapest_children_that_can_be_met_whole() -> None:
    tree = tree_of(STAGES, 2)
    # a is met, b half placed, c has all its pods, d lacks one
    plan = tree.plan({"stage-a": 2, "stage-b": 1}, {"stage-a": 2, "stage-b": 2, "stage-c": 2,
                                                    "stage-d": 1})
    assert plan.needed == (Step((("stage-b", 1),), whole=True),)
    assert plan.alternatives == (Step((("stage-c", 2),), whole=True),
                                 Step((("stage-d", 2),), whole=True))
    # extras only for stages that are met or being met, not inside the others
    assert plan.open == {"stage-a", "stage-b"}


def test_required_leaves_are_placed_pod_by_pod_and_chosen_children_whole() -> None:
    plan = tree_of(SERVING, None).plan({}, {"decode-leader": 1, "decode-workers": 4,
                                            "prefill-a": 2, "prefill-b": 3})
    assert plan.needed == (Step((("decode-leader", 1),), False),
                           Step((("decode-workers", 4),), False),
                           Step((("prefill-a", 2),), True))
    assert plan.alternatives == (Step((("prefill-b", 3),), True),)


@pytest.mark.parametrize("have, remove, keeps", [
    ({"stage-a": 2, "stage-b": 2, "stage-c": 2}, {"stage-c": 2}, True),    # a whole stage goes
    ({"stage-a": 2, "stage-b": 2, "stage-c": 2}, {"stage-c": 1}, False),   # half a stage left
    ({"stage-a": 3, "stage-b": 2}, {"stage-a": 1}, True),                  # a surplus pod
    ({"stage-a": 2, "stage-b": 2}, {"stage-b": 2}, False),                 # below the root's 2
])
def test_an_eviction_keeps_the_tree_and_leaves_no_half_subgroup(
        have: dict[str, int], remove: dict[str, int], keeps: bool) -> None:
    assert tree_of(STAGES, 2).keeps(have, remove) is keeps


def test_a_subgroup_left_with_only_finished_pods_counts_as_gone() -> None:
    tree = tree_of(STAGES, 2)
    have = {"stage-a": 2, "stage-b": 2, "stage-c": 2}
    holding = {"stage-a": 2, "stage-b": 2, "stage-c": 1}    # one of c's pods Succeeded
    assert not tree.keeps(have, {"stage-c": 1})
    assert tree.keeps(have, {"stage-c": 1}, holding)


def test_the_shortfall_names_the_short_subtree_in_numbers() -> None:
    tree = tree_of(SERVING, None)
    have = {"decode-leader": 1, "decode-workers": 4, "prefill-b": 1}
    assert tree.shortfall(have, {"prefill-a": 1, "prefill-b": 3}) == (
        "the PodGroup needs all of its 2 subgroups met, has 1: [decode met, prefill needs 1 of "
        "its 2 subgroups met, has 0: [prefill-a 0/2 (1 pod(s) exist), prefill-b 1/3]]")


@pytest.mark.parametrize("subgroups, root, problem", [
    ((SubGroup("a", 1), SubGroup("a", 1)), None, "declared twice"),
    ((SubGroup("a", 1, parent="b"),), None, "parent 'b' is not a subgroup"),
    ((SubGroup("a", parent="b"), SubGroup("b", parent="a")), None, "form a cycle"),
    ((SubGroup("a", 2), SubGroup("w", 1, parent="a")), None, "give minSubGroup"),
    ((SubGroup("a", 1, min_sub_group=1),), None, "needs subgroups under it"),
    ((SubGroup("a", min_sub_group=3), SubGroup("w", 1, parent="a")), None, "exceeds its 1"),
    ((SubGroup("a", 1),), 2, "exceeds the 1 top-level"),
])
def test_declarations_an_api_server_refuses(subgroups: tuple[SubGroup, ...], root: int | None,
                                            problem: str) -> None:
    assert any(problem in p for p in tree_problems(subgroups, root)), tree_problems(subgroups, root)


def test_a_broken_declaration_still_makes_a_tree() -> None:
    """The converter reports the problem (the gang is not placed); the tree,
    made all the same, hangs what it cannot place under the root."""
    tree = tree_of((SubGroup("a", parent="b"), SubGroup("b", parent="a"),
                    SubGroup("c", 1, parent="nowhere")), None)
    assert tree.parent == {"a": ROOT, "b": "a", "c": ROOT}
    assert tree.leaves == ("b", "c")


# -- the units a gang is placed in ----------------------------------------------------

def task(name: str, leaf: str | None, status: TaskStatus = TaskStatus.PENDING) -> TaskInfo:
    node = None if status is TaskStatus.PENDING else NodeName("n")
    return TaskInfo(PodKey(f"default/{name}"), name, JobKey("default/pipe"), status,
                    Resource.of({"cpu": 1}), node, leaf)


def test_units_place_the_chosen_stages_whole_then_the_others_then_extras() -> None:
    job = JobInfo(JobKey("default/pipe"), GangSpec(min_member=4, subgroups=STAGES,
                                                   min_sub_group=2))
    tasks = [task(f"{c}-{i}", f"stage-{c}") for c in "abc" for i in range(3)]
    for t in tasks:
        job.add_task(t)
    units = placement_units(job, tasks)
    shown = [([t.name for t in u.tasks], u.whole, u.needed) for u in units]
    assert shown == [(["a-0", "a-1"], True, True), (["b-0", "b-1"], True, True),
                     (["c-0", "c-1"], True, False), (["a-2"], False, False),
                     (["b-2"], False, False)]     # c's third pod waits for c as a whole


def test_units_without_subgroups_are_the_tasks_one_by_one() -> None:
    job = JobInfo(JobKey("default/pipe"), GangSpec(min_member=2))
    tasks = [task(f"p-{i}", None) for i in range(3)]
    for t in tasks:
        job.add_task(t)
    assert [u.tasks for u in placement_units(job, tasks)] == [(t,) for t in tasks]


def test_eviction_units_follow_the_tree() -> None:
    job = JobInfo(JobKey("default/pipe"), GangSpec(min_member=4, subgroups=STAGES[:3],
                                                   min_sub_group=2))
    running = {c: [task(f"{c}-{i}", f"stage-{c}", TaskStatus.RUNNING) for i in range(2)]
               for c in "abc"}
    extra = task("a-2", "stage-a", TaskStatus.RUNNING)
    for t in [*running["a"], *running["b"], *running["c"], extra]:
        job.add_task(t)
    assert job.eviction_unit(extra) == [extra]                       # a surplus pod alone
    assert job.eviction_unit(running["c"][1]) == running["c"]        # stage c whole
    gone = running["c"]
    assert job.eviction_unit(running["b"][0], gone) is None          # then only the whole gang
