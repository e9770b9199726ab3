"""The plot, checked from its data: the job timeline's lanes and marks, three
panels on one time axis, legends beside the data, the file type from the
extension, titles in words, and a bad path said before the run."""
from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner
from matplotlib.figure import Figure

from kaisched.builtins.catalog import register_builtins
from kaisched.cli import main
from kaisched.framework import SchedulerConfig, parse_config
from kaisched.sim.lanes import lanes
from kaisched.sim.plot import STATE_COLOURS, config_words, draw, h_mm, tick_step
from kaisched.sim.runner import bundled
from kaisched.sim.scenario import load_scenario
from kaisched.sim.simulation import SimResult, Simulation

MAGIC = {".png": b"\x89PNG", ".svg": b"<?xml", ".pdf": b"%PDF"}


@pytest.fixture(scope="module")
def demo(config: SchedulerConfig) -> SimResult:
    return Simulation(load_scenario(bundled()), config).run()


def test_the_timeline_has_a_lane_per_job_with_each_state(demo: SimResult) -> None:
    shown, total = lanes(demo)
    assert total == len(shown) == 6
    by_job = {lane.job: lane for lane in shown}
    resnet = by_job["team-a/resnet"]
    assert [s for _, _, s in resnet.segments] == ["running", "evicted", "waiting again", "running"]
    assert resnet.segments[1][0] == 300.0 and resnet.segments[2][1] == 2111.0
    # The reclaim that evicted it is marked, naming the reclaiming gang.
    assert resnet.marks == ((300.0, "reclaim", "reclaim by team-b/llama (2 pods)"),)
    eval_ = by_job["team-b/eval"]
    assert [s for _, _, s in eval_.segments] == ["waiting", "running"]
    assert eval_.segments[0] == (480.0, 2111.0, "waiting")


def test_the_figure_draws_that_data(demo: SimResult, tmp_path: Path) -> None:
    fig: Figure = draw([("built-in", demo)], tmp_path / "demo.png")
    top, middle, bottom = fig.axes[:3]
    for ax in (top, middle):
        assert ax.get_shared_x_axes().joined(ax, bottom)
    assert [t.get_text() for t in bottom.get_yticklabels()][-1] == "team-a/allreduce"
    # Bars of the lanes: one per segment, coloured by state.
    bars = [c for c in bottom.collections if c.__class__.__name__ == "BrokenBarHCollection"
            or c.__class__.__name__ == "PolyCollection"]
    segments = sum(len(lane.segments) for lane in lanes(demo)[0])
    assert len(bars) == segments
    labels = [t.get_text() for t in bottom.texts]
    assert "reclaim by team-b/llama (2 pods) at 0:05:00" in labels
    assert top.get_title(loc="left") == "demo — the built-in config"
    # Legends sit beside the panels: none overlaps its panel's area.
    renderer = fig.canvas.get_renderer()
    for ax in (top, middle, bottom):
        legend = ax.get_legend().get_window_extent(renderer)
        assert legend.x0 >= ax.get_window_extent(renderer).x1
    assert {tuple(round(c, 3) for c in p.get_facecolor()) for p in bottom.get_legend().get_patches()}


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_the_file_type_follows_the_extension(demo: SimResult, tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"plot{suffix}"
    draw([("built-in", demo)], path)
    assert path.read_bytes().startswith(MAGIC[suffix])


def test_titles_say_the_config_in_words(tmp_path: Path) -> None:
    registry = register_builtins()
    assert config_words(parse_config("starvationThreshold: 10m\n", registry)) == \
        "the built-in config"
    assert config_words(parse_config("starvationThreshold: 20m\n", registry)) == \
        "starvationThreshold 20m"
    assert config_words(parse_config("actions: [allocate, backfill]\n", registry)) == \
        "actions allocate, backfill"


@pytest.mark.parametrize("target, words", [("missing/dir/plot.png", "no directory"),
                                           ("plot.jpg", "the file type follows the extension")])
def test_a_bad_plot_path_is_one_line_before_the_run(tmp_path: Path, target: str,
                                                    words: str) -> None:
    result = CliRunner().invoke(main, ["simulate", "--plot", str(tmp_path / target)])
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --plot") and words in lines[0]
    assert result.stdout == ""          # nothing ran


def test_state_colours_cover_every_state() -> None:
    assert set(STATE_COLOURS) == {"waiting", "running", "evicted", "waiting again"}


def test_fair_share_is_drawn_over_use_and_starts_are_legible(demo: SimResult, tmp_path: Path) -> None:
    fig = draw([("built-in", demo)], tmp_path / "demo.png")
    middle = fig.axes[1]
    lines = {line.get_label(): line for line in middle.get_lines()}
    for queue in ("team-a", "team-b"):
        fair, used = lines[f"{queue} fair share"], lines[f"{queue} in use"]
        assert fair.get_zorder() > used.get_zorder()        # on top where they agree
        assert fair.get_linestyle() != used.get_linestyle() and fair.get_alpha() is None
        assert used.get_alpha() is not None and used.get_alpha() < 1
    starts = [c for c in middle.collections if c.get_label().endswith("a job starts")]
    assert len(starts) == 2
    for marks in starts:
        assert min(marks.get_sizes()) >= 50 and marks.get_zorder() > 3
        assert max(marks.get_offsets()[:, 1]) < 0           # a strip of their own, below zero
    assert all(t >= 0 for t in middle.get_yticks())


def test_time_axes_read_h_mm(demo: SimResult, tmp_path: Path) -> None:
    fig = draw([("built-in", demo)], tmp_path / "demo.png")
    fig.canvas.draw()
    bottom = fig.axes[2]
    labels = [t.get_text() for t in bottom.get_xticklabels() if t.get_text()]
    assert labels and all(re.fullmatch(r"\d+:\d\d", label) for label in labels), labels
    assert "0:10" in labels and "1:20" in labels
    assert bottom.get_xlabel() == "virtual time (h:mm)"


@pytest.mark.parametrize("seconds,shown", [(0, "0:00"), (59, "0:01"), (600, "0:10"),
                                           (3600, "1:00"), (5112, "1:25"), (36000, "10:00")])
def test_h_mm(seconds: float, shown: str) -> None:
    assert h_mm(seconds) == shown


@pytest.mark.parametrize("end,step", [(300, 60), (5112, 600), (4 * 3600, 1800),
                                      (12 * 3600, 7200), (30 * 86400, 259200)])
def test_ticks_are_easy_to_count(end: float, step: int) -> None:
    assert tick_step(end) == step and end / step <= 10


def test_compared_runs_share_one_time_range(demo: SimResult, tmp_path: Path) -> None:
    """A run that ends sooner is drawn on the longer one's range, side by side."""
    short = attrs.evolve(demo, end=demo.end / 2)
    fig = draw([("built-in", demo), ("other", short)], tmp_path / "cmp.png")
    panels = fig.axes[:6]
    ranges = {tuple(round(x, 3) for x in ax.get_xlim()) for ax in panels}
    assert len(ranges) == 1
    (low, high), = ranges
    assert low <= 0 and high >= demo.end
