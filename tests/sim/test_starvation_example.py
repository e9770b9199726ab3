"""The bundled starvation example shows what it claims: among a stream of 1-2
GPU jobs, the 64-GPU job gets its room held once it has waited past the
starvation threshold and starts whole, far sooner than with the guard off."""
from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from kaisched.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "kaisched" / "examples" / "starvation.yaml"


def big_job(tmp_path: Path, config: str | None) -> dict:
    args = ["simulate", str(EXAMPLE), "--output", "json"]
    if config is not None:
        path = tmp_path / "config.yaml"
        path.write_text(config)
        args += ["--config", str(path)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.stderr
    report = orjson.loads(result.stdout)
    assert report["invariantChecks"] > 0
    return next(j for j in report["jobs"] if j["name"].endswith("/big-pretrain"))


def test_the_guard_lets_the_big_job_start_much_sooner(tmp_path: Path) -> None:
    guarded = big_job(tmp_path, None)
    unguarded = big_job(tmp_path, "starvationThreshold: 0s\n")
    assert guarded["placedWhole"] and guarded["state"] == "succeeded"
    assert guarded["gpus"] == 64
    # The threshold is 10 minutes; the guard then holds room as small jobs finish.
    assert guarded["wait"] >= 600
    assert unguarded["wait"] > 1.5 * guarded["wait"], (guarded["wait"], unguarded["wait"])
