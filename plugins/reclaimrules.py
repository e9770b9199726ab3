"""The reclaim rules over the queue tree, as the proportion plugin applies them.

"Over" means greater in at least one resource, "within" less or equal in
every one; only the resources the reclaimer asks for are compared (a GPU job
neither blocks nor justifies a reclaim by CPU it does not want). R is what
the reclaimer still needs; fair shares (FS) are the session's.

- gate, on the reclaimer's leaf: use + R within FS (a non-preemptible job
  also: its queue's non-preemptible use + R within quota);
- victim side, before each chunk is taken (r and v: the two queues' branches
  just below their lowest common ancestor): v's remaining use is over
  allocatable(v) = max(quota, FS) capped by the limit, or r's use + R is
  within quota(r) and v's remaining use over quota(v). Nothing is checked
  after the last chunk, so one indivisible victim may take v below both;
- saturation: for each queue A from the reclaimer's leaf up whose use + R
  exceeds FS(A), A stays strictly less saturated (use / FS) than every
  victim-side sibling after the reclaim;
- a non-preemptible reclaimer stays within quota at every level.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

from kaisched.api.queue import ROOT, QueueInfo
from kaisched.api.resource import PODS, Resource, format_amount
from kaisched.api.types import QueueName

_EPS = 1e-9
Amounts = Mapping[str, float]


def over(a: Amounts, b: Amounts, names: Iterable[str]) -> bool:
    return any(a.get(n, 0.0) > b.get(n, 0.0) + _EPS for n in names)


def within(a: Amounts, b: Amounts, names: Iterable[str]) -> bool:
    return all(a.get(n, 0.0) <= b.get(n, 0.0) + _EPS for n in names)


def saturation(use: Amounts, fair: Amounts, names: Iterable[str]) -> float:
    """The largest use / FS over the names (no fair share but some use: infinite)."""
    worst = 0.0
    for n in names:
        u, f = use.get(n, 0.0), fair.get(n, 0.0)
        if u > _EPS:
            worst = max(worst, u / f if f > _EPS else float("inf"))
    return worst


def plus(a: Amounts, b: Resource, sign: float = 1.0) -> dict[str, float]:
    out = dict(a)
    for n, v in b.items:
        out[n] = out.get(n, 0.0) + sign * v
    return out


def names_of(need: Resource) -> list[str]:
    return [n for n, v in need.items if v > 0 and n != PODS]


class ReclaimRules:
    """The rules above over one session's queues: their use (read live, so
    callers ask before their statement changes it), fair shares, quotas."""

    def __init__(self, queues: Mapping[QueueName, QueueInfo],
                 parent: Mapping[QueueName, QueueName], chain: Mapping[QueueName, list[QueueName]],
                 use: Callable[[QueueName], Amounts], pinned: Callable[[QueueName], Amounts],
                 fair: Mapping[QueueName, Amounts]) -> None:
        self.queues, self.parent, self.chain = queues, parent, chain
        self.use, self.pinned, self.fair = use, pinned, fair
        self.tops = sum(1 for q in queues if parent[q] == ROOT)

    def quota(self, queue: QueueName) -> Amounts:
        return self.queues[queue].quota.as_dict()

    def allocatable(self, queue: QueueName, names: Iterable[str]) -> dict[str, float]:
        info, fair = self.queues[queue], self.fair.get(queue, {})
        out = {}
        for n in names:
            value = max(info.quota.get(n), fair.get(n, 0.0))
            limit = info.limit(n)
            out[n] = min(value, limit) if limit is not None else value
        return out

    def sides(self, mine: QueueName, theirs: QueueName) -> tuple[QueueName, QueueName] | None:
        """The reclaimer's and the victim's ancestors just below their lowest
        common ancestor (the root when they share none); None in one branch."""
        up_mine, up_theirs = self.chain[mine][::-1], self.chain[theirs][::-1]
        for a, b in zip(up_mine, up_theirs, strict=False):
            if a != b:
                return a, b
        return None

    # -- (a) the gate ----------------------------------------------------------------
    def gate(self, queue: QueueName, need: Resource, preemptible: bool) -> str | None:
        names = names_of(need)
        fair = self.fair.get(queue, {})
        after = plus(self.use(queue), need)
        if not within(after, fair, names):
            n = next(n for n in names if after.get(n, 0.0) > fair.get(n, 0.0) + _EPS)
            return (f"queue {queue} would go over its fair share of {n} by reclaiming "
                    f"({format_amount(n, after[n])}/{format_amount(n, fair.get(n, 0.0))})")
        if not preemptible:
            pinned = plus(self.pinned(queue), need)
            if not within(pinned, self.quota(queue), names):
                return f"queue {queue} would go over its quota for non-preemptible jobs"
        return None

    # -- (e) the victim side and saturation ------------------------------------------------
    def fair_reclaim(self, mine: QueueName, need: Resource, preemptible: bool,
                     chunks: Sequence[tuple[QueueName, Resource]]) -> str | None:
        names = names_of(need)
        remaining: dict[QueueName, dict[str, float]] = {}
        for theirs, amount in chunks:
            sides = self.sides(mine, theirs)
            if sides is None:
                return f"queue {theirs} is on the reclaimer's own branch"
            r, v = sides
            rem = remaining.setdefault(v, dict(self.use(v)))
            relaxed = within(plus(self.use(r), need), self.quota(r), names) \
                and over(rem, self.quota(v), names)
            if not (over(rem, self.allocatable(v, names), names) or relaxed):
                return (f"queue {v} would not stay over its fair share or quota "
                        f"once its pods are reclaimed")
            for q in self.chain[theirs]:
                remaining[q] = plus(remaining[q] if q in remaining else self.use(q), amount, -1.0)
        for a in self.chain[mine]:
            if self.parent[a] == ROOT and self.tops <= 1:
                break
            before = plus(self.use(a), need)
            if over(before, self.fair.get(a, {}), names):
                after = plus(remaining[a] if a in remaining else self.use(a), need)
                mine_sat = saturation(after, self.fair.get(a, {}), names)
                for s in self._victim_siblings(a, remaining):
                    if mine_sat >= saturation(remaining[s], self.fair.get(s, {}), names) - _EPS:
                        return (f"queue {a} would be at least as saturated as queue {s} "
                                f"after the reclaim")
            if not preemptible and not within(plus(self.pinned(a), need), self.quota(a),
                                               [n for n in names if a == mine
                                                or self.queues[a].quota.get(n) > 0]):
                return f"queue {a} would go over its quota for non-preemptible jobs"
        return None

    def _victim_siblings(self, queue: QueueName,
                         remaining: Mapping[QueueName, Amounts]) -> list[QueueName]:
        return sorted(s for s in remaining if s != queue and self.parent.get(s) == self.parent[queue])

    # -- (c) which queue gives first ---------------------------------------------------------
    def victim_key(self, queue: QueueName, taken: Amounts, need: Resource) -> tuple[Any, ...]:
        """Over FS in every resource first, then over quota, then lower
        priority, then the highest saturation after what was taken, then the
        newer queue."""
        names = names_of(need) or [n for n in self.fair.get(queue, {}) if n != PODS]
        rem = {n: self.use(queue).get(n, 0.0) - taken.get(n, 0.0) for n in names}
        fair = self.fair.get(queue, {})
        info = self.queues[queue]
        all_over = bool(names) and all(rem[n] > fair.get(n, 0.0) + _EPS for n in names)
        return (not all_over, not over(rem, self.quota(queue), names), info.priority,
                -saturation(rem, fair, names), -info.creation, queue)
