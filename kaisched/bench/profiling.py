"""A profile of what a bench measures, as a few lines of its figures."""
from __future__ import annotations

import contextlib
import cProfile
import pstats
from typing import Any, Iterator


@contextlib.contextmanager
def profiled(top: int, figures: dict[str, Any]) -> Iterator[None]:
    """Profile what runs inside (when top > 0) and put its top entries, by own
    time, in figures["profile"]: "seconds calls function" lines. Timings taken
    inside are then the profiler's, slower than without it."""
    if top <= 0:
        yield
        return
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
    stats = pstats.Stats(profiler)
    rows = sorted(stats.stats.items(), key=lambda item: -item[1][2])[:top]     # type: ignore[attr-defined]  # not in typeshed
    figures["profile"] = [f"{tottime:.3f} s {calls} {_where(func)}"
                          for func, (_, calls, tottime, _, _) in rows]


def _where(func: tuple[str, int, str]) -> str:
    path, line, name = func
    if path == "~":
        return name             # a built-in
    path = path.replace("\\", "/")
    for root in ("kaisched/", "plugins/", "actions/", "podgrouper/"):
        at = path.rfind("/" + root)
        if at >= 0:
            return f"{path[at + 1:]}:{line}({name})"
    return f"{path.rsplit('/', 1)[-1]}:{line}({name})"
