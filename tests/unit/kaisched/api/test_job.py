"""A gang's readiness read off the count its JobInfo keeps answers as the
count over statuses does.

The gang plugin's ready, pipelined and order callbacks are asked several
times a placement; they read a count of ready tasks that add_task and
remove_task keep (so every placement and every undo), not a sum over
statuses. After any sequence of tasks added, changed and removed -- under
either gang rules, with and without a subgroup tree, and in a clone --
ready_met() and pipelined_met() must equal minimum_met() over the ready
statuses (and Pipelined).
"""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kaisched.api.job import GangSpec, JobInfo
from kaisched.api.resource import Resource
from kaisched.api.subgroups import SubGroup
from kaisched.api.task import TaskInfo
from kaisched.api.types import GangRules, JobKey, PodKey, TaskStatus

TREES = ((), (SubGroup("a", 1), SubGroup("b", 2)))
LEAVES = ("a", "b")
# (pod index, status, or None: the pod goes)
STEPS = st.lists(st.tuples(st.integers(0, 5), st.one_of(st.none(), st.sampled_from(TaskStatus))),
                 max_size=30)


def _task(i: int, status: TaskStatus, tree: bool) -> TaskInfo:
    return TaskInfo(PodKey(f"default/p{i}"), f"u{i}", JobKey("default/job"), status,
                    Resource.of({"cpu": 1}), subgroup=LEAVES[i % 2] if tree else None)


def _agrees(job: JobInfo) -> None:
    ready = job.ready_statuses
    assert job.ready_met() == job.minimum_met(ready)
    assert job.pipelined_met() == job.minimum_met(ready | {TaskStatus.PIPELINED})


@given(STEPS, st.integers(0, 4), st.sampled_from(GangRules), st.booleans())
def test_the_kept_count_answers_as_the_statuses_do(
        steps: list[tuple[int, TaskStatus | None]], minimum: int, rules: GangRules,
        tree: bool) -> None:
    job = JobInfo(JobKey("default/job"), GangSpec(min_member=minimum, rules=rules,
                                                  subgroups=TREES[1] if tree else ()))
    _agrees(job)
    for i, status in steps:
        if status is None:
            job.remove_task(PodKey(f"default/p{i}"))
        else:
            job.update_task(_task(i, status, tree))
        _agrees(job)
        _agrees(job.clone())
