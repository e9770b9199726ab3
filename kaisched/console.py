"""What the command lines share: errors as one line, never a traceback."""
from __future__ import annotations

import sys
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
