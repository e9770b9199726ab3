"""The over-quota split of fair share with memory, as KAI divides it
(resource_division.go): quotas first, then what is left goes to queues of
higher priority first, and among queues of one priority by share weights
that lower the part of queues that used much over the window.

A queue still wanting more has nW = its overQuotaWeight over the sum of the
weights of the queues still wanting more (of its priority) and nUsage its
normalised usage (kaisched.api.decayedusage); its share weight is

    max(0, nW + kValue x (nW - nUsage))

so a queue that used less than its weight's part of the cluster gets more
than that part of the room, one that used more gets less, and none gets
anything taken from its quota. kValue sets how strongly usage counts (0:
not at all). The weights are worked out again each time a queue has all it
wants, as KAI's rounds do; room nobody may take (every share weight zero)
stays unassigned, as in KAI.
"""
from __future__ import annotations

from typing import Sequence

_EPS = 1e-9


def share_weights(wanting: Sequence[int], weights: Sequence[float], usages: Sequence[float],
                  k_value: float) -> dict[int, float]:
    """KAI's calcShareWeights over the queues (by index) that still want more."""
    total = sum(weights[i] for i in wanting)
    if total <= 0:
        return {}
    out = {}
    for i in wanting:
        nw = weights[i] / total
        out[i] = max(0.0, nw + k_value * (nw - usages[i]))
    return out


def divide_with_usage(capacity: float, quotas: Sequence[float], caps: Sequence[float],
                      weights: Sequence[float], priorities: Sequence[int],
                      usages: Sequence[float], k_value: float) -> list[float]:
    """Shares of capacity: min(quota, cap) first, then the rest band by band
    (higher priority first), each band by share weights up to each cap."""
    share = [min(q, c) for q, c in zip(quotas, caps, strict=True)]
    remaining = capacity - sum(share)
    for priority in sorted(set(priorities), reverse=True):
        if remaining <= _EPS:
            break
        band = [i for i, p in enumerate(priorities) if p == priority]
        remaining = _fill(share, remaining, band, caps, weights, usages, k_value)
    return share


def _fill(share: list[float], remaining: float, band: list[int], caps: Sequence[float],
          weights: Sequence[float], usages: Sequence[float], k_value: float) -> float:
    """Water-filling with share weights, worked out again whenever a queue
    reaches its cap; returns what is left."""
    while remaining > _EPS:
        wanting = [i for i in band if share[i] < caps[i] - _EPS and weights[i] > 0]
        sw = share_weights(wanting, weights, usages, k_value)
        giving = [i for i in wanting if sw.get(i, 0.0) > 0]
        total = sum(sw[i] for i in giving)
        if total <= _EPS:
            break
        step = min(remaining / total, min((caps[i] - share[i]) / sw[i] for i in giving))
        for i in giving:
            share[i] = min(caps[i], share[i] + step * sw[i])
        remaining -= step * total
    return remaining
