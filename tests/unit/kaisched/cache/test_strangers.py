"""Other schedulers' pods in a Workload API gang (kaisched.cache.strangers):
each note says which gangs' strangers changed, so only those declare anew."""
from __future__ import annotations

from typing import Any

from kaisched.api.types import JobKey, PodKey
from kaisched.cache import convert
from kaisched.cache.convert import PodFacts
from kaisched.cache.strangers import Strangers
from tests.builders.objects import build_pod

P1 = PodKey("default/p-1")
GANG = JobKey("default/pg")


def member(scheduler: str, **kw: Any) -> PodFacts:
    pod = build_pod("p-1", scheduler=scheduler, **kw)
    pod["spec"]["schedulingGroup"] = {"podGroupName": "pg"}
    return convert.pod_facts(pod)


def test_a_stranger_joins_changes_and_leaves_its_gang() -> None:
    book = Strangers("kaisched")
    first = member("other")
    assert first.job == GANG
    assert book.note(P1, first) == (GANG,)
    assert book.of(GANG) == {P1: "other"}
    assert book.note(P1, first) == ()                       # nothing new: no gang declares again
    assert book.note(P1, member("third")) == (GANG, GANG)   # left as one stranger, came as another
    assert book.of(GANG) == {P1: "third"}
    assert book.note(P1, None) == (GANG,)
    assert book.of(GANG) is None


def test_own_pods_and_finished_ones_are_no_strangers() -> None:
    book = Strangers("kaisched")
    assert book.note(P1, member("kaisched")) == ()
    assert book.note(P1, member("other")) == (GANG,)
    assert book.note(P1, member("other", node="n1", phase="Succeeded")) == (GANG,)
    assert book.of(GANG) is None
