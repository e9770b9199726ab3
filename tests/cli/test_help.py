"""The help a newcomer reads: every option described, files shown as FILE and durations as
DURATION (never TEXT), lines that fit 80 columns without a word cut at a hyphen, bench's
scenarios listed a line each, both programs' --version, `--kubeconfig` saying what the code
does, and `--seed` on a scenario that draws nothing a warning."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from kaisched.bench import BENCHES
from kaisched.cli import main as kaisched
from kaisched.sim.bundled import find_bundled
from podgrouper.cli import main as podgrouper

PROGRAMS = {"kaisched": kaisched, "podgrouper": podgrouper}
FILES = {"--config", "--compare", "--kubeconfig", "--snapshot", "--plot", "--dump-snapshot",
         "--from-snapshot", "--output"}
DURATIONS = {"--until", "--remaining", "--period", "--owner-resync"}


def commands() -> list[tuple[str, click.Command]]:
    return [(f"{prog} {name}", command) for prog, group in PROGRAMS.items()
            for name, command in group.commands.items()]


def help_text(program: str, *args: str) -> str:
    result = CliRunner().invoke(PROGRAMS[program], [*args, "--help"], terminal_width=80,
                                prog_name=program)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("where,command", commands(), ids=[w for w, _ in commands()])
def test_every_option_is_described_with_a_telling_metavar(where: str, command: click.Command) -> None:
    for param in command.params:
        if not isinstance(param, click.Option) or param.name in ("help", "version"):
            continue
        assert param.help and len(param.help) > 10, f"{where} {param.opts[0]}: no description"
        ctx = click.Context(command)
        metavar = param.make_metavar(ctx) if not param.is_flag else ""
        name = max(param.opts, key=len)
        if name in FILES and not isinstance(param.type, click.Choice):
            assert metavar == "FILE", f"{where} {name}: {metavar}"
        if name in DURATIONS:
            assert metavar == "DURATION", f"{where} {name}: {metavar}"
        assert metavar not in ("TEXT", "INTEGER", "INTEGER RANGE", "FLOAT", "FLOAT RANGE"), \
            f"{where} {name}: {metavar}"
    program, _, name = where.partition(" ")
    text = help_text(program, name)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, where
    for line, after in zip(lines, lines[1:], strict=False):
        cut = line.rstrip().endswith("-") and after.strip()[:1].isalpha()
        assert not cut, f"{where}: a word cut at its hyphen: {line!r} / {after!r}"


def test_bench_lists_its_scenarios_a_line_each() -> None:
    text = help_text("kaisched", "bench")
    assert text.startswith("Usage: kaisched bench [OPTIONS] SCENARIO\n")
    for name, line in BENCHES.items():
        assert f"  {name:<12} {line}\n" in text
    assert "basic-5k|" not in text


def test_both_programs_say_their_version() -> None:
    for program in PROGRAMS:
        result = CliRunner().invoke(PROGRAMS[program], ["--version"], prog_name=program)
        assert result.exit_code == 0 and result.stdout == f"{program}, version 0.1.0\n"


def test_kubeconfig_help_tells_what_the_code_does(tmp_path: Path) -> None:
    """Not in a pod and no --kubeconfig: the kubeconfig $KUBECONFIG names (else ~/.kube/config)."""
    config = tmp_path / "kubeconfig"
    config.write_text("""\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
""")
    # The client reads $KUBECONFIG when it is imported: a process of its own, as a user runs it.
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    host = subprocess.run([sys.executable, "-c", "from kaisched.cluster.kube import "
                           "load_configuration; print(load_configuration(None).host)"],
                          env={**env, "KUBECONFIG": str(config)}, capture_output=True, text=True,
                          timeout=120, check=True).stdout.strip()
    assert host == "https://127.0.0.1:6443"
    for program, command in (("podgrouper", "run"), ("kaisched", "run"),
                             ("kaisched", "snapshot-dump")):
        said = " ".join(help_text(program, command).split())
        assert "(default: the in-cluster config, else $KUBECONFIG or ~/.kube/config)" in said


def test_seed_without_generate_is_a_warning() -> None:
    listed = CliRunner().invoke(kaisched, ["simulate", "demo", "--seed", "3", "--until", "1m"])
    assert listed.exit_code == 0
    assert [line for line in listed.stderr.splitlines() if line.startswith("warning:")] == [
        f"warning: --seed 3 changes nothing: {find_bundled('demo')} has no generate: block "
        "(its jobs are listed, not drawn)"]
    drawn = CliRunner().invoke(kaisched, ["simulate", "starvation", "--seed", "3", "--until", "1m"])
    assert drawn.exit_code == 0 and "warning" not in drawn.stderr
