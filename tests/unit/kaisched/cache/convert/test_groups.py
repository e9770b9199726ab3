"""A PodGroup as scheduling reads it (kaisched.cache.convert.groups): the specs
most PodGroups have are read once per distinct one, and their statuses once
per distinct JSON text; either reads as the full reading does."""
from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kaisched.cache.convert import podgroup
from kaisched.cache.convert.groups import podgroup_status
from tests.builders.objects import build_podgroup

# The values a plain spec takes, wrong ones among them (a minimum below one).
_TEXT = st.one_of(st.none(), st.sampled_from(["", "team-a", "team-b", "high"]))


def _fully_read(obj: dict[str, Any]) -> tuple[Any, ...]:
    """The PodGroup read as one with annotations is: field by field (an
    annotation nothing reads changes nothing else)."""
    annotated = {**obj, "metadata": {**obj["metadata"], "annotations": {"note": "x"}}}
    return podgroup(annotated)


@settings(max_examples=200, deadline=None)
@given(min_member=st.one_of(st.integers(-2, 5), st.none()), queue=_TEXT, priority_class=_TEXT,
       generation=st.one_of(st.none(), st.integers(0, 3)), absent=st.booleans())
def test_a_plain_spec_reads_as_its_full_reading(min_member: int | None, queue: str | None,
                                                priority_class: str | None,
                                                generation: int | None, absent: bool) -> None:
    obj = build_podgroup("pg", min_member=min_member, priorityClassName=priority_class)
    if absent:
        del obj["spec"]["minMember"]
    if queue is not None:
        obj["spec"]["queue"] = queue
    obj["metadata"]["generation"] = generation
    assert podgroup(obj) == _fully_read(obj)
    assert podgroup(obj) == _fully_read(obj)        # again, from what was kept


def test_alike_specs_share_what_was_read_and_differing_ones_do_not() -> None:
    a, b = build_podgroup("a", min_member=4, queue="q"), build_podgroup("b", min_member=4, queue="q")
    assert podgroup(a)[0] is podgroup(b)[0]
    assert podgroup(build_podgroup("c", min_member=5, queue="q"))[0].min_member == 5
    # A value of another type than a plain spec's is read field by field, as itself.
    odd = podgroup(build_podgroup("d", min_member=True))
    assert odd[0].min_member == 1 and odd[2] is not None and "True" in odd[2]


def test_a_status_reads_as_itself_through_what_alike_ones_share() -> None:
    status = {"phase": "Running", "scheduled": 3, "running": 3,
              "conditions": [{"type": "Scheduled", "status": "True", "reason": "Scheduled",
                              "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    obj = build_podgroup("pg", min_member=3)
    obj["status"] = status
    assert podgroup(obj)[1] == podgroup_status(status)
    # JSON writes an infinite number as null: a null shares with no infinite number.
    for value in (None, math.inf, -math.inf):
        obj["status"] = {**status, "lastScheduleTime": value}
        assert podgroup(obj)[1].last_schedule_time == value
    # A value JSON cannot hold is read as it is.
    obj["status"] = {**status, "lastScheduleTime": {1: "a"}}
    assert podgroup(obj)[1].last_schedule_time == {1: "a"}
