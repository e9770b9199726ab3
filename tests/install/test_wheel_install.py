"""What a newcomer gets from `pip install kaisched`: a wheel built from what the Dockerfile
copies, installed (without its dependencies, which this environment already has) into a
fresh venv, runs from a directory with no checkout in sight: `kaisched simulate --list`,
every bundled scenario by name, the what-if on a snapshot, `--version` of both commands and
`python -m kaisched`.

The dependencies are this interpreter's, wherever it keeps them: a venv's own site-packages
when the tests run in one (as the README sets it up), the system's when they run without (as
CI does). `venv --system-site-packages` would see only the base Python's, which a venv's
interpreter does not use: there the wheel found none of them."""
from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

from kaisched.sim.bundled import bundled_examples
from tests.builders import ROOT
from tests.builders.install import copy_context, stages

PATIENCE = 600      # seconds: only bounds a hang


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("context")
    copy_context(tree, stages()[0])
    wheels = tmp_path_factory.mktemp("wheels")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(wheels), str(tree)])
    (wheel,) = wheels.glob("kaisched-*.whl")
    env = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", str(env)])
    python = str(env / "bin" / "python")
    run([python, "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)])
    # Then this interpreter's packages, after the venv's own (the wheel first): each
    # directory added as a site directory, its .pth files read, as a system site is.
    purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    (Path(purelib.stdout.strip()) / "_kaisched_test_dependencies.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in package_dirs()))
    return env


def package_dirs() -> list[str]:
    """Where this interpreter finds installed packages: its site directories (a venv's own
    in a venv, and the base's too if that venv sees them) and the user's, if it reads it."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dirs if Path(d).is_dir()]


def run(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    # NO_COLOR and a fixed width: the same text wherever the tests run.
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "80", "PYTHONPATH": ""}
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=PATIENCE,
                          env=env, check=False)
    assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done


def test_the_installed_package_is_the_wheel_not_this_checkout(venv: Path, tmp_path: Path) -> None:
    where = run([str(venv / "bin" / "python"), "-c", "import kaisched; print(kaisched.__file__)"],
                cwd=tmp_path).stdout.strip()
    assert Path(where).resolve().is_relative_to(venv.resolve()), where


def test_list_names_every_bundled_file(venv: Path, tmp_path: Path) -> None:
    listed = run([str(venv / "bin" / "kaisched"), "simulate", "--list"], cwd=tmp_path).stdout
    names = [b.name for b in bundled_examples()]
    assert {"demo", "preemption", "starvation", "next-hour", "volumes", "workloads-2026",
            "no-starvation-guard"} <= set(names)
    for name in names:
        assert f"  {name} " in listed, name
    assert max(len(line) for line in listed.splitlines()) <= 80


@pytest.mark.parametrize("example", [b for b in bundled_examples() if b.kind == "scenario"],
                         ids=lambda b: b.name)
def test_every_bundled_scenario_runs_by_name(venv: Path, tmp_path: Path, example) -> None:
    done = run([str(venv / "bin" / "kaisched"), "simulate", example.name, "--until", "30m"],
               cwd=tmp_path)
    assert done.stdout.startswith(f"{example.name}: {example.description}")


def test_the_what_if_runs_by_name_on_a_dumped_snapshot(venv: Path, tmp_path: Path) -> None:
    kaisched = str(venv / "bin" / "kaisched")
    run([kaisched, "simulate", "starvation", "--until", "20m", "--dump-snapshot", "now.json"],
        cwd=tmp_path)
    done = run([kaisched, "simulate", "--from-snapshot", "now.json", "next-hour", "--until", "40m",
                "--compare", "no-starvation-guard"], cwd=tmp_path)
    assert "no-starvation-guard" in done.stdout and "next-hour" in done.stdout


def test_a_file_of_a_bundled_name_wins(venv: Path, tmp_path: Path) -> None:
    mine = (ROOT / "kaisched" / "examples" / "demo.yaml").read_text().replace(
        "name: demo", "name: mine", 1)
    (tmp_path / "demo").write_text(mine)
    done = run([str(venv / "bin" / "kaisched"), "simulate", "demo", "--until", "5m"], cwd=tmp_path)
    assert done.stdout.startswith("mine: ")


def test_versions_and_python_m(venv: Path, tmp_path: Path) -> None:
    for command in ([str(venv / "bin" / "kaisched"), "--version"],
                    [str(venv / "bin" / "podgrouper"), "--version"],
                    [str(venv / "bin" / "python"), "-m", "kaisched", "--version"]):
        assert "0.1.0" in run(command, cwd=tmp_path).stdout, command
    helped = run([str(venv / "bin" / "python"), "-m", "kaisched", "--help"], cwd=tmp_path).stdout
    assert helped.startswith("Usage: python -m kaisched")
