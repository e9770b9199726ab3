"""What the comments of the bundled examples (kaisched/examples/) and the README say happens is what happens."""
from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from kaisched.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "kaisched" / "examples"


def run(name: str) -> dict:
    result = CliRunner().invoke(main, ["simulate", str(EXAMPLES / name), "--output", "json"])
    assert result.exit_code == 0, result.stderr
    return orjson.loads(result.stdout)


def test_preemption_example() -> None:
    report = run("preemption.yaml")
    jobs = {j["name"]: j for j in report["jobs"]}
    elastic, urgent = jobs["ml/elastic"], jobs["ml/urgent"]
    # The elastic job goes whole: one eviction of 4 pods, 4.8 GPU-hours lost.
    assert (elastic["evictions"], elastic["podsEvicted"]) == (1, 4)
    assert elastic["gpuHoursLost"] == pytest.approx(4.8, abs=0.01)
    # The urgent job starts whole 10 seconds later.
    assert urgent["placedWhole"] and urgent["started"] - urgent["submitted"] == 10.0
    # The elastic job waits until the urgent one ends, then runs at full size again.
    assert elastic["waits"] == [[1200.0, urgent["finished"]]]
    assert elastic["sizes"][-1][1:] == [4, 16.0]
    assert {j["state"] for j in report["jobs"]} == {"succeeded"}


def test_demo_example() -> None:
    report = run("demo.yaml")
    jobs = {j["name"]: j for j in report["jobs"]}
    # team-b reclaims: two of team-a's gangs evicted whole, llama starts whole after.
    events = report["evictions"]["events"]
    assert {(e["job"], e["pods"], e["byJob"]) for e in events} == {
        ("team-a/bert", 2, "team-b/llama"), ("team-a/resnet", 2, "team-b/llama")}
    assert jobs["team-b/llama"]["placedWhole"]
    # team-b's next gang waits, and so do team-a's evicted gangs, until room frees up.
    assert jobs["team-b/eval"]["wait"] > 0
    assert all(jobs[n]["starts"] == 2 and jobs[n]["waits"] for n in ("team-a/bert", "team-a/resnet"))


def test_what_the_readme_says_of_the_demo_figures() -> None:
    """Fair share follows use, but for the time a queue waits for room it is owed; a
    percentile is the wait of a real gang."""
    report = run("demo.yaml")
    queues = {q["name"]: q for q in report["queues"]}
    jobs = {j["name"]: j for j in report["jobs"]}
    assert queues["team-a"]["fairShareAvg"] == queues["team-a"]["usageAvg"]
    llama = jobs["team-b/llama"]
    owed = llama["gpus"] * llama["wait"] / report["virtualSeconds"]      # 16 GPUs for 10 s
    gap = queues["team-b"]["fairShareAvg"] - queues["team-b"]["usageAvg"]
    assert gap == pytest.approx(owed, abs=0.01) and gap > 0
    waits = sorted(j["wait"] for j in report["jobs"] if j["queue"] == "team-b")
    assert queues["team-b"]["waitP50"] == waits[0] and queues["team-b"]["waitP90"] == waits[1]
