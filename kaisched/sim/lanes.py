"""The job timeline of a simulation: one lane per job, its stretches of time
by state (waiting, running, evicted, waiting again) and its evictions marked
with what took its pods ("reclaim by team-b/llama").

Plain data, drawn by plot.py and read by the tests as they are.
"""
from __future__ import annotations

import attrs

from kaisched.api.resource import GPU
from kaisched.sim.simulation import SimResult

# The most lanes a plot shows: beyond that, the jobs whose waits held the most
# GPUs (time waited times GPUs asked for).
MAX_LANES = 40
STATES = ("waiting", "running", "evicted", "waiting again")


@attrs.frozen
class Lane:
    job: str
    queue: str
    gpus: float
    segments: tuple[tuple[float, float, str], ...]   # start, end, one of STATES
    marks: tuple[tuple[float, str, str], ...]        # at, cause, label

    @property
    def waited(self) -> float:
        return sum(b - a for a, b, s in self.segments if s != "running")


def lanes(result: SimResult, limit: int = MAX_LANES) -> tuple[list[Lane], int]:
    """The lanes to draw, in arrival order, and how many jobs there are in all."""
    evictions: dict[str, dict[tuple[float, str, str], int]] = {}
    for e in result.timeline.evictions:
        by = f"{e.cause} by {e.by_job}" if e.by_job else e.cause
        key = (e.at, e.cause, by)
        evictions.setdefault(e.job, {})[key] = evictions.setdefault(e.job, {}).get(key, 0) + 1
    out = []
    for run in result.runs:
        if not run.history:
            continue
        name = f"{run.spec.namespace}/{run.spec.name}"
        segments = []
        evicted = False
        for i, (at, state) in enumerate(run.history):
            if state == "done":
                break
            until = run.history[i + 1][0] if i + 1 < len(run.history) else result.end
            evicted = evicted or state == "evicted"
            shown = "waiting again" if state == "waiting" and evicted else state
            if until > at or state == "evicted":
                segments.append((at, max(until, at), shown))
        marks = tuple((at, cause, f"{by} ({pods} pod{'s' if pods > 1 else ''})")
                      for (at, cause, by), pods in sorted(evictions.get(name, {}).items()))
        out.append(Lane(name, run.spec.queue, run.spec.total(GPU), tuple(segments), marks))
    total = len(out)
    if total > limit:
        # The jobs that kept the most waiting: wait weighted by size (GPUs, else one).
        keep = {id(lane) for lane in sorted(out, key=lambda ln: (-ln.waited * max(ln.gpus, 1.0),
                                                                ln.job))[:limit]}
        out = [lane for lane in out if id(lane) in keep]
    return out, total
