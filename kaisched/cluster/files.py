"""The files a command is given, read and written at the boundary, so that the same
mistake reads the same whichever command made it: a missing file, a directory, a binary
file, bad YAML, a list where a mapping belongs, or an output path that cannot be written
(said before any work starts). Every message starts with the path."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from kaisched.errors import InputError, PathError

# The C loader where PyYAML has it (fast on big snapshots); every file is read with the
# same one, so a YAML mistake is worded alike whichever command reads it.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_text(path: str | Path) -> str:
    """A text file's content, or an InputError that says in one line why not."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PathError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise PathError(f"{path}: is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}); a binary file?") from None
    except OSError as exc:
        raise PathError(f"{path}: cannot read: {exc.strerror or exc.__class__.__name__}") from None
    if "\0" in text:          # valid UTF-8, but no text file holds a NUL
        raise InputError(f"{path}: not UTF-8 text (byte {text.index(chr(0))}); a binary file?")
    return text


def yaml_problem(exc: yaml.YAMLError) -> str:
    """What is wrong with a YAML text, and where: `invalid YAML at line 3: ...`."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"invalid YAML{where}: {problem}"


def parse_yaml(text: str, source: str) -> Any:
    """One YAML document, or an InputError naming the source and the line."""
    try:
        return yaml.load(text, Loader=LOADER)
    except yaml.YAMLError as exc:
        raise InputError(f"{source}: {yaml_problem(exc)}") from None


def not_a_mapping(data: Any, keys: str = "") -> str:
    """The one wording for a document that is not a mapping; the field path is the top level
    (never empty)."""
    got = "a list" if isinstance(data, list) else "empty" if data is None else \
        f"a {type(data).__name__}"
    return f"the top level: expected a mapping (key: value){keys}, got {got}"


def read_mapping(path: str | Path, keys: str = "", empty_ok: bool = False) -> dict[str, Any]:
    """A YAML file whose one document is a mapping (a config); an empty file is {} when
    empty_ok."""
    data = parse_yaml(read_text(path), str(path))
    if data is None and empty_ok:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"{path}: {not_a_mapping(data, keys)}")
    return data


def check_writable(path: str | Path, option: str) -> None:
    """Refuse, before any work starts, an output path that cannot be written: its folder
    missing or not a folder, the path a folder, or a place where no file can be made
    (read-only, /proc, /sys): a temporary file is made and removed beside it."""
    path = Path(path)
    folder = path.parent
    said = f"{option} {path}"
    if path.is_dir():
        raise PathError(f"{said}: is a directory")
    if not folder.exists():
        raise PathError(f"{said}: no directory {folder}")
    if not folder.is_dir():
        raise PathError(f"{said}: {folder} is not a directory")
    if path.exists() and not os.access(path, os.W_OK):
        raise PathError(f"{said}: not writable")
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".kaisched-write-check-")
    except OSError as exc:
        raise PathError(f"{said}: cannot write a file in {folder} "
                         f"({exc.strerror or exc.__class__.__name__})") from None
    os.close(fd)
    os.unlink(probe)
