"""`kaisched snapshot-dump`: a live cluster's scheduling state written as a Snapshot file."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
import orjson

from kaisched.builtins.catalog import register_builtins
from kaisched.cli import inputs
from kaisched.console import kubeconfig_option


class _FormatOrOldPath(click.Choice):
    """snapshot-dump's -o: a format; for one release, any other value is the file to
    write, as -o meant before, with a deprecation line."""

    name = "format"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value in self.choices:
            return value
        click.echo(f"warning: -o {value}: -o now names a format (json or yaml); a file is "
                   f"-f FILE or a path after the command. -o FILE is taken as -f {value} "
                   "until the next release", err=True)
        return _OldPath(value)


class _OldPath(str):
    """The file of a deprecated `-o FILE`."""


@click.command("snapshot-dump")
@click.argument("path", required=False, metavar="[FILE]", type=click.Path(dir_okay=False))
@kubeconfig_option
@click.option("-f", "--file", "file", type=click.Path(dir_okay=False),
              help="The Snapshot file to write (or FILE after the command; '-' or none: "
                   "standard output).")
@click.option("-o", "--output", "output", type=_FormatOrOldPath(["json", "yaml"]),
              default="json", show_default=True,
              help="json or yaml: how the Snapshot is written (a file name here is taken "
                   "as -f, with a warning, until the next release).")
@click.option("--config", "config_path", metavar="FILE",
              help="The scheduler config to record (default: built-in).")
@click.option("--redact", is_flag=True,
              help="Keep only what scheduling reads: no env, commands, images, foreign annotations.")
def snapshot_dump(path: str | None, kubeconfig: str | None, file: str | None, output: str,
                  config_path: str | None, redact: bool) -> None:
    """Write the cluster's scheduling state as a Snapshot (to FILE, else standard output),
    to replay, explain or simulate from."""
    import yaml

    from kaisched.cluster.files import check_writable
    from kaisched.cluster.snapshot import build_snapshot

    given = [(flag, p) for flag, p in (("FILE", path), ("-f", file),
                                      ("-o", output if isinstance(output, _OldPath) else None))
             if p is not None]
    if len(given) > 1:
        raise click.UsageError("give the file once: " + " and ".join(
            f"{flag} {p}" if flag != "FILE" else p for flag, p in given))
    flag, target = given[0] if given else ("-f", "-")
    fmt = "json" if isinstance(output, _OldPath) else output
    if target != "-":
        check_writable(target, flag if flag != "FILE" else "FILE")  # before the cluster is read
    config = inputs.scheduler_config(config_path, register_builtins(), None)
    taken = time.time()
    items = inputs.read_live(kubeconfig, "snapshot-dump")
    snapshot = build_snapshot(items, config.to_dict(), redact, taken)
    data = orjson.dumps(snapshot, option=orjson.OPT_INDENT_2) if fmt == "json" else \
        yaml.safe_dump(orjson.loads(orjson.dumps(snapshot)), sort_keys=False).encode()
    if target == "-":
        click.echo(data.rstrip(b"\n"))
    else:
        Path(target).write_bytes(data)
        click.echo(f"{len(items)} objects written to {target}", err=True)
