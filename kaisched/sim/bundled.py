"""The scenarios and configs shipped inside the package (kaisched/examples/), found by name
wherever kaisched is installed: a checkout, a wheel, the image. A file given on the command
line always wins over a bundled one of the same name."""
from __future__ import annotations

import textwrap
from importlib.resources import files
from pathlib import Path

import attrs
import yaml

DEMO = "demo"


@attrs.frozen
class Bundled:
    name: str
    path: Path
    kind: str           # "scenario"; "what-if" (only jobs: it adds to --from-snapshot's cluster);
                        # "config" (a scheduler config for --config/--compare)
    description: str


def examples_dir() -> Path:
    return Path(str(files("kaisched") / "examples"))


def bundled_examples() -> list[Bundled]:
    """Every bundled file, scenarios first, each with its one-line description."""
    found = []
    for path in sorted(examples_dir().glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        is_scenario = isinstance(data, dict) and bool({"nodePools", "nodeGroups", "jobs",
                                                       "generate"} & set(data))
        description = str(data.get("description", "")) if is_scenario else _first_comment(path)
        kind = "config" if not is_scenario else \
            "scenario" if {"nodePools", "nodeGroups"} & set(data) else "what-if"
        found.append(Bundled(path.stem, path, kind, description))
    return sorted(found, key=lambda b: (KINDS.index(b.kind), b.name))


KINDS = ("scenario", "what-if", "config")
HEADINGS = {"scenario": "scenarios (kaisched simulate NAME):",
            "what-if": "what-ifs on a snapshot (kaisched simulate --from-snapshot FILE NAME):",
            "config": "scheduler configs (--config NAME, --compare NAME):"}


def listing(columns: int = 80) -> list[str]:
    """`kaisched simulate --list`: the bundled files by kind, one each, its description
    folded at word boundaries to fit the columns."""
    examples = bundled_examples()
    width = max(len(b.name) for b in examples) + 4
    lines: list[str] = []
    for kind in KINDS:
        lines.append(HEADINGS[kind])
        for b in examples:
            if b.kind == kind:
                lines.extend(textwrap.wrap(b.description, max(columns - 1, width + 20),
                                           initial_indent=f"  {b.name:<{width - 2}}",
                                           subsequent_indent=" " * width,
                                           break_long_words=False, break_on_hyphens=False))
    return lines


def find_bundled(name: str) -> Path | None:
    """The bundled file NAME (with or without .yaml), or None."""
    stem = name[:-5] if name.endswith(".yaml") else name
    if "/" in stem or "\\" in stem or not stem:
        return None
    path = examples_dir() / f"{stem}.yaml"
    return path if path.is_file() else None


def resolve(arg: str) -> str:
    """ARG as given when it is a file; else the bundled file of that name; else ARG (whose
    reader then says it does not exist, naming the bundled ones)."""
    if Path(arg).exists():
        return arg
    found = find_bundled(arg)
    return str(found) if found is not None else arg


# What each kind of bundled file is given as, on the command line.
USES = {"scenario": "kaisched simulate NAME", "what-if": "kaisched simulate --from-snapshot FILE NAME",
        "config": "kaisched simulate --config NAME"}


def names_hint(kind: str = "scenario") -> str:
    """What to say after 'no such file': the names of that kind that would have worked."""
    names = [b.name for b in bundled_examples() if b.kind == kind]
    plural = "what-ifs" if kind == "what-if" else f"{kind}s"
    return f"bundled {plural}: {', '.join(names)} (kaisched simulate --list)"


def misplaced(arg: str, wanted: tuple[str, ...]) -> str | None:
    """When ARG names a bundled file of another kind than wanted (a scenario given as a
    config), what it is and how it is given; else None."""
    found = next((b for b in bundled_examples() if b.name == arg), None)
    if found is None or found.kind in wanted:
        return None
    return (f"{arg} is a bundled {found.kind}, not a {' or '.join(wanted)}: give it as "
            f"`{USES[found.kind].replace('NAME', arg)}`; {names_hint(wanted[0])}")


def _first_comment(path: Path) -> str:
    """A config's description: its leading comment, up to the first indented example."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#") or line.startswith("#  ") or line.strip() == "#":
            break
        lines.append(line[1:].strip())
    return " ".join(lines).split(". ")[0]
