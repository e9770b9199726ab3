"""The kaisched command line, a module per family of commands: production (run),
decisions (replay, explain), snapshots (snapshot-dump), simulation (simulate),
benchmarks (bench); inputs, what they read. Errors print one line, never a traceback."""
from __future__ import annotations

import importlib

import click

from kaisched.console import OneLineGroup

# Each command's module is imported when the command is asked for: `kaisched
# run` starts listing the cluster before the simulator and the benches (and
# their libraries) would have been imported.
_COMMANDS = {
    "replay": ("kaisched.cli.decisions", "replay"),
    "run": ("kaisched.cli.production", "run"),
    "snapshot-dump": ("kaisched.cli.snapshots", "snapshot_dump"),
    "explain": ("kaisched.cli.decisions", "explain"),
    "simulate": ("kaisched.cli.simulation", "simulate"),
    "bench": ("kaisched.cli.benchmarks", "bench"),
}


class _Commands(OneLineGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = _COMMANDS.get(cmd_name)
        if found is None:
            return None
        module, name = found
        command = getattr(importlib.import_module(module), name)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kaisched", prog_name="kaisched")
def main() -> None:
    """kaisched: a gang-aware batch scheduler for Kubernetes."""

