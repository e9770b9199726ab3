"""Every command that writes a file checks the path before any work starts: one `error:`
line, exit 2 (refused before the work, as click refuses a bad command line), no traceback, and nothing run (no snapshot read, no cluster asked, no
simulation): a missing directory, a path under a file, a directory, a place where no file
can be made (/proc), an unknown plot type."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from kaisched.cli import main
from kaisched.cluster.files import check_writable
from kaisched.errors import InputError

# A kubeconfig that would make snapshot-dump fail differently if it got as far as reading it.
NO_CLUSTER = ["--kubeconfig", "/nonexistent/kubeconfig"]


def bad_paths(tmp_path: Path) -> list[tuple[str, str]]:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    return [
        (str(tmp_path / "missing" / "x.json"), f"no directory {tmp_path / 'missing'}"),
        (str(a_file / "x.json"), f"{a_file} is not a directory"),
        ("/proc/x.json", "cannot write a file in /proc"),
    ]


COMMANDS = {
    "simulate --dump-snapshot": lambda p: ["simulate", "--dump-snapshot", p],
    "simulate --plot": lambda p: ["simulate", "--plot", p.replace(".json", ".png")],
    "snapshot-dump -f": lambda p: ["snapshot-dump", *NO_CLUSTER, "-f", p],
    "simulate --from-snapshot --dump-snapshot":
        lambda p: ["simulate", "--from-snapshot", "/nonexistent/snap.json", "--dump-snapshot", p],
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", range(3), ids=["no-directory", "under-a-file", "proc"])
def test_an_unwritable_output_is_one_line_before_any_work(tmp_path: Path, command: str,
                                                            case: int) -> None:
    path, why = bad_paths(tmp_path)[case]
    args = COMMANDS[command](path)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    option = args[-2]
    shown = args[-1]
    # /proc's reason (no such file, permission denied) is the kernel's to choose
    assert result.stderr.startswith(f"error: {option} {shown}: {why}")
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n")
    assert result.stdout == "" and "Traceback" not in result.output


def test_a_directory_or_an_unknown_plot_type_is_refused_before_the_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["simulate", "--plot", str(tmp_path / "x.gif")])
    assert result.exit_code == 2
    assert result.stderr == (f"error: --plot {tmp_path / 'x.gif'}: the file type follows the "
                             "extension: .png, .svg, .pdf\n")
    result = CliRunner().invoke(main, ["simulate", "--dump-snapshot", str(tmp_path)])
    assert result.exit_code == 2 and "is a directory" in result.stderr


def test_the_helper_leaves_nothing_behind_and_lets_a_good_path_through(tmp_path: Path) -> None:
    check_writable(tmp_path / "out.json", "-o")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "out.json").write_text("old")
    check_writable(tmp_path / "out.json", "-o")         # an existing file may be replaced
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write in a read-only directory")
def test_a_read_only_directory_is_refused(tmp_path: Path) -> None:
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(InputError, match="cannot write a file in"):
            check_writable(tmp_path / "x.png", "--plot")
    finally:
        tmp_path.chmod(0o700)


def test_a_good_path_is_written(tmp_path: Path) -> None:
    dump, plot = tmp_path / "now.json", tmp_path / "run.svg"
    result = CliRunner().invoke(main, ["simulate", "--until", "5m", "--dump-snapshot", str(dump),
                                       "--plot", str(plot)])
    assert result.exit_code == 0, result.stderr
    assert dump.stat().st_size > 0 and plot.stat().st_size > 0
