"""What the image and the wheel are built from: the Dockerfile read as docker reads it, and
its build stage's COPY lines played into a folder."""
from __future__ import annotations

import fnmatch
import re
import shutil
from pathlib import Path

from tests.builders import ROOT


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip())
            for line in joined.splitlines() if line.strip()]


def stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions, one list per FROM."""
    out: list[list[tuple[str, str]]] = []
    for op, arg in instructions((ROOT / "Dockerfile").read_text()):
        if op == "FROM":
            out.append([])
        out[-1].append((op, arg))
    return out


def ignored() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def copy_context(into: Path, steps: list[tuple[str, str]]) -> None:
    """Each COPY of a stage from the build context, into its WORKDIR, as docker does
    (what .dockerignore leaves out never reaches the build)."""
    patterns = [p.removeprefix("**/") for p in ignored()]

    def skip(_folder: str, names: list[str]) -> set[str]:
        return {n for n in names if any(fnmatch.fnmatch(n, p) for p in patterns)}

    for op, arg in steps:
        if op != "COPY":
            continue
        assert not arg.startswith("--"), f"a COPY from elsewhere in the build stage: {arg}"
        *sources, dest = arg.split()
        target = into / dest.removeprefix("./")
        for source in sources:
            path = ROOT / source
            assert path.exists(), f"the Dockerfile copies {source}, which does not exist"
            if path.is_dir():
                shutil.copytree(path, target, ignore=skip, dirs_exist_ok=True)
            else:
                target.mkdir(parents=True, exist_ok=True) if dest.endswith("/") else None
                shutil.copy2(path, target / path.name if dest.endswith("/") else target)
