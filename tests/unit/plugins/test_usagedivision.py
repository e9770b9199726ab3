"""The over-quota split with usage (plugins/usagedivision.py), as KAI's
calcShareWeights and divideOverQuotaResource have it."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.proportion import water_fill
from plugins.usagedivision import divide_with_usage, share_weights


def test_share_weights_are_kais_formula() -> None:
    # Two queues of weight 1: nW = 0.5 each; usages 0.75 and 0; kValue 1.
    got = share_weights([0, 1], [1.0, 1.0], [0.75, 0.0], 1.0)
    assert got == {0: pytest.approx(0.5 + 1.0 * (0.5 - 0.75)), 1: pytest.approx(0.5 + 0.5)}
    # Floored at zero: a queue that used far more than its weight's part gets nothing.
    assert share_weights([0, 1], [1.0, 1.0], [0.9, 0.0], 3.0)[0] == 0.0
    # Normalised over the queues still wanting more only.
    assert share_weights([1], [1.0, 3.0], [0.0, 0.2], 1.0) == {1: pytest.approx(1.8)}


def test_the_queue_that_used_less_gets_more_of_the_room_never_anything_of_a_quota() -> None:
    # 16 GPUs, quotas 4 and 4: 8 over quota; bursty used 0.75 of the cluster, steady nothing.
    got = divide_with_usage(16, [4, 4], [100, 100], [1, 1], [100, 100], [0.75, 0.0], 1.0)
    # share weights 0.25 and 1.0: 8 x 0.2 and 8 x 0.8 over the quotas.
    assert got == [pytest.approx(4 + 1.6), pytest.approx(4 + 6.4)]
    # However much it used, a queue keeps its quota.
    got = divide_with_usage(16, [4, 4], [100, 100], [1, 1], [100, 100], [1.0, 0.0], 10.0)
    assert got == [pytest.approx(4), pytest.approx(12)]


def test_room_goes_to_higher_priority_first_then_by_share_weights() -> None:
    # The priority-200 queue takes all it wants before the others share the rest.
    got = divide_with_usage(20, [0, 0, 0], [6, 100, 100], [1, 1, 1], [200, 100, 100],
                            [0.9, 0.5, 0.0], 1.0)
    assert got[0] == pytest.approx(6)
    sw = share_weights([1, 2], [1, 1, 1], [0.9, 0.5, 0.0], 1.0)
    assert got[1] / got[2] == pytest.approx(sw[1] / sw[2])
    assert sum(got) == pytest.approx(20)


def test_a_capped_queue_hands_the_rest_on_with_the_weights_worked_out_again() -> None:
    got = divide_with_usage(12, [0, 0, 0], [2, 100, 100], [1, 1, 2], [1, 1, 1],
                            [0.0, 0.1, 0.1], 0.5)
    # Round 1, all three want: nW .25 .25 .5, share weights .375 .325 .7; queue 0
    # reaches its cap of 2 after 2/.375 units, queues 1 and 2 have .325 and .7 of that.
    step = 2 / 0.375
    left = 12 - step * 1.4
    # Round 2, two want: nW 1/3 and 2/3, share weights .45 and .95, the rest split so.
    assert got == [pytest.approx(2), pytest.approx(step * 0.325 + left * 0.45 / 1.4),
                   pytest.approx(step * 0.7 + left * 0.95 / 1.4)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 16), st.sampled_from([0.0, 0.5, 1, 2, 3])),
                min_size=1, max_size=5),
       st.integers(0, 40), st.floats(0, 5))
def test_without_usage_and_of_one_priority_it_is_todays_water_filling(
        queues: list[tuple[int, int, float]], capacity: int, k_value: float) -> None:
    quotas = [float(q) for q, _, _ in queues]
    caps = [float(c) for _, c, _ in queues]
    weights = [w for _, _, w in queues]
    got = divide_with_usage(capacity, quotas, caps, weights, [100] * len(queues),
                            [0.0] * len(queues), k_value)
    assert got == pytest.approx(water_fill(capacity, quotas, caps, weights), abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 16), st.sampled_from([0.0, 1, 2]),
                          st.sampled_from([50, 100]), st.floats(0, 1)), min_size=1, max_size=5),
       st.integers(0, 40), st.floats(0, 5))
def test_shares_stay_within_quota_cap_and_capacity(
        queues: list[tuple[int, int, float, int, float]], capacity: int, k_value: float) -> None:
    quotas = [float(q[0]) for q in queues]
    caps = [float(q[1]) for q in queues]
    got = divide_with_usage(capacity, quotas, caps, [q[2] for q in queues],
                            [q[3] for q in queues], [q[4] for q in queues], k_value)
    for share, quota, cap in zip(got, quotas, caps, strict=True):
        assert min(quota, cap) - 1e-9 <= share <= cap + 1e-9
    assert sum(got) <= max(capacity, sum(min(q, c) for q, c in zip(quotas, caps, strict=True))) + 1e-6
