"""The bundled autoscaling example shows what it claims: scaled for pod by pod, the
fine-tuning gang gets the two nodes the group's max leaves, and they stand idle while it
waits; asked for whole, its request is answered Failed and nothing is bought for it, so
far fewer GPU-hours are bought idle, at the same gang waits. Skipping quiet ticks decides
as a session every period does, with nodes coming and going. (docs/simulate.md shows the
compare as it runs: tests/docs checks it.)"""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kaisched.builtins.catalog import register_builtins
from kaisched.cli import main
from kaisched.framework import parse_config
from kaisched.sim.scenario import parse_scenario
from tests.builders.sim import both_ways, compared, job_of

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "kaisched" / "examples"


@pytest.fixture(scope="module")
def compare() -> list[dict]:
    return compared("autoscaling", "autoscaling-on")


def test_asked_for_whole_fewer_gpu_hours_are_bought_idle(compare: list[dict]) -> None:
    pod_by_pod, whole = (r["autoscaler"] for r in compare)
    assert compare[0]["config"] == "built-in" and compare[1]["config"] == "autoscaling-on"
    # The two nodes bought for the fine-tuning gang's pods stand idle for hours.
    assert pod_by_pod["idleGpuHoursBought"] > 50 > 10 > whole["idleGpuHoursBought"]
    assert whole["cost"] < pod_by_pod["cost"]
    assert (pod_by_pod["requestsProvisioned"], pod_by_pod["requestsFailed"]) == (0, 0)
    assert whole["requestsProvisioned"] == 2        # the pretraining gang, the evaluation
    assert whole["requestsFailed"] > 0              # the fine-tuning gang: the max leaves too little
    for report in compare:
        assert all(j["state"] == "succeeded" for j in report["jobs"])
        assert job_of(report, "research/pretrain")["firstWait"] == pytest.approx(181, abs=2)
    # The fine-tuning gang starts when the pretraining ends, either way.
    assert job_of(compare[0], "research/finetune")["started"] == \
        job_of(compare[1], "research/finetune")["started"]


def test_the_report_says_what_the_autoscaler_did() -> None:
    result = CliRunner().invoke(main, ["simulate", "autoscaling", "--config", "autoscaling-on"])
    assert result.exit_code == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("autoscaler:"))
    assert "2 scale-up(s), 5 node(s) added" in line
    assert "ProvisioningRequests 2 provisioned" in line


@pytest.mark.parametrize("config", ["built-in", "autoscaling-on"])
def test_skipping_quiet_ticks_changes_nothing_with_an_autoscaler(config: str) -> None:
    # Past the pretraining's scale-up, the fine-tuning gang's failed requests, the
    # evaluation's node and its scale-down.
    scenario = parse_scenario("until: 1h50m\n" + (EXAMPLES / "autoscaling.yaml").read_text(),
                              "autoscaling.yaml")
    raw = (EXAMPLES / "autoscaling-on.yaml").read_text() if config != "built-in" else ""
    # A session every 10 s: every period is thousands of sessions still.
    parsed = parse_config(raw + "\nschedulePeriod: 10s\n", register_builtins())
    jumping, every = both_ways(scenario, parsed)
    assert jumping == every

