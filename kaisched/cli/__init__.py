"""The kaisched command line, a module per family of commands: production (run),
decisions (replay, explain), snapshots (snapshot-dump), simulation (simulate),
benchmarks (bench); inputs, what they read. Errors print one line, never a traceback."""
from __future__ import annotations

import click

from kaisched.cli.benchmarks import bench
from kaisched.cli.decisions import explain, replay
from kaisched.cli.production import run
from kaisched.cli.simulation import simulate
from kaisched.cli.snapshots import snapshot_dump
from kaisched.console import OneLineGroup


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kaisched", prog_name="kaisched")
def main() -> None:
    """kaisched: a gang-aware batch scheduler for Kubernetes."""


for _command in (replay, run, snapshot_dump, explain, simulate, bench):
    main.add_command(_command)
