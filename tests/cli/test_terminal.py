"""What a terminal shows: every table and every report line fits the width (80 columns
included) without breaking a word — columns left out are named, cells and lines wrap at
spaces — `--wide` keeps every column, a pipe gets one row per line, NO_COLOR is honoured,
and the exit codes are the documented ones (0 ok, 1 input, 2 usage)."""
from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import pytest
from click.testing import CliRunner
from rich.console import Console

from kaisched.builtins.catalog import register_builtins
from kaisched.cli import main
from kaisched.console import fold
from kaisched.framework import default_config
from kaisched.sim.bundled import bundled_examples
from kaisched.sim.report import build_report, render, render_compare
from kaisched.sim.scenario import load_scenario
from kaisched.sim.simulation import Simulation
from tests.builders import ROOT

GANG = ROOT / "config" / "examples" / "gang.yaml"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
PATIENCE = 300
HEADER_WORDS = {w for name in ("job kind queue pods GPUs arrived started finished wait "
                               "turnaround starts evicted GPU-h lost state quota limit fair "
                               "share avg use peak jobs done p50 p90 it reclaimed at cause for "
                               "of succeeded failed waiting running").split() for w in [name]}


@pytest.fixture(scope="module")
def reports() -> dict[str, dict]:
    config = default_config(register_builtins())
    out = {}
    for example in bundled_examples():
        if example.kind == "scenario":
            scenario = load_scenario(example.path)
            if scenario.until is None or scenario.until > 3600:
                import attrs
                scenario = attrs.evolve(scenario, until=3600.0)
            out[example.name] = build_report(Simulation(scenario, config).run(), "built-in")
    return out


def shown(report: dict, width: int, terminal: bool = True, layout: str = "full") -> list[str]:
    out = io.StringIO()
    render(report, Console(file=out, width=width, force_terminal=terminal, color_system=None),
           layout)
    return out.getvalue().splitlines()


def words_of(report: dict) -> set[str]:
    """Cells a broken word would betray: the job and queue names and states the report
    shows (in a pipe, where nothing wraps)."""
    piped = {t for line in shown(report, 1000, False, "lines") for t in line.split()}
    words = {w for job in report["jobs"] for w in (job["name"], job["queue"], job["state"])}
    return (words | {q["name"] for q in report["queues"]}) & piped


@pytest.mark.parametrize("width", [80, 100, 120])
def test_every_report_table_fits_without_breaking_a_word(reports: dict[str, dict],
                                                          width: int) -> None:
    for name, report in reports.items():
        lines = shown(report, width)
        assert max(len(line) for line in lines) <= width, name
        tokens = {t for line in lines for t in line.split()}
        for word in words_of(report):
            assert word in tokens, f"{name} at {width}: {word!r} broken or missing"
        for word in HEADER_WORDS:   # a word cut in two: "reclaime" and "d", "succee" and "ded"
            assert not any(word[:i] in tokens and word[i:] in tokens
                           for i in range(1, len(word))), (name, word)


def _fragments(lines: list[str], whole: list[str]) -> set[str]:
    """Tokens of lines that are not tokens of the same report at full width: a word split
    (the notes that name the columns left out, and the tables' rules, aside)."""
    notes = " ".join(re.findall(r"\(a \d+-column terminal: [^)]*\)", " ".join(lines)))
    tokens = {t for line in lines for t in line.split() if set(t) != {"─"}}
    return tokens - set(notes.split()) - {t for line in whole for t in line.split()}


@pytest.mark.parametrize("width", [79, 60, 40])
def test_below_80_columns_tables_drop_columns_rather_than_split_words(
        reports: dict[str, dict], width: int) -> None:
    for name, report in reports.items():
        lines = shown(report, width)
        assert max(len(line) for line in lines) <= width, name
        assert _fragments(lines, shown(report, 1000)) == set(), (name, width)
        header = next(line for line in lines if line.split()[:1] in (["job"], ["job", "kind"]))
        assert header.split()[0] == "job"       # the column that names the row stays
    assert "the jobs table leaves out" in " ".join(" ".join(shown(reports["demo"], 40)).split())
    out = io.StringIO()
    a, b = reports["starvation"], dict(reports["starvation"], config="no-starvation-guard")
    render_compare([a, b], Console(file=out, width=width, force_terminal=True, color_system=None))
    compared = out.getvalue().splitlines()
    full = io.StringIO()
    render_compare([a, b], Console(file=full, width=1000, force_terminal=True, color_system=None))
    assert max(len(line) for line in compared) <= width
    assert _fragments(compared, full.getvalue().splitlines()) == set()


def test_a_column_left_out_is_named(reports: dict[str, dict]) -> None:
    lines = shown(reports["demo"], 80)
    text = " ".join(lines)
    assert "(a 80-column terminal: the jobs table leaves out" in text
    header = next(line for line in lines if line.lstrip().startswith("job "))
    note = text[text.index("the jobs table leaves out"):text.index("--wide")]
    for column in ("kind", "turnaround", "GPU-h lost"):
        assert column in note and column not in header
    for column in ("job", "queue", "wait", "state"):
        assert column in header


