"""Docs that stay true: every command output the README or docs/ quote is produced here by
running the command, and the quoted lines are compared with what it prints.

A quoted output is a code block with no language (```), preceded by an HTML comment that
says what it is:

- `<!-- output: COMMAND -->`: the block is the whole output of COMMAND (stdout and stderr
  as a terminal shows them), line for line; a line `...` stands for any lines, and `...`
  inside a line for any text.
- `<!-- excerpt: COMMAND -->`: each quoted line is one of the output's lines, in order,
  others left out; words may be left out between quoted words (a table cut to the
  columns that matter, its rule as wide as they are), and `...` stands for any text.
- `<!-- exempt: WHY -->`: not run -- timings, or output that needs a cluster or minutes of
  work (bench, e2e, scale-50k).

A block of another kind (a diagram, a formula, a listing) carries a language (```text).
A block that starts `$ COMMAND` names its command itself (`<!-- excerpt -->` before it makes
it an excerpt; else it is compared as `output`).
Commands run as a reader of a checkout runs them, from a directory that sees its folders."""
from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import attrs
import click
import pytest

from kaisched.cli import main as kaisched_main
from podgrouper.cli import main as podgrouper_main
from tests.builders import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PROGRAMS: dict[str, click.Group] = {"kaisched": kaisched_main, "podgrouper": podgrouper_main}
MARK = re.compile(r"<!--\s*(output|excerpt|exempt)(?::\s*(.*?))?\s*-->\s*$")
ELLIPSIS = "..."


@attrs.frozen
class Quote:
    where: str          # page:line
    kind: str           # output, excerpt, exempt, or "" (no mark)
    command: str
    lines: tuple[str, ...]


def quotes(page: Path) -> list[Quote]:
    """Every code block with no language on the page, with the mark before it."""
    lines = page.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if re.match(r"^\s*```\s*$", lines[j]))
        if fence.group(2) == "":
            body = [line[len(fence.group(1)):] for line in lines[i + 1:end]]
            before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            mark = MARK.search(before)
            kind, command = (mark.group(1), mark.group(2) or "") if mark else ("", "")
            if body and body[0].startswith("$ ") and kind != "exempt":
                kind, command, body = kind or "output", body[0][2:], body[1:]
            found.append(Quote(f"{page.relative_to(ROOT)}:{i + 1}", kind, command, tuple(body)))
        i = end + 1
    return found


ALL = [q for page in PAGES for q in quotes(page)]
RUN = [q for q in ALL if q.kind in ("output", "excerpt")]


@functools.cache
def run(command: str) -> str:
    """What COMMAND prints, stdout and stderr as a pipe gets them (of its last part, for
    `a && b`): run as a reader runs it, in a scratch directory that sees the checkout's
    folders, so that files it writes land there."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    with tempfile.TemporaryDirectory() as scratch:
        for name in ("config", "tests", "docs", "kaisched"):
            os.symlink(ROOT / name, Path(scratch) / name)
        output = ""
        for part in command.split(" && "):
            words = shlex.split(part)
            if words[:3] in (["python", "-m", "kaisched.cli"], ["python", "-m", "kaisched"]):
                words = ["kaisched", *words[3:]]
            assert words[0] in PROGRAMS, f"{part}: not a kaisched or podgrouper command"
            module = "kaisched.cli" if words[0] == "kaisched" else "podgrouper"
            done = subprocess.run([sys.executable, "-m", module, *words[1:]], cwd=scratch,
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=600)
            assert "Traceback" not in done.stdout, done.stdout
            output = done.stdout
        return output


def _line_pattern(line: str, columns_cut: bool) -> str:
    if not columns_cut:
        return ".*?".join(re.escape(part) for part in line.rstrip().split(ELLIPSIS))
    # a table's rule, as wide as the columns kept
    words = ["─+" if set(word) == {"─"} else ".*?".join(re.escape(p) for p in word.split(ELLIPSIS))
             for word in line.split()]
    return r"(?<!\S)" + r"\s+(?:.*\s+)?".join(words) + r"(?!\S)"


def matches(quote: Quote, output: str) -> str | None:
    """None when the output says what the quote does, else what differs."""
    shown = [line.rstrip() for line in output.rstrip().splitlines()]
    if quote.kind == "output":
        pattern = "".join(r"(?:[^\n]*\n)*?" if line.strip() == ELLIPSIS
                          else _line_pattern(line, False) + r"\n" for line in quote.lines)
        if re.fullmatch(pattern, "".join(f"{line}\n" for line in shown)):
            return None
        return "the quote is not the output:\n" + "\n".join(shown)
    at = 0
    for line in quote.lines:
        if line.strip() == ELLIPSIS:
            continue
        pattern = re.compile(_line_pattern(line, True))
        hit = next((i for i in range(at, len(shown)) if pattern.search(shown[i])), None)
        if hit is None:
            return f"not in the output (after line {at}): {line!r}\n" + "\n".join(shown)
        at = hit + 1
    return None


def test_every_quoted_output_says_what_it_is() -> None:
    unmarked = [q.where for q in ALL if not q.kind]
    assert unmarked == [], "a quoted output needs <!-- output: COMMAND -->, <!-- excerpt: " \
                           "COMMAND --> or <!-- exempt: WHY --> before it (a diagram: ```text)"
    assert len(RUN) >= 10


@pytest.mark.parametrize("quote", RUN, ids=[q.where for q in RUN])
def test_a_quoted_output_is_what_the_command_prints(quote: Quote) -> None:
    """Output as a pipe gets it (no terminal): what a reader who pipes it sees."""
    differs = matches(quote, run(quote.command))
    assert differs is None, f"{quote.where}: {quote.command}: {differs}"


@pytest.mark.parametrize("quote,output,same", [
    (Quote("t", "output", "c", ("a", "...", "d")), "a\nb\nc\nd\n", True),
    (Quote("t", "output", "c", ("a", "d")), "a\nb\nd\n", False),
    (Quote("t", "output", "c", ("podgroups (3):", "  x", "  y")), "podgroups (3):\n  x\n  y\n  z\n",
     False),
    (Quote("t", "output", "c", ("gang wait: 4 (...); p50 1",)), "gang wait: 4 (why); p50 1\n", True),
    (Quote("t", "excerpt", "c", (" job   GPUs   wait",)), " job   kind   GPUs   start   wait\n", True),
    (Quote("t", "excerpt", "c", ("b", "a")), "a\nb\n", False),
    (Quote("t", "excerpt", "c", ("job wa",)), "job wait\n", False),
    (Quote("t", "excerpt", "c", (" job   wait", " ─────────")), " job   kind   wait\n ──────────────\n",
     True),
], ids=["ellipsis-line", "a-line-left-out", "fewer-lines-than-said", "ellipsis-in-a-line",
        "columns-cut", "out-of-order", "a-word-cut", "a-narrower-rule"])
def test_the_comparison(quote: Quote, output: str, same: bool) -> None:
    assert (matches(quote, output) is None) == same
