"""The picture of a simulation (matplotlib, Agg, no display needed): cluster
GPU and CPU utilisation over time with evictions marked, and per queue its
use against its fair share, with job starts marked. One column per run when
two configs are compared."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from kaisched.api.resource import CPU, GPU
from kaisched.sim.simulation import SimResult

_CAUSE_COLOURS = {"reclaim": "tab:red", "preempt": "tab:purple", "stale-gang": "tab:brown",
                  "other": "tab:gray"}


def draw(runs: Sequence[tuple[str, SimResult]], path: str | Path) -> None:
    fig = Figure(figsize=(10 * len(runs), 7), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, len(runs), sharex="col", squeeze=False)
    for col, (label, result) in enumerate(runs):
        _draw_run(axes[0][col], axes[1][col], label, result)
    fig.savefig(path, format="png")


def _draw_run(top, bottom, label: str, result: SimResult) -> None:  # type: ignore[no-untyped-def]
    tl = result.timeline
    hours = result.end > 3 * 3600
    scale, unit = (3600.0, "hours") if hours else (60.0, "minutes")
    times = np.array(tl.times + [result.end]) / scale
    for name, colour in ((GPU, "tab:green"), (CPU, "tab:blue")):
        capacity = result.capacity.get(name, 0.0)
        series = tl.used.get(name)
        if capacity and series:
            values = np.array(series + series[-1:]) / capacity * 100
            top.step(times, values, where="post", color=colour,
                     label=f"{'GPU' if name == GPU else 'CPU'} in use")
    for cause, colour in _CAUSE_COLOURS.items():
        at = sorted({e.at for e in tl.evictions if e.cause == cause})
        if at:
            top.scatter(np.array(at) / scale, [102] * len(at), marker="v", color=colour,
                        label=f"{cause} evictions", zorder=3)
    top.set_ylim(0, 108)
    top.set_ylabel("% of the cluster")
    top.set_title(f"{result.scenario.name} — {label}", loc="left")
    top.legend(loc="lower right", fontsize="small")
    res_label = "GPUs" if tl.resource == GPU else "cores"
    divisor = 1000.0 if tl.resource == CPU else 1.0
    colours = [f"C{i}" for i in range(10)]
    peak = 1.0
    for i, queue in enumerate(tl.queues):
        colour = colours[i % len(colours)]
        used = np.array(tl.queue_used.get(queue, []) + tl.queue_used.get(queue, [0.0])[-1:]) / divisor
        fair = np.array(tl.fair_share.get(queue, []) + tl.fair_share.get(queue, [0.0])[-1:]) / divisor
        bottom.step(times, fair, where="post", color=colour, linestyle="--", linewidth=3,
                    alpha=0.45, label=f"{queue} fair share")
        bottom.step(times, used, where="post", color=colour, label=f"{queue} in use")
        peak = max(peak, float(np.nanmax(used, initial=0)), float(np.nanmax(fair, initial=0)))
    for i, queue in enumerate(tl.queues):
        at = [s[0] / scale for s in tl.starts if s[1] == queue]
        if at:
            bottom.scatter(at, [-0.04 * peak] * len(at), marker="^",
                           color=colours[i % len(colours)], s=18, zorder=3)
    bottom.set_ylim(-0.08 * peak, peak * 1.1)
    bottom.set_ylabel(f"{res_label} (▲ a job starts)")
    bottom.set_xlabel(f"virtual time ({unit})")
    bottom.legend(loc="upper right", fontsize="small", ncol=2)
