"""Unread (kaisched/api/unread.py): a node's or a job's tasks with some not made
by a head start. What is made reads as in a dict; what could take in a task
not made raises."""
from __future__ import annotations

import pytest

from kaisched.api.clusterinfo import ForeignPod
from kaisched.api.resource import Resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import JobKey, NodeName, PodKey, TaskStatus
from kaisched.api.unread import Unconverted, Unread, UnreadPods

MADE, PLACED, OTHER = PodKey("default/made"), PodKey("default/placed"), PodKey("default/other")


def task(key: PodKey) -> TaskInfo:
    return TaskInfo(key=key, uid="u", job=JobKey(key), status=TaskStatus.RUNNING,
                    resreq=Resource.of(cpu=1000), node_name=NodeName("n1"))


def unread() -> Unread:
    return Unread({MADE: task(MADE)}, unmade=3)


def test_the_tasks_made_read_and_the_session_writes_and_takes_back_its_own() -> None:
    tasks = unread()
    assert tasks[MADE].key == MADE and tasks.get(MADE) is tasks[MADE] and MADE in tasks
    tasks[PLACED] = task(PLACED)
    assert tasks.pop(PLACED).key == PLACED
    assert tasks.made() == {MADE: task(MADE)} and type(tasks.made()) is dict


@pytest.mark.parametrize("look", [
    lambda t: t[OTHER], lambda t: t.get(OTHER), lambda t: OTHER in t, lambda t: t.pop(OTHER, None),
    len, bool, list, dict, lambda t: list(t.values()), lambda t: list(t.items()),
    lambda t: list(t.keys()), lambda t: {**t}, lambda t: t.copy(), sorted,
    lambda t: t == {}, lambda t: t.setdefault(OTHER, task(OTHER)),
])
def test_any_look_that_could_take_in_a_task_not_made_raises(look: object) -> None:
    with pytest.raises(Unconverted, match="3 pods here are not converted yet"):
        look(unread())      # type: ignore[operator]


def test_other_schedulers_pods_not_made_raise_on_any_look() -> None:
    made = ForeignPod(NodeName("n1"), Resource.of(cpu=100), key=PodKey("kube-system/proxy"))
    pods = UnreadPods((made,), 2)
    assert pods.made() == (made,) and type(pods.made()) is tuple
    for look in (len, bool, list, tuple, lambda p: p[0], lambda p: made in p, sorted,
                 lambda p: p == (made,), lambda p: p + ()):
        with pytest.raises(Unconverted, match="2 pods of other schedulers are not converted yet"):
            look(pods)
