"""The bundled consolidation example shows what it claims: notebooks and
inference servers leave 32 GPUs free but no node whole; the training gang
waits hours for whole nodes without consolidation, and starts at once with
it, the moved pods started again on the room held for them; the report says
what moved and the wait it saved, told against a run without it."""
from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from kaisched.builtins.catalog import register_builtins
from kaisched.cli import main
from kaisched.framework import parse_config
from kaisched.sim.scenario import load_scenario
from tests.builders.sim import both_ways, compared, job_of

EXAMPLES = Path(__file__).resolve().parents[2] / "kaisched" / "examples"


@pytest.fixture(scope="module")
def compare() -> list[dict]:
    return compared("consolidation", "consolidation-on")


def test_the_gang_starts_at_once_only_with_consolidation(compare: list[dict]) -> None:
    without, with_ = compare
    assert without["config"] == "built-in" and with_["config"] == "consolidation-on"
    slow, fast = job_of(without, "research/pretrain"), job_of(with_, "research/pretrain")
    assert slow["firstWait"] > 2 * 3600            # until the notebooks end
    assert fast["firstWait"] < 60 and fast["placedWhole"]
    assert with_["cluster"]["gpuUtilisation"] > without["cluster"]["gpuUtilisation"] + 0.1
    # the notebooks and inference servers of four nodes moved, into the other four
    assert (without["evictions"].get("consolidation", 0), with_["evictions"]["consolidation"]) == (0, 12)
    assert {e["byJob"] for e in with_["evictions"]["events"]} == {"research/pretrain"}
    assert all(j["state"] == "succeeded" for r in compare for j in r["jobs"])


def test_the_report_tells_the_moves_and_the_wait_saved(compare: list[dict]) -> None:
    without, with_ = compare
    section = with_["consolidation"]
    assert "consolidation" not in without
    assert (section["podsMoved"], section["jobsMoved"]) == (12, 12)
    [helped] = section["madeRoomFor"]
    assert helped["job"] == "research/pretrain"
    assert helped["firstWaitWithout"] == job_of(without, "research/pretrain")["firstWait"]
    assert helped["waitSaved"] == helped["firstWaitWithout"] - helped["firstWait"] > 2 * 3600
    assert section["waitSaved"] == helped["waitSaved"]
    # the moved jobs started again: each waited its Job controller's new pod
    moved = {e["job"] for e in with_["evictions"]["events"]}
    assert all(job_of(with_, name)["starts"] == 2 for name in moved)
    assert section["movedWaitAdded"] == sum(job_of(with_, n)["wait"] - job_of(without, n)["wait"]
                                            for n in moved)


def test_a_run_alone_is_told_against_one_without_consolidation() -> None:
    result = CliRunner().invoke(main, ["simulate", "consolidation", "--config", "consolidation-on"])
    assert result.exit_code == 0, result.stderr
    assert "run again without consolidation, for the wait it saved" in result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("consolidation: moved"))
    assert "12 pod(s) of 12 job(s) to make room for 1 job(s)" in line
    assert "shorter than without consolidation" in line


def test_skipping_quiet_ticks_changes_nothing_with_consolidation() -> None:
    """The room held for moved pods is carried like a hold, and a moved job's
    cooldown is a timer: jumping over quiet ticks decides as every period does."""
    scenario = load_scenario(EXAMPLES / "consolidation.yaml", None)
    config = parse_config((EXAMPLES / "consolidation-on.yaml").read_text(), register_builtins())
    jumping, every = both_ways(scenario, config)
    assert jumping == every


@pytest.mark.parametrize("scenario", ["consolidation", "consolidation-fractions"])
def test_the_compare_in_the_docs_is_this_run(scenario: str) -> None:
    """docs/scheduling.md shows the compare's text as a pipe gets it: it is
    what the run gives today."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "scheduling.md").read_text()
    section = page[page.index("## Consolidation"):]
    shown = section[section.index(f"```\n{scenario}: "):].split("```")[1].strip("\n")
    result = CliRunner().invoke(main, ["simulate", scenario, "--compare", "consolidation-on"])
    assert result.exit_code == 0, result.stderr
    ran = "\n".join(line.rstrip() for line in result.stdout.rstrip().splitlines())
    assert shown == ran


def test_fractions_are_repacked_onto_fewer_gpus_for_the_gang() -> None:
    """consolidation-fractions: every GPU half used by a long-lived share once
    the evaluations end, none whole. With consolidation the shares of two
    nodes move onto the half-used GPUs of the other two, and the gang starts
    at once; the shares then sit on fewer, fuller GPUs."""
    result = CliRunner().invoke(main, ["simulate", "consolidation-fractions", "--compare",
                                       "consolidation-on", "--output", "json"])
    assert result.exit_code == 0, result.stderr
    without, with_ = orjson.loads(result.stdout)["compare"]
    slow, fast = job_of(without, "research/pretrain"), job_of(with_, "research/pretrain")
    assert slow["firstWait"] > 2 * 3600 and fast["firstWait"] < 60
    assert with_["evictions"]["consolidation"] == 16        # the eight shares of two nodes
    moved = {e["job"] for e in with_["evictions"]["events"]}
    assert all(job_of(with_, name)["gpuShare"] is not None for name in moved)
    assert with_["sharedGpus"]["avg"] < without["sharedGpus"]["avg"]
    assert with_["sharedGpus"]["fill"] > without["sharedGpus"]["fill"]
    assert all(j["state"] == "succeeded" for r in (without, with_) for j in r["jobs"])
