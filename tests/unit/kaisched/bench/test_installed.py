"""A process timed as an installed kaisched starts (kaisched.bench.installed):
it reads its modules compiled, from a cache filled before the clock starts."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kaisched.bench.installed import installed_env


def test_a_started_process_reads_kaisched_compiled(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")     # as a source tree here is run
    env = installed_env(tmp_path / "cache")
    assert "PYTHONDONTWRITEBYTECODE" not in env
    compiled = {p.name.split(".")[0] for p in (tmp_path / "cache").rglob("*.pyc")}
    assert {"production", "kube", "scheduler", "catalog", "binder"} <= compiled
    # A process started with it finds them there rather than compiling them again.
    out = subprocess.run([sys.executable, "-c", "import sys, kaisched.cluster.kube as k; "
                          "print(k.__cached__, sys.dont_write_bytecode)"],
                         env=env, capture_output=True, text=True, check=True)
    cached, dont_write = out.stdout.split()
    assert Path(cached).is_file() and Path(cached).is_relative_to(tmp_path / "cache")
    assert dont_write == "False"
