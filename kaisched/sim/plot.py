"""The picture of a simulation (matplotlib, Agg, no display needed), one
column per run when two configs are compared, three panels sharing the time
axis: cluster GPU and CPU utilisation with evictions marked; per queue its use
against its fair share, with job starts marked; with usage memory on, a
fourth: each queue's usage over the window; and the job timeline, one lane
per job coloured by state (waiting, running, evicted, waiting again) with each
eviction marked and labelled by what took the pods. Legends sit beside the
panels, never on the data. The file type follows the extension.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator, MultipleLocator

from kaisched.api.resource import CPU, GPU
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.files import check_writable
from kaisched.errors import PathError
from kaisched.framework import SchedulerConfig, default_config
from kaisched.sim.lanes import STATES, Lane, lanes
from kaisched.sim.simulation import SimResult
from kaisched.sim.timeline import hms

FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
_CAUSE_COLOURS = {"reclaim": "tab:red", "preempt": "tab:purple", "stale-gang": "tab:brown",
                  "consolidation": "tab:cyan", "other": "tab:gray"}
STATE_COLOURS = {"waiting": "#f2c14e", "running": "#3a9d5d", "evicted": "#d1495b",
                 "waiting again": "#8e7dbe"}


def check_path(path: str | Path) -> str:
    """The format for the plot file, or a PathError before anything runs:
    an extension other than .png, .svg or .pdf, or a place it cannot be written."""
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise PathError(f"--plot {path}: the file type follows the extension: "
                         f"{', '.join(FORMATS)}")
    check_writable(path, "--plot")
    return fmt


def config_words(config: SchedulerConfig) -> str:
    """The config in words: what it changes from the built-in one."""
    base = default_config(register_builtins()).to_dict()
    mine = config.to_dict()
    changed = []
    for key, value in mine.items():
        if base.get(key) == value or key == "tiers":
            continue
        if key == "usageDBConfig":
            changed.append(_usage_words(value))
            continue
        shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        changed.append(f"{key} {_duration_words(shown)}")
    if mine.get("tiers") != base.get("tiers"):
        changed.append("its own plugin tiers")
    return "; ".join(changed) if changed else "the built-in config"


def _usage_words(usage: dict[str, Any]) -> str:
    params = usage.get("usageParams", {})
    words = [f"usage memory ({usage.get('clientType')}", f"{params.get('windowType')} window "
             f"{_duration_words(str(params.get('windowSize')))}"]
    if params.get("halfLifePeriod"):
        words.append(f"half-life {_duration_words(str(params['halfLifePeriod']))}")
    return ", ".join(words) + ")"


def _duration_words(text: str) -> str:
    """600s -> 10m, as people write durations."""
    if text.endswith("s") and text[:-1].isdigit():
        seconds = int(text[:-1])
        if seconds and seconds % 3600 == 0:
            return f"{seconds // 3600}h"
        if seconds and seconds % 60 == 0:
            return f"{seconds // 60}m"
    return text


def draw(runs: Sequence[tuple[str, SimResult]], path: str | Path) -> Figure:
    fmt = check_path(path)
    panels = [lanes(result) for _, result in runs]
    rows = max(len(p[0]) for p in panels)
    lane_height = max(2.0, 0.28 * rows + 0.8)
    # With usage memory on in any run, a panel of each queue's usage over the window.
    usage = any(result.timeline.usage for _, result in runs)
    ratios = [3, 3, 2, lane_height] if usage else [3, 3, lane_height]
    fig = Figure(figsize=(12 * len(runs), 7 + 2 * usage + lane_height), dpi=100,
                 layout="constrained")
    FigureCanvasAgg(fig)
    # One time axis for every panel of every column: compared runs read side by side.
    axes = fig.subplots(len(ratios), len(runs), sharex=True, squeeze=False,
                        gridspec_kw={"height_ratios": ratios})
    for col, (_, result) in enumerate(runs):
        _draw_run(axes[0][col], axes[1][col], axes[-1][col], result, *panels[col])
        if usage:
            _draw_usage(axes[2][col], result)
    end = max(result.end for _, result in runs)
    axes[0][0].set_xlim(-0.01 * end, end * 1.01)
    for ax in axes.flat:
        ax.xaxis.set_major_locator(MultipleLocator(tick_step(end)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: h_mm(x) if x >= 0 else ""))
    fig.savefig(path, format=fmt)
    return fig


# Tick spacings a reader counts in easily, in seconds: minutes, quarter hours, hours, days.
_STEPS = (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def tick_step(end: float, most: int = 10) -> int:
    """The smallest easy spacing that puts at most `most` ticks on [0, end]."""
    return next((s for s in _STEPS if end / s <= most), 86400 * math.ceil(end / 86400 / most))


def h_mm(seconds: float) -> str:
    """Virtual time as the tables show it, to the minute: 1:05 is an hour and five minutes."""
    minutes = int(round(seconds / 60))
    sign = "-" if minutes < 0 else ""
    return f"{sign}{abs(minutes) // 60}:{abs(minutes) % 60:02d}"


def _draw_usage(ax: Any, result: SimResult) -> None:
    """Each queue's usage over the window, as its status said (fair share with memory)."""
    tl = result.timeline
    scale = 3600.0 if result.end > 3 * 3600 else 60.0
    times = np.array(tl.times + [result.end]) / scale
    for i, queue in enumerate(tl.queues):
        series = tl.usage.get(queue)
        if series:
            ax.step(times, np.array(series + series[-1:]), where="post", color=f"C{i % 10}",
                    label=f"{queue} usage")
    if not tl.usage:
        ax.text(0.5, 0.5, "usage memory off (no usageDBConfig)", transform=ax.transAxes,
                ha="center", va="center", color="gray")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(f"usage ({'GPU' if tl.resource == GPU else 'CPU'}-time\nover what was offered)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", borderaxespad=0) \
        if tl.usage else None


