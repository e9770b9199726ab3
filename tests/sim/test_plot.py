"""The plot, checked from its data: the job timeline's lanes and marks, three
panels on one time axis, legends beside the data, the file type from the
extension, titles in words, and a bad path said before the run."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from matplotlib.figure import Figure

from kaisched.catalog import register_builtins
from kaisched.cli import main
from kaisched.framework import SchedulerConfig, parse_config
from kaisched.sim.lanes import lanes
from kaisched.sim.plot import STATE_COLOURS, config_words, draw
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
