"""What the command lines share: errors as one line, never a traceback."""
from __future__ import annotations

import shutil
import sys
import textwrap
from typing import Any

import click

from kaisched.errors import KaischedError


class OneLineGroup(click.Group):
    """Every error, a bad flag included, as one line on stderr."""

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
        except KaischedError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)
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
