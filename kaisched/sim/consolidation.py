"""What consolidation did in a run: the pods it moved, the jobs it moved them
for, and the wait it saved them, told against the same scenario run without
consolidation (the baseline). Read from the evictions' causes and the jobs'
waits, as every other figure of the report."""
from __future__ import annotations

from typing import Any, Sequence

import attrs

from kaisched.framework import SchedulerConfig
from kaisched.sim.timeline import hms

ACTION = "consolidation"


def consolidating(config: SchedulerConfig) -> bool:
    return ACTION in config.actions


def without(config: SchedulerConfig) -> SchedulerConfig:
    """The config with consolidation left out: what its wait saved is told against."""
    return attrs.evolve(config, actions=tuple(a for a in config.actions if a != ACTION))


def figures(evictions: Sequence[Any], jobs: Sequence[dict[str, Any]],
            baseline: Sequence[dict[str, Any]] | None) -> dict[str, Any]:
    """The pods moved, the jobs moved, and per job made room for its first
    wait (and, with a baseline, that wait without consolidation and what was
    saved); the moved jobs' waits against the baseline's."""
    moves = [e for e in evictions if e.cause == ACTION]
    by_name = {j["name"]: j for j in jobs}
    before = {j["name"]: j for j in baseline} if baseline is not None else None
    helped = sorted({e.by_job for e in moves if e.by_job})
    moved = sorted({e.job for e in moves if e.job})
    made_room = []
    for name in helped:
        job = by_name.get(name, {})
        row = {"job": name, "firstWait": job.get("firstWait")}
        if before is not None:
            other = before.get(name, {}).get("firstWait")
            row["firstWaitWithout"] = other
            row["waitSaved"] = _less(other, row["firstWait"])
        made_room.append(row)
    out: dict[str, Any] = {"podsMoved": len(moves), "jobsMoved": len(moved), "madeRoomFor": made_room}
    if before is not None:
        out["waitSaved"] = _total(r["waitSaved"] for r in made_room)
        out["movedWaitAdded"] = _total(_less(by_name.get(n, {}).get("wait"), before.get(n, {}).get("wait"))
                                       for n in moved)
    return out


def lines(section: dict[str, Any]) -> list[str]:
    """The section in words, for the text report."""
    jobs = section["madeRoomFor"]
    if not section["podsMoved"]:
        return ["consolidation: moved no pod"]
    head = (f"consolidation: moved {section['podsMoved']} pod(s) of {section['jobsMoved']} job(s) "
            f"to make room for {len(jobs)} job(s)")
    if "waitSaved" not in section:
        waited = ", ".join(f"{j['job']} waited {_t(j['firstWait'])}" for j in jobs)
        return [f"{head}: {waited}"]
    added = section["movedWaitAdded"]
    out = [f"{head}: their wait {_signed(section['waitSaved'])} than without consolidation; "
           f"the moved jobs waited {_signed(-added if added is not None else None)}"]
    out += [f"  {j['job']}: waited {_t(j['firstWait'])}, {_t(j['firstWaitWithout'])} without"
            for j in jobs]
    return out


def wait_saved(report: dict[str, Any]) -> str:
    """A compare cell: the wait saved the jobs made room for."""
    section = report.get(ACTION)
    if section is None:
        return "-"
    if section.get("waitSaved") is None:
        return f"{section['podsMoved']} pods moved"
    return f"{_t(section['waitSaved'])} for {len(section['madeRoomFor'])} job(s)"


def _less(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a - b, 1)


def _total(values: Any) -> float | None:
    found = [v for v in values if v is not None]
    return round(sum(found), 1) if found else None


def _t(seconds: float | None) -> str:
    return "-" if seconds is None else hms(seconds)


def _signed(saved: float | None) -> str:
    """A wait saved (positive) or added, in words."""
    if saved is None:
        return "unknown"
    return f"{hms(abs(saved))} shorter" if saved >= 0 else f"{hms(-saved)} longer"