def _draw_run(top: Any, middle: Any, bottom: Any, result: SimResult, shown: list[Lane],
              total: int) -> None:
    tl = result.timeline
    scale = 1.0         # seconds on every axis; the ticks read h:mm
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
    top.set_title(f"{result.scenario.name} — {config_words(result.config)}", loc="left")
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", borderaxespad=0)

    res_label = "GPUs" if tl.resource == GPU else "cores"
    divisor = 1000.0 if tl.resource == CPU else 1.0
    colours = [f"C{i}" for i in range(10)]
    peak = 1.0
    for i, queue in enumerate(tl.queues):
        colour = colours[i % len(colours)]
        used = np.array(tl.queue_used.get(queue, []) + tl.queue_used.get(queue, [0.0])[-1:]) / divisor
        fair = np.array(tl.fair_share.get(queue, []) + tl.fair_share.get(queue, [0.0])[-1:]) / divisor
        # Use is a shaded area under a pale line; the fair share a dark dashed line drawn over
        # it, so where the two agree (most of the time) the fair share still shows.
        middle.fill_between(times, used, step="post", color=colour, alpha=0.18, linewidth=0,
                            zorder=1)
        middle.step(times, used, where="post", color=colour, linewidth=2.5, alpha=0.55,
                    label=f"{queue} in use", zorder=2)
        middle.step(times, fair, where="post", color=colour, linestyle=(0, (4, 2)),
                    linewidth=1.6, label=f"{queue} fair share", zorder=3)
        peak = max(peak, float(np.nanmax(used, initial=0)), float(np.nanmax(fair, initial=0)))
    for i, queue in enumerate(tl.queues):
        at = [s[0] / scale for s in tl.starts if s[1] == queue]
        if at:      # in a strip of their own below zero, one row per queue
            middle.scatter(at, [-(0.06 + 0.06 * i) * peak] * len(at), marker="^", s=70,
                           color=colours[i % len(colours)], edgecolor="black", linewidth=0.6,
                           zorder=4, label=f"{queue}: a job starts")
    middle.axhline(0, color="0.6", linewidth=0.8, zorder=0)
    middle.set_ylim(-(0.06 * len(tl.queues) + 0.06) * peak, peak * 1.1)
    middle.yaxis.set_major_locator(MaxNLocator(nbins=6, integer=True, min_n_ticks=3))
    middle.set_yticks([t for t in middle.get_yticks() if 0 <= t <= peak * 1.1])
    middle.set_ylabel(res_label)
    middle.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small",
                  borderaxespad=0)

    _draw_lanes(bottom, shown, total, scale)
    bottom.set_xlabel("virtual time (h:mm)")


def _draw_lanes(ax: Any, shown: list[Lane], total: int, scale: float) -> None:
    """One lane per job, top to bottom in arrival order; evictions marked ✕ and labelled."""
    for row, lane in enumerate(shown):
        y = len(shown) - 1 - row
        for start, end, state in lane.segments:
            width = max(end - start, 0.0) / scale
            ax.broken_barh([(start / scale, width)], (y - 0.35, 0.7),
                           facecolors=STATE_COLOURS[state], edgecolor="none")
        for at, cause, label in lane.marks:
            ax.scatter([at / scale], [y], marker="X", s=60, color=_CAUSE_COLOURS.get(cause, "k"),
                       edgecolor="white", linewidth=0.5, zorder=4)
            ax.annotate(f"{label} at {hms(at)}", (at / scale, y), xytext=(6, 4),
                        textcoords="offset points", fontsize="x-small", zorder=5,
                        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                              "alpha": 0.8})
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels([lane.job for lane in reversed(shown)], fontsize="small")
    ax.set_ylim(-0.7, max(len(shown), 1) - 0.3)
    title = "jobs" if total == len(shown) else \
        f"jobs ({len(shown)} of {total}: the longest waits, weighted by GPUs)"
    ax.set_title(title, loc="left", fontsize="medium")
    handles = [Patch(facecolor=STATE_COLOURS[s], label=s) for s in STATES]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small",
              borderaxespad=0, title="state")