def test_wide_and_pipes_keep_every_column_one_row_per_line(reports: dict[str, dict]) -> None:
    for lines in (shown(reports["demo"], 1000, True), shown(reports["demo"], 1000, False, "lines")):
        assert not any("leaves out" in line for line in lines)
        header = next(line for line in lines if line.lstrip().startswith("job "))
        assert "turnaround" in header and "GPU-h lost" in header
        assert len([line for line in lines if "team-a/resnet" in line]) == 2   # job, eviction


def test_the_compare_table_fits_80_columns(reports: dict[str, dict]) -> None:
    out = io.StringIO()
    a, b = reports["starvation"], dict(reports["starvation"], config="no-starvation-guard")
    render_compare([a, b], Console(file=out, width=80, force_terminal=True, color_system=None))
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any("no-starvation-guard" in line for line in lines)


@pytest.mark.parametrize("line,width,expected", [
    ("short", 80, ["short"]),
    ("  research/llm  Pending  minMember=2  Unschedulable: 1/2 tasks placed", 40,
     ["  research/llm  Pending  minMember=2", "      Unschedulable: 1/2 tasks placed"]),
    ("a-very-long-word-that-cannot-be-split", 10, ["a-very-long-word-that-cannot-be-split"]),
])
def test_report_lines_fold_at_spaces(line: str, width: int, expected: list[str]) -> None:
    assert fold(line, width) == expected
    assert fold(line, None) == [line]


def in_a_terminal(args: list[str], columns: int = 80, **env: str) -> str:
    """A command's output on a pseudo-terminal of the given width, escape codes removed."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    process = subprocess.Popen([sys.executable, "-m", "kaisched", *args], stdin=follower,
                               stdout=follower, stderr=follower, cwd=ROOT,
                               env={**environ, "TERM": "xterm-256color", **env})
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:         # the other end closed: the command is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=PATIENCE)
    os.close(leader)
    assert process.returncode == 0, b"".join(chunks).decode(errors="replace")[-2000:]
    return b"".join(chunks).decode()


@pytest.mark.parametrize("args", [
    ["simulate", "--until", "20m"],
    ["replay", str(GANG)],
    ["explain", "research/llm", "--snapshot", str(GANG)],
    ["simulate", "--list"],
], ids=["simulate", "replay", "explain", "list"])
def test_a_terminal_of_80_columns_gets_whole_words(args: list[str]) -> None:
    raw = in_a_terminal(args, NO_COLOR="1")
    text = ANSI.sub("", raw).replace("\r", "")
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    piped = CliRunner().invoke(main, args)
    assert piped.exit_code == 0
    tokens = words(text)
    notes = words(" ".join(re.findall(r"\(a 80-column terminal: [^)]*\)", " ".join(lines))))
    assert tokens <= words(piped.stdout) | notes, "a fragment of a word on the terminal"
    if not notes:       # nothing left out: every word of the pipe is on the terminal, whole
        assert words(piped.stdout) <= tokens


def words(text: str) -> set[str]:
    """The words of a text, punctuation around them and table rules left out."""
    return {w.strip("():;,.") for w in text.split() if w.strip("─")} - {""}


def test_no_color_means_no_colour_codes() -> None:
    coloured = in_a_terminal(["simulate", "--until", "20m"], FORCE_COLOR="1")
    plain = in_a_terminal(["simulate", "--until", "20m"], NO_COLOR="1")
    colour = re.compile(r"\x1b\[[0-9;]*(?:3[0-9]|9[0-7]|38;)[0-9;]*m")
    assert not colour.search(plain)
    assert "\x1b[" in coloured      # a terminal does get styling when colour is allowed


@pytest.mark.parametrize("args,code", [
    (["simulate", "--until", "1m"], 0),
    (["replay", str(GANG)], 0),
    (["simulate", "/nonexistent.yaml"], 2),                 # a path, refused before the work
    (["simulate", "--config", "demo"], 2),                  # a bundled name of the wrong kind
    (["replay", str(ROOT / "kaisched" / "examples" / "demo.yaml")], 1),   # what a file says
    (["simulate", "--plot", "/nonexistent/x.png"], 2),      # an output path
    (["explain", "no/such", "--snapshot", str(GANG)], 1),   # a name, found in the work
    (["replay", "/nonexistent.yaml"], 2),
    (["simulate", "--until", "5"], 2),                      # a duration without a unit
    (["simulate", "--no-such-flag"], 2),                    # usage
    (["replay", str(GANG), "--output", "xml"], 2),
    (["bench", "nope"], 2),
    (["explain", "x"], 2),                                  # neither --snapshot nor --kubeconfig
    (["nope"], 2),
])
def test_exit_codes_are_the_documented_ones(args: list[str], code: int) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == code, result.output
    if code:
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1


def test_the_readme_documents_the_exit_codes() -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "The exit codes follow click's rule: 0 when it did what it was asked; 2 for anything " \
           "refused before the work starts" in readme
    assert "; 1 for a failure after" in readme
