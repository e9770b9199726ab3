"""KAI's PodGroup and Queue read into kaisched's model (kaisched/cache/convert/kai.py):
members, queue, priority and topology, the subgroup tree and its leaves, the problems said,
a queue's units and unlimited amounts."""
from __future__ import annotations

from typing import Any

import pytest

from kaisched.api.resource import GPU
from kaisched.cache import convert
from kaisched.cache.convert.kai import UNLIMITED_QUOTA, flat_subgroups, subgroup_tree
from tests.builders.objects import build_kai_podgroup

Obj = dict[str, Any]


def test_kai_podgroup_reads_its_members_queue_priority_and_leaves() -> None:
    gang, _, problem = convert.kai_podgroup(build_kai_podgroup(
        queue="team-a", priorityClassName="train", preemptibility="preemptible",
        topologyConstraint={"requiredTopologyLevel": "rack", "topology": "default"},
        subGroups=[{"name": "master", "minMember": 1},
                   {"name": "worker", "minMember": 3,
                    "topologyConstraint": {"preferredTopologyLevel": "block"}}]))
    assert problem is None
    assert (gang.min_member, gang.queue, gang.priority_class) == (4, "team-a", "train")
    assert (gang.preemptible, gang.preemptible_below) == (True, None)
    assert gang.topology.required == "rack"
    assert [(sg.name, sg.min_member, sg.topology.preferred) for sg in gang.subgroups] == \
        [("master", 1, None), ("worker", 3, "block")]


def test_kai_subgroup_tree_keeps_its_parents_and_its_leaves_take_the_pods() -> None:
    problems: list[str] = []
    tree = subgroup_tree([{"name": "replica-0", "minSubGroup": 2},
                          {"name": "prefill", "parent": "replica-0", "minMember": 2},
                          {"name": "decode", "parent": "replica-0", "minMember": 1}], problems)
    assert not problems
    assert [(sg.name, sg.parent, sg.min_member, sg.min_sub_group) for sg in tree] == [
        ("replica-0", None, None, 2), ("prefill", "replica-0", 2, None),
        ("decode", "replica-0", 1, None)]
    assert [(sg.name, sg.min_member) for sg in flat_subgroups(tree)] == [("prefill", 2), ("decode", 1)]
    gang, _, problem = convert.kai_podgroup(build_kai_podgroup(minSubGroup=1, subGroups=[
        {"name": "replica-0", "minSubGroup": 2}, {"name": "replica-1", "minSubGroup": 2},
        {"name": "a0", "parent": "replica-0", "minMember": 2},
        {"name": "b0", "parent": "replica-0", "minMember": 1},
        {"name": "a1", "parent": "replica-1", "minMember": 2},
        {"name": "b1", "parent": "replica-1", "minMember": 1}]))
    assert problem is None and gang.min_sub_group == 1
    assert [(sg.name, sg.parent, sg.min_member, sg.min_sub_group) for sg in gang.subgroups] == [
        ("replica-0", None, 0, 2), ("replica-1", None, 0, 2), ("a0", "replica-0", 2, None),
        ("b0", "replica-0", 1, None), ("a1", "replica-1", 2, None), ("b1", "replica-1", 1, None)]
    assert gang.min_member == 3         # the fewest pods that meet the tree: one replica


@pytest.mark.parametrize("spec, problem", [
    ({"minMember": 2, "minSubGroup": 1}, "mutually exclusive"),
    ({"minMember": -1}, "spec.minMember must be an integer >= 0"),
    ({"preemptibility": "sometimes"}, "spec.preemptibility"),
    ({"subGroups": [{"name": "a", "parent": "nowhere"}]}, "parent 'nowhere' is not a subGroup"),
])
def test_kai_podgroup_problems(spec: Obj, problem: str) -> None:
    assert problem in (convert.kai_podgroup(build_kai_podgroup(**spec))[2] or "")


def test_kai_queue_units_and_unlimited() -> None:
    queue = convert.kai_queue({"metadata": {"name": "team-a"}, "spec": {
        "parentQueue": "dept", "priority": 150,
        "resources": {"gpu": {"quota": 2.5, "limit": -1, "overQuotaWeight": 3},
                      "cpu": {"quota": 4000, "limit": 8000},
                      "memory": {"quota": -1, "limit": 1000}}}})
    assert (queue.name, queue.parent, queue.priority, queue.problem) == ("team-a", "dept", 150, None)
    assert queue.quota.get(GPU) == 2.5 and queue.quota.get("cpu") == 4000      # millicores
    assert queue.quota.get("memory") == UNLIMITED_QUOTA                       # -1: all of it
    assert queue.limit(GPU) is None and queue.limit("cpu") == 8000
    assert queue.limit("memory") == 1000 * 10**6                             # megabytes
    assert queue.weight(GPU) == 3 and not queue.declared                      # KAI owns its status
