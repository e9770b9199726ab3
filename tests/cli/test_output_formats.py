"""Output the way kubectl does it: -o/--output json|yaml (and wide where a table exists) on
every command that prints objects or reports, the same content in JSON and YAML;
snapshot-dump's file as -f FILE or a path after the command (-o FILE kept one release with a
warning); bare `kaisched` and `podgrouper` print their help and exit 0; `python -m
podgrouper` works; bench shows progress on a terminal and nothing elsewhere."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from click.testing import CliRunner

from kaisched.cli import inputs, main
from kaisched.console import Elapsed
from podgrouper.cli import main as podgrouper
from tests.builders import ROOT

GANG = str(ROOT / "config" / "examples" / "gang.yaml")
PYTORCHJOB = str(ROOT / "tests" / "podgrouper" / "manifests" / "pytorchjob.yaml")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def invoke(program: Any, *args: str) -> Any:
    result = CliRunner().invoke(program, list(args))
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.parametrize("program,args", [
    (main, ["replay", GANG]),
    (main, ["explain", "research/llm", "--snapshot", GANG]),
    (main, ["simulate", "demo", "--until", "5m"]),
    (main, ["bench", "basic-5k", "--scale", "0.002"]),
    (podgrouper, ["sync", PYTORCHJOB]),
], ids=["replay", "explain", "simulate", "bench", "podgrouper-sync"])
def test_json_and_yaml_say_the_same(program: Any, args: list[str]) -> None:
    as_json = orjson.loads(invoke(program, *args, "-o", "json").stdout)
    as_yaml = yaml.safe_load(invoke(program, *args, "--output", "yaml").stdout) \
        if args[0] != "sync" else {"apiVersion": "v1", "kind": "List", "items": list(
            yaml.safe_load_all(invoke(program, *args, "--output", "yaml").stdout))}
    if args[0] == "bench":      # timings differ from run to run; the counts do not
        assert set(as_json) == set(as_yaml)
        assert (as_json["pods"], as_json["placed"]) == (as_yaml["pods"], as_yaml["placed"])
    else:
        assert as_json == as_yaml
    assert as_json


def test_wide_is_every_column_of_the_tables() -> None:
    wide = invoke(main, "simulate", "demo", "--until", "5m", "-o", "wide").stdout
    flag = invoke(main, "simulate", "demo", "--until", "5m", "--wide").stdout
    assert wide == flag and " job " in wide


@pytest.mark.parametrize("args", [["replay", GANG, "-o", "wide"], ["bench", "basic-5k", "-o", "text"],
                                  ["explain", "a/b", "--snapshot", GANG, "-o", "xml"]])
def test_a_format_a_command_lacks_is_a_usage_error(args: list[str]) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and result.stderr.startswith("error: Invalid value for '-o'")


@pytest.fixture
def live(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The cluster snapshot-dump reads, at our own seam (the objects of gang.yaml)."""
    from kaisched.cluster.snapshot import load_file

    items = load_file(GANG).objects
    monkeypatch.setattr(inputs, "read_live", lambda kubeconfig, command: items)
    return items


@pytest.mark.parametrize("where", [["-f", "{}"], ["--file", "{}"], ["{}"]], ids=["-f", "--file", "path"])
def test_snapshot_dump_writes_the_file_it_is_given(tmp_path: Path, live: list, where: list[str]) -> None:
    path = tmp_path / "now.json"
    result = invoke(main, "snapshot-dump", *[w.format(path) for w in where])
    assert result.stderr == f"{len(live)} objects written to {path}\n" and result.stdout == ""
    snapshot = orjson.loads(path.read_bytes())
    assert snapshot["kind"] == "Snapshot" and len(snapshot["items"]) == len(live)


def test_snapshot_dump_in_yaml_and_to_standard_output(tmp_path: Path, live: list) -> None:
    path = tmp_path / "now.yaml"
    invoke(main, "snapshot-dump", "-o", "yaml", "-f", str(path))
    as_yaml = yaml.safe_load(path.read_text())
    as_json = orjson.loads(invoke(main, "snapshot-dump").stdout)       # no file: stdout
    as_yaml["metadata"].pop("creationTimestamp")
    as_json["metadata"].pop("creationTimestamp")
    assert as_yaml == as_json and as_json["kind"] == "Snapshot"


def test_the_old_o_file_still_works_for_one_release_with_a_warning(tmp_path: Path,
                                                                     live: list) -> None:
    path = tmp_path / "old.json"
    result = invoke(main, "snapshot-dump", "-o", str(path))
    warning, done = result.stderr.splitlines()
    assert warning.startswith(f"warning: -o {path}: -o now names a format (json or yaml)")
    assert f"-f {path}" in warning and done == f"{len(live)} objects written to {path}"
    assert orjson.loads(path.read_bytes())["kind"] == "Snapshot"


def test_snapshot_dump_takes_its_file_once(tmp_path: Path, live: list) -> None:
    result = CliRunner().invoke(main, ["snapshot-dump", str(tmp_path / "a.json"), "-f",
                                       str(tmp_path / "b.json")])
    assert result.exit_code == 2 and "give the file once" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("module", ["kaisched", "kaisched.cli", "podgrouper"])
def test_a_bare_program_prints_its_help_and_exits_0(module: str) -> None:
    done = subprocess.run([sys.executable, "-m", module], env=ENV, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("Usage: ") and "Commands:" in done.stdout


def test_python_m_podgrouper_is_the_podgrouper_command() -> None:
    done = subprocess.run([sys.executable, "-m", "podgrouper", "sync", PYTORCHJOB], env=ENV,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr.endswith("1 PodGroup(s) made\n")
    assert yaml.safe_load(done.stdout)["kind"] == "PodGroup"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_drawn_on_a_terminal_and_wiped() -> None:
    stream = _Terminal()
    with Elapsed("bench scale-50k", stream, every=0.01):
        import time
        time.sleep(0.05)
    drawn = stream.getvalue()
    assert drawn.startswith("\rbench scale-50k: 0:00:00 elapsed")
    assert drawn.count("\r") >= 3 and drawn.endswith("\r")      # redrawn, then wiped
    assert drawn.rsplit("\r", 2)[1].strip() == ""


def test_no_progress_where_stderr_is_not_a_terminal() -> None:
    stream = io.StringIO()
    with Elapsed("bench basic-5k", stream, every=0.01):
        pass
    assert stream.getvalue() == ""
    result = invoke(main, "bench", "basic-5k", "--scale", "0.002")
    assert result.stderr == "" and orjson.loads(result.stdout)["scenario"] == "basic-5k"
