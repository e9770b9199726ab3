"""The promises checked after every session of a simulation, failing loudly
with the moment and the objects involved:

- no node holds more than it has (Releasing pods still hold their room);
- no GPU is shared beyond its whole (nor its memory: a gpu-memory share is its
  part of the GPU's memory);
- no queue (with everything under it) uses more than its limit;
- no Strict gang is left partly running by what a session did: a gang that
  got binds, or lost pods to evictions, has none or at least its minimum
  (and every subgroup's) alive afterwards.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from kaisched.api.resource import format_amount
from kaisched.api.types import JobKey, PodKey
from kaisched.errors import KaischedError
from kaisched.sim.meter import Meter
from kaisched.sim.timeline import hms

_EPS = 1e-6
_LISTED = 6       # objects named in a message, at most


class InvariantViolation(KaischedError):
    """A promise of the scheduler was broken during a simulation."""


class Invariants:
    def __init__(self, meter: Meter, limits: Mapping[str, Mapping[str, float]],
                 parents: Mapping[str, str | None]) -> None:
        self.meter = meter
        self.limits = {q: dict(v) for q, v in limits.items() if v}
        self.parents = dict(parents)
        self.checks = 0

    def check(self, elapsed: float, session: int, bound: Iterable[PodKey],
              evicted: Iterable[PodKey]) -> None:
        """After a session: raise InvariantViolation naming the first broken promise."""
        self.meter.update()
        when = f"at {hms(elapsed)} (session {session})"
        self._nodes(when)
        self._queues(when)
        touched: dict[JobKey, str] = {}
        for verb, pods in (("bound", bound), ("evicted", evicted)):
            for pod in pods:
                use = self.meter.pods.get(pod)
                if use is not None and use.job is not None:
                    touched.setdefault(use.job, verb)
        self._gangs(when, touched)
        self.checks += 1

    def _nodes(self, when: str) -> None:
        meter = self.meter
        for (node, group), fill in sorted(meter.gpu_fill.items()):
            if node in meter.dirty_nodes and fill > 1.0 + _EPS:
                pods = sorted(k for k, u in meter.pods.items()
                              if u.node == node and u.on_node and group in u.groups)
                raise InvariantViolation(
                    f"invariant broken {when}: GPU {group} of node {node} shared beyond its "
                    f"whole: {fill:.3g} taken (pods: {_names(pods)})")
        for node in sorted(meter.dirty_nodes):
            alloc, used = meter.allocatable.get(node, {}), meter.node_used[node]
            for name, amount in sorted(used.items()):
                if amount > alloc.get(name, 0.0) + _EPS:
                    pods = sorted(k for k, u in meter.pods.items() if u.node == node and u.on_node)
                    raise InvariantViolation(
                        f"invariant broken {when}: node {node} over-committed in {name}: "
                        f"{format_amount(name, amount)} used of {format_amount(name, alloc.get(name, 0.0))} "
                        f"(pods: {_names(pods)})")
        meter.dirty_nodes.clear()

    def _queues(self, when: str) -> None:
        if not self.limits:
            return
        totals: dict[str, dict[str, float]] = {}
        for queue, used in self.meter.queue_used.items():
            name: str | None = queue
            seen: set[str] = set()
            while name is not None and name not in seen:      # the queue and its ancestors
                seen.add(name)
                row = totals.setdefault(name, {})
                for res, amount in used.items():
                    row[res] = row.get(res, 0.0) + amount
                name = self.parents.get(name)
        for queue, limits in sorted(self.limits.items()):
            for res, limit in sorted(limits.items()):
                amount = totals.get(queue, {}).get(res, 0.0)
                if amount > limit + _EPS:
                    under = {q for q in self.parents if self._under(q, queue)}
                    pods = sorted(k for k, u in self.meter.pods.items()
                                  if u.counted and u.queue in under and dict(u.request).get(res))
                    raise InvariantViolation(
                        f"invariant broken {when}: queue {queue} over its limit in {res}: "
                        f"{format_amount(res, amount)} used, limit {format_amount(res, limit)} "
                        f"(pods: {_names(pods)})")

    def _under(self, queue: str, top: str) -> bool:
        name: str | None = queue
        seen: set[str] = set()
        while name is not None and name not in seen:
            if name == top:
                return True
            seen.add(name)
            name = self.parents.get(name)
        return False

    def _gangs(self, when: str, touched: Mapping[JobKey, str]) -> None:
        meter = self.meter
        for job, verb in sorted(touched.items()):
            gang = meter.gangs.get(job)
            if gang is None or not gang.strict:
                continue
            alive = meter.alive.get(job, 0)
            if alive == 0:
                continue
            short = []
            if alive < gang.min_member:
                short.append(f"{alive}/{gang.min_member} pods alive")
            if gang.tree is not None:
                have = {leaf: meter.alive_in.get((job, leaf), 0) for leaf in gang.tree.leaves}
                if not gang.tree.met(have):
                    short.append(gang.tree.shortfall(have))
            if short:
                pods = sorted(k for k, u in meter.pods.items() if u.job == job and u.alive)
                raise InvariantViolation(
                    f"invariant broken {when}: Strict gang {job} left partly running after pods "
                    f"were {verb}: {', '.join(short)} (alive: {_names(pods)})")


def _names(keys: Sequence[str]) -> str:
    shown = ", ".join(keys[:_LISTED])
    return shown + (f" and {len(keys) - _LISTED} more" if len(keys) > _LISTED else "")
