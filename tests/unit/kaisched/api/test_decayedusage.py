"""Usage over a window (kaisched.api.decayedusage): buckets on a grid, sliding and
tumbling windows, the half-life decay and the normalisation by what the
cluster offered."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaisched.api.decayedusage import (
    BUCKETS,
    UsageParams,
    WindowType,
    add_interval,
    holdings,
    in_window,
    normalised,
    offered,
)
from kaisched.api.queue import Bucket
from kaisched.api.resource import Resource
from kaisched.api.types import QueueName

GPU = "nvidia.com/gpu"
HOUR = 3600.0


def test_a_queue_that_held_24_of_a_possible_100_gpu_hours_scores_024() -> None:
    # KAI's own example: 10 GPUs for 10 hours; 8 GPUs for 3 hours held.
    params = UsageParams(window=10 * HOUR)
    buckets = add_interval((), params, 0, 3 * HOUR, {GPU: 8}, {GPU: 10})
    buckets = add_interval(buckets, params, 3 * HOUR, 10 * HOUR, {GPU: 0}, {GPU: 10})
    assert normalised(buckets, params, 10 * HOUR)[GPU] == pytest.approx(0.24)


def test_an_interval_is_split_where_it_crosses_the_grid() -> None:
    params = UsageParams(window=4800)            # buckets of 100 s
    buckets = add_interval((), params, 50, 260, {GPU: 2}, {GPU: 8})
    assert [(b.start, b.seconds, dict(b.held)[GPU]) for b in buckets] == \
        [(0.0, 50.0, 100.0), (100.0, 100.0, 200.0), (200.0, 60.0, 120.0)]
    # Added to later, the open bucket grows.
    buckets = add_interval(buckets, params, 260, 300, {GPU: 1}, {GPU: 8})
    assert (buckets[-1].start, buckets[-1].seconds, dict(buckets[-1].held)[GPU]) == \
        (200.0, 100.0, 160.0)


def test_a_sliding_window_keeps_at_most_48_buckets_and_forgets_older_use() -> None:
    params = UsageParams(window=4800)
    buckets = add_interval((), params, 0, 1000, {GPU: 8}, {GPU: 8})
    assert normalised(buckets, params, 1000)[GPU] == 1.0
    buckets = add_interval(buckets, params, 1000, 6000, {}, {GPU: 8})
    assert len(buckets) <= BUCKETS
    assert normalised(buckets, params, 6000)[GPU] == 0.0       # the busy hour left the window
    buckets = add_interval(buckets, params, 6000, 6000 + 100 * 4800, {}, {GPU: 8})
    assert len(buckets) == BUCKETS


def test_a_tumbling_window_starts_again_at_each_multiple_of_its_size() -> None:
    params = UsageParams(window=4800, window_type=WindowType.TUMBLING)
    buckets = add_interval((), params, 0, 4700, {GPU: 8}, {GPU: 8})
    assert normalised(buckets, params, 4700)[GPU] == 1.0
    buckets = add_interval(buckets, params, 4700, 4900, {GPU: 0}, {GPU: 8})
    # 100 s into the new window: only those 100 s (nothing held) count.
    assert [b.start for b in buckets] == [4800.0]
    assert normalised(buckets, params, 4900)[GPU] == 0.0


def test_the_half_life_weighs_recent_use_more() -> None:
    params = UsageParams(window=4800, half_life=100)
    early = add_interval((), params, 0, 200, {GPU: 8}, {GPU: 8})
    early = add_interval(early, params, 200, 400, {}, {GPU: 8})
    late = add_interval((), params, 0, 200, {}, {GPU: 8})
    late = add_interval(late, params, 200, 400, {GPU: 8}, {GPU: 8})
    # The same GPU-hours, used early or late: each bucket weighed by its middle's age.
    weights = [0.5 ** (age / 100) for age in (350, 250, 150, 50)]
    assert normalised(early, params, 400)[GPU] == pytest.approx(sum(weights[:2]) / sum(weights))
    assert normalised(late, params, 400)[GPU] == pytest.approx(sum(weights[2:]) / sum(weights))
    assert normalised(early, params, 400)[GPU] + normalised(late, params, 400)[GPU] == \
        pytest.approx(1.0)


def test_a_small_use_of_an_idle_cluster_costs_little() -> None:
    params = UsageParams(window=HOUR)
    buckets = add_interval((), params, 0, HOUR, {GPU: 1}, {GPU: 100})
    assert normalised(buckets, params, HOUR)[GPU] == pytest.approx(0.01)


def test_holdings_add_children_into_their_parents_and_leave_pod_slots_out() -> None:
    a, b, dept = QueueName("a"), QueueName("b"), QueueName("dept")
    held = holdings([(a, Resource.of({GPU: 2, "pods": 1}), 3), (b, Resource.of({GPU: 1}), 1)],
                    {a: dept, b: dept, dept: QueueName("")})
    assert held == {a: {GPU: 6}, b: {GPU: 1}, dept: {GPU: 7}}
    assert offered(Resource.of({GPU: 8, "pods": 110, "cpu": 0})) == {GPU: 8}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(1, 2000), st.floats(0, 1)), min_size=1, max_size=30),
       st.sampled_from([None, 300.0, 3000.0]), st.sampled_from(list(WindowType)))
def test_usage_is_a_fraction_and_queues_never_add_up_to_more_than_one(
        steps: list[tuple[float, float]], half_life: float | None, window: WindowType) -> None:
    """Two queues sharing a 10-GPU cluster: each one's usage is in [0, 1],
    the two together at most 1, however time and holdings go."""
    params = UsageParams(window=4800, half_life=half_life, window_type=window)
    mine: tuple[Bucket, ...] = ()
    theirs: tuple[Bucket, ...] = ()
    now = 0.0
    for length, part in steps:
        mine = add_interval(mine, params, now, now + length, {GPU: 10 * part}, {GPU: 10})
        theirs = add_interval(theirs, params, now, now + length, {GPU: 10 * (1 - part)}, {GPU: 10})
        now += length
        assert all(math.isclose(b.start % params.bucket, 0, abs_tol=1e-6)
                   or math.isclose(b.start % params.bucket, params.bucket, abs_tol=1e-6)
                   for b in mine)
        assert in_window(mine, params, now) == mine
        a, b = normalised(mine, params, now).get(GPU, 0.0), normalised(theirs, params, now).get(GPU, 0.0)
        assert -1e-9 <= a <= 1 + 1e-9 and -1e-9 <= b <= 1 + 1e-9
        assert a + b <= 1 + 1e-9
