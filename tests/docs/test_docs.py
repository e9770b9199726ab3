"""The documentation cannot drift from the command lines: every `kaisched` and `podgrouper`
command shown in a ```sh block of the README or of docs/ parses its arguments (an unknown
option, a bad choice or a missing argument fails here), every file of this repository such a
command names exists, and every page the README links is there."""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import click
import pytest

from kaisched.cli import main as kaisched_main
from kaisched.sim.bundled import listing, resolve
from podgrouper.cli import main as podgrouper_main
from tests.builders import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PROGRAMS: dict[str, click.Group] = {"kaisched": kaisched_main, "podgrouper": podgrouper_main}
# Files the documentation makes on the way (a snapshot dumped, then read) or that stand for
# the reader's own.
MADE_BY_THE_READER = {"now.json", "sim.png", "what-if.png", "my-cluster.yaml",
                      "gpu-pod-without-limit.yaml", "docs/simulate.png"}


def sh_blocks(page: Path) -> list[str]:
    return re.findall(r"^\s*```sh\n(.*?)^\s*```", page.read_text(), flags=re.S | re.M)


def commands(block: str) -> list[list[str]]:
    """Each kaisched or podgrouper command of a shell block, as its words."""
    text = re.sub(r"\\\n\s*", " ", block)            # continuation lines
    found = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        command: list[str] = []
        for word in [*words, "&&"]:
            if word in ("&&", "||", ";", "&", "|"):
                if command:
                    found.append(command)
                command = []
            else:
                command.append(word)
    return [c for c in (_program_call(c) for c in found) if c]


def _program_call(words: list[str]) -> list[str]:
    """The words from the program's name on, or [] for another command."""
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):   # VAR=value before a command
        words = words[1:]
    if words[:3] in (["python", "-m", "kaisched.cli"], ["python", "-m", "kaisched"]):
        return ["kaisched", *words[3:]]
    return words if words and words[0] in PROGRAMS else []


def documented() -> list[tuple[str, list[str]]]:
    return [(f"{page.relative_to(ROOT)}: {shlex.join(c)}", c)
            for page in PAGES for block in sh_blocks(page) for c in commands(block)]


def parse(words: list[str]) -> dict[str, Any]:
    """Parse a command line as click would, down to the subcommand, without running it;
    the subcommand's parameters."""
    group = PROGRAMS[words[0]]
    ctx = group.make_context(words[0], words[1:], resilient_parsing=False)
    rest = [*ctx._protected_args, *ctx.args]
    if not rest:
        return {}
    name, command, args = group.resolve_command(ctx, rest)
    assert command is not None, words
    with ctx:
        return command.make_context(name, args, parent=ctx, resilient_parsing=False).params


def test_the_documentation_shows_commands() -> None:
    shown = documented()
    assert len(shown) >= 20
    assert {c[1] for _, c in shown} >= {"simulate", "replay", "explain", "bench", "run", "sync"}


@pytest.mark.parametrize("where,words", documented(), ids=[w for w, _ in documented()])
def test_a_documented_command_parses(where: str, words: list[str]) -> None:
    try:
        params = parse(words)
    except click.exceptions.Exit as done:      # --help, --version: parsed, then done
        assert done.exit_code == 0, where
        return
    except click.ClickException as bad:
        pytest.fail(f"{where}: {bad.format_message()}")
    if words[1] == "simulate":                 # a scenario or config: a file or a bundled name
        for given in (params.get(k) for k in ("scenario", "config_path", "compare_path")):
            if given and given not in MADE_BY_THE_READER:
                assert Path(resolve(str(ROOT / given) if "/" in given else given)).is_file(), \
                    f"{where}: {given} is neither a file nor a bundled name"
    for word in words[2:]:
        if re.fullmatch(r"(config|tests|docs)/\S+\.(yaml|json|png)", word) \
                and word not in MADE_BY_THE_READER:
            assert (ROOT / word).is_file(), f"{where}: {word} does not exist"


@pytest.mark.parametrize("bad", [
    ["kaisched", "simulate", "--no-such-option"],
    ["kaisched", "replay", "f.yaml", "--output", "xml"],
    ["kaisched", "bench", "no-such-scenario"],
    ["kaisched", "replay"],
    ["podgrouper", "run", "--period"],
])
def test_the_check_refuses_what_click_refuses(bad: list[str]) -> None:
    with pytest.raises(click.ClickException):
        parse(bad)


def test_every_page_is_linked_from_the_readme_and_has_a_contents_list() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 400
    assert readme.index("pip install -e . && kaisched simulate") < readme.index("## ")
    assert "pip install -e '.[test]' && python -m pytest" in readme.split("## ", 1)[0]
    for page in PAGES[1:]:
        assert f"](docs/{page.name})" in readme, f"the README does not link docs/{page.name}"
    for page in [ROOT / "README.md", *PAGES[1:]]:
        if page.name in ("architecture.md", "cache.md"):
            continue
        text = page.read_text()
        assert "## Contents" in text, page.name
        for anchor in re.findall(r"\]\(#([\w-]+)\)", text):
            headings = {_anchor(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}
            assert anchor in headings, f"{page.name}: #{anchor} names no heading"


def test_links_between_pages_resolve() -> None:
    for page in PAGES:
        for target in re.findall(r"\]\(((?:\.\./)?[\w./-]+\.md)(?:#[\w-]+)?\)", page.read_text()):
            assert (page.parent / target).resolve().is_file(), f"{page.name}: {target}"


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_documented_list_is_what_list_prints() -> None:
    page = (ROOT / "docs" / "simulate.md").read_text()
    shown = page[page.index("`kaisched simulate --list` names them"):].split("```\n", 2)[1]
    assert shown.splitlines() == listing(80)


def test_the_suite_time_says_how_it_was_measured() -> None:
    """The development page says how long the suite takes on the 2-core machine, loaded and
    idle, each with how it was found (or why it was not), not one bare figure."""
    text = " ".join((ROOT / "docs" / "development.md").read_text().split())
    tests = text[text.index("## Tests"):]
    assert "on the 2-core development machine" in tests
    for state in ("**loaded**", "**idle**"):
        said = tests[tests.index(state):].split("; - **")[0]
        assert re.search(r"load average|uptime", said), f"{state}: how it was measured"
    assert "about three minutes on two cores" not in text
