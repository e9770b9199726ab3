"""`kaisched explain` on a job that may not evict yet: the running jobs it
could evict but for their min-runtime, until when; and its own preemption
delay, in its condition. Run on the scenario files that show each rule."""
from __future__ import annotations

from click.testing import CliRunner

from kaisched.cli import main
from tests.builders import SCENARIOS


def explain(scenario: str, name: str) -> str:
    result = CliRunner().invoke(main, ["explain", name, "--snapshot", str(SCENARIOS / scenario)])
    assert result.exit_code == 0, result.output
    return result.output


def test_explain_names_the_jobs_protected_by_their_min_runtime() -> None:
    out = explain("minruntime-reclaim-lca.yaml", "default/tb")
    assert "running jobs it may not evict yet:" in out
    assert "(reclaim from queue team-a): protected until 00:30 (min-runtime 1h)" in out


def test_explain_says_when_the_preemption_delay_lets_a_job_evict() -> None:
    out = explain("preemption-delay-waits.yaml", "default/urgent")
    assert "waiting:" in out and "may preempt from 00:03 (preemptionDelay 5m)" in out
    assert "running jobs it may not evict yet" not in out      # no min-runtime configured
