"""The bundled fair-share-memory example shows what it claims: run with
--compare (usage memory off, then on), the steady team waits less with it,
the report shows each queue's usage over time (JSON and the text table), and
the plot gets a usage panel. The same figures come from the Queue statuses the
scheduler writes (status.usage), not from inside the plugin."""
from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from kaisched.cli import main

SCENARIO = "fair-share-memory"         # bundled: run by name
USAGE_ON = "usage-on"
OFF = str(Path(__file__).resolve().parents[2] / "config" / "scheduler.yaml")


def test_compare_shows_the_steady_team_waiting_less_with_usage_memory(tmp_path: Path) -> None:
    plot = tmp_path / "usage.png"
    result = CliRunner().invoke(main, ["simulate", SCENARIO, "--config", OFF, "--compare",
                                       USAGE_ON, "--output", "json", "--plot", str(plot)])
    assert result.exit_code == 0, result.stderr
    off, on = orjson.loads(result.stdout)["compare"]
    queues_off = {q["name"]: q for q in off["queues"]}
    queues_on = {q["name"]: q for q in on["queues"]}
    assert "windowUsage" not in queues_off["steady"]
    steady, bursty = queues_on["steady"]["windowUsage"], queues_on["bursty"]["windowUsage"]
    # The bursty team had the cluster all night; the steady team nothing until its day began.
    assert bursty["peak"] > 0.99 and steady["overTime"][0][1] == 0.0
    assert bursty["avg"] > steady["avg"]
    assert all(0.0 <= u <= 1.0 for _, u in steady["overTime"] + bursty["overTime"])
    # Memory gives the steady team more of the spare GPUs: it waits less.
    assert queues_on["steady"]["waitP50"] < 0.75 * queues_off["steady"]["waitP50"], \
        (queues_on["steady"]["waitP50"], queues_off["steady"]["waitP50"])
    assert plot.stat().st_size > 0
    assert on["invariantChecks"] > 0 and off["invariantChecks"] > 0


def test_the_text_report_has_a_usage_table(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["simulate", SCENARIO, "--config", USAGE_ON,
                                       "--until", "4h"])
    assert result.exit_code == 0, result.stderr
    assert "usage over time" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines()
            if line.strip().startswith(("bursty ", "steady "))]
    usage_rows = [r for r in rows if len(r) == 10]      # queue, 8 moments, avg
    assert {r[0] for r in usage_rows} == {"bursty", "steady"}
