"""What the command lines share: errors as one line, never a traceback."""
from __future__ import annotations

import functools
import os
import shutil
import socket
import sys
import textwrap
import threading
import time
from typing import Any, Callable, TextIO, TypeVar

import click
import orjson
import yaml

from kaisched.errors import KaischedError
from kaisched.service.leader import LeaseOptions

Command = TypeVar("Command", bound=Callable[..., object])


class OneLineGroup(click.Group):
    """Every error, a bad flag included, as one line on stderr; the bare program prints
    its help and exits 0, as kubectl does."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and not ctx.resilient_parsing:
            click.echo(ctx.get_help())
            ctx.exit(0)
        return super().parse_args(ctx, args)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            code = super().main(*args, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(1)
        except click.ClickException as exc:
            ctx = getattr(exc, "ctx", None)     # UsageError's: the command it was for
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            click.echo(f"error: {exc.format_message()}{hint}", err=True)
            sys.exit(exc.exit_code)
        except KaischedError as exc:       # 2: a path refused before the work; 1: after
            click.echo(f"error: {exc}", err=True)
            sys.exit(getattr(exc, "exit_code", 1))
        sys.exit(code if isinstance(code, int) else 0)


def say(line: str = "") -> None:
    """A line of a report on standard output: on a terminal folded at spaces to its width
    (never inside a word; the rest indented under the line's own text), in a pipe as is,
    one item per line."""
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    for part in fold(line, width):
        click.echo(part)


def fold(line: str, width: int | None) -> list[str]:
    if width is None or len(line) <= width:
        return [line]
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    return textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False) or [line]


class Format(click.Choice):
    """-o/--output: the formats a command prints, as kubectl names them."""

    name = "format"

    def __init__(self, *formats: str) -> None:
        super().__init__(formats)


def output_option(*formats: str, default: str, help: str) -> Any:
    """-o/--output, as kubectl has it: json and yaml for tools, wide where a table exists."""
    return click.option("-o", "--output", "output", type=Format(*formats), default=default,
                        show_default=True, help=help)


# --kubeconfig of the commands that read a cluster, saying what load_configuration does
# without it, as kubectl does.
kubeconfig_option = click.option(
    "--kubeconfig", type=click.Path(dir_okay=False),
    help="Kubeconfig file (default: the in-cluster config, else $KUBECONFIG or ~/.kube/config).")


def replica_options(*, metrics_port: int, lease_name: str | None,
                    lease_name_help: str) -> Callable[[Command], Command]:
    """The options of a controller's replica (`kaisched run`, `podgrouper run`):
    --metrics-port, and its part in leader election (--lease-namespace,
    --identity, --lease-name, --no-leader-elect), handed to the command as one
    `lease`, a LeaseOptions. lease_name: the default shown (None: the command
    chooses one, which lease_name_help says)."""
    options = (
        click.option("--metrics-port", type=click.IntRange(0, 65535), default=metrics_port,
                     show_default=True, metavar="PORT",
                     help="Port of /metrics, /healthz and /readyz (0: none)."),
        click.option("--lease-namespace", metavar="NAMESPACE",
                     default=lambda: os.environ.get("POD_NAMESPACE", "kaisched-system"),
                     show_default="$POD_NAMESPACE, else the namespace kaisched-system",
                     help="Namespace of the Lease that elects the leader."),
        click.option("--identity", metavar="NAME",
                     default=lambda: os.environ.get("POD_NAME") or socket.gethostname(),
                     show_default="$POD_NAME or the host name",
                     help="This replica's name on the Lease (unique among the replicas)."),
        click.option("--lease-name", metavar="NAME", default=lease_name,
                     show_default=lease_name is not None, help=lease_name_help),
        click.option("--no-leader-elect", "no_leader_elect", is_flag=True,
                     help="Run a single replica without a Lease (never run two like this)."),
    )

    def decorate(command: Command) -> Command:
        @functools.wraps(command)
        def with_lease(*args: Any, lease_namespace: str, identity: str, lease_name: str | None,
                       no_leader_elect: bool, **kwargs: Any) -> object:
            lease = LeaseOptions(not no_leader_elect, lease_namespace, identity, lease_name)
            return command(*args, lease=lease, **kwargs)

        wrapped: Any = with_lease
        for option in reversed(options):     # the first given is the first in --help
            wrapped = option(wrapped)
        return wrapped

    return decorate


def emit(data: Any, output: str) -> None:
    """A report for tools on standard output: JSON (keys sorted, indented) or YAML, the same
    content either way."""
    if output == "yaml":
        plain = orjson.loads(orjson.dumps(data))        # enums, tuples: as JSON has them
        click.echo(yaml.safe_dump(plain, sort_keys=True, allow_unicode=True), nl=False)
    else:
        click.echo(orjson.dumps(data, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2))


class Elapsed:
    """Progress of long work on a terminal: `what: 0:42 elapsed` redrawn on stream
    every `every` seconds and wiped at the end; nothing at all when stream is not a
    terminal (a log, a pipe, CI)."""

    def __init__(self, what: str, stream: TextIO, every: float = 1.0) -> None:
        self.what = what
        self.stream = stream
        self.every = every
        self.shown = stream.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)
        self._width = 0

    def __enter__(self) -> "Elapsed":
        if self.shown:
            self._start = time.monotonic()
            self._draw()
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.shown:
            self._stop.set()
            self._thread.join()
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()

    def _tick(self) -> None:
        while not self._stop.wait(self.every):
            self._draw()

    def _draw(self) -> None:
        seconds = int(time.monotonic() - self._start)
        line = f"{self.what}: {seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d} elapsed"
        self._width = max(self._width, len(line))
        self.stream.write("\r" + line)
        self.stream.flush()
