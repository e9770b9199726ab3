"""The image builds: a wheel is built from exactly the files the Dockerfile's build
stage copies (so a file setup.cfg needs and the Dockerfile forgets fails here, not in
`docker build`), and it holds both console scripts and every data file. No docker
engine is needed: the build stage's only step is this `pip wheel`."""
from __future__ import annotations

import configparser
import subprocess
import sys
import zipfile

import pytest

from tests.builders import ROOT
from tests.builders.install import copy_context, stages


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    build = stages()[0]
    assert any(op == "RUN" and "pip wheel" in arg for op, arg in build)
    tree = tmp_path_factory.mktemp("context")
    copy_context(tree, build)
    out = tmp_path_factory.mktemp("wheels")
    # As the build stage does (its build backend from the package index), without the
    # dependencies' wheels: those do not depend on this checkout.
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--wheel-dir", str(out), str(tree)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (built,) = out.glob("kaisched-*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_builds_from_what_the_dockerfile_copies_and_has_both_commands(
        wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    scripts = configparser.ConfigParser()
    scripts.read_string(wheel.read(entry_points).decode())
    assert dict(scripts["console_scripts"]) == {"kaisched": "kaisched.cli:main",
                                                "podgrouper": "podgrouper.cli:main"}
    for package in ("kaisched/cli/__init__.py", "podgrouper/cli.py", "actions/__init__.py",
                    "plugins/__init__.py"):
        assert package in names, package


def test_every_data_file_setup_cfg_names_is_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    data = [n for n in wheel.namelist() if ".data/data/" in n]
    for folder, files in cfg["options.data_files"].items():
        for pattern in (f.strip() for f in files.replace(",", "\n").split("\n") if f.strip()):
            for path in ROOT.glob(pattern):
                assert any(n.endswith(f"{folder}/{path.name}") for n in data), (folder, path.name)


def test_the_image_runs_as_non_root_with_its_config() -> None:
    final = stages()[-1]
    (user,) = [arg for op, arg in final if op == "USER"]
    assert int(user.split(":")[0]) != 0 and int(user.split(":")[1]) != 0
    copied = [arg.split()[0] for op, arg in final if op == "COPY" and "--from" not in arg]
    assert copied == ["config/scheduler.yaml"]
    assert (ROOT / copied[0]).exists()
