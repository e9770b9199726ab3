"""The memory check at start: the estimate against the peaks the bench
measured, the container's limit read from cgroup files (v2, else v1), and
the one line that refuses a cluster too big for it."""
from __future__ import annotations

from pathlib import Path

import pytest

from kaisched.errors import InputError
from kaisched.service import memorylimit

MIB = 1 << 20
# Peaks of `kaisched bench scale-10k --scale 1/2` and `scale-50k` (nodes, pods, MiB):
# the estimate must not be below what was measured, nor far above it.
MEASURED = [(10_000, 300_000, 854), (20_000, 600_000, 1_644), (50_000, 1_500_000, 4_120)]


@pytest.mark.parametrize(("nodes", "pods", "peak"), MEASURED)
def test_the_estimate_covers_the_measured_peaks(nodes: int, pods: int, peak: int) -> None:
    need = memorylimit.estimate(nodes, pods) / MIB
    assert peak <= need <= 1.6 * peak


def test_the_estimate_grows_with_nodes_and_pods() -> None:
    assert memorylimit.estimate(100, 1_000) < memorylimit.estimate(200, 1_000) < memorylimit.estimate(200, 2_000)


def write(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    return path


def test_cgroup_v2_limit(tmp_path: Path) -> None:
    v2 = write(tmp_path / "memory.max", "6442450944")
    assert memorylimit.cgroup_limit([v2, tmp_path / "none"]) == 6 << 30


def test_cgroup_v2_without_a_limit_is_none_even_with_v1_files(tmp_path: Path) -> None:
    v2, v1 = write(tmp_path / "memory.max", "max"), write(tmp_path / "v1", "1073741824")
    assert memorylimit.cgroup_limit([v2, v1]) is None


def test_cgroup_v1_when_there_is_no_v2(tmp_path: Path) -> None:
    v1 = write(tmp_path / "memory.limit_in_bytes", "1073741824")
    assert memorylimit.cgroup_limit([tmp_path / "missing", v1]) == 1 << 30


def test_cgroup_v1_unlimited_and_no_cgroup_at_all(tmp_path: Path) -> None:
    v1 = write(tmp_path / "memory.limit_in_bytes", "9223372036854771712")
    assert memorylimit.cgroup_limit([tmp_path / "missing", v1]) is None
    assert memorylimit.cgroup_limit([tmp_path / "a", tmp_path / "b"]) is None


def test_a_cluster_that_fits_is_not_refused() -> None:
    assert memorylimit.shortfall(10_000, 300_000, 2 << 30, "the container's limit (cgroup)") is None


def test_a_cluster_too_big_is_one_line_with_both_figures_and_the_flag() -> None:
    found = memorylimit.shortfall(50_000, 1_500_000, 4 << 30, "the container's limit (cgroup)")
    assert found is not None and "\n" not in found
    need = memorylimit.estimate(50_000, 1_500_000) / (1 << 30)
    assert found.startswith(f"a cluster of 50,000 nodes and 1,500,000 pods needs about {need:.1f} GiB")
    assert "more than the 4.0 GiB of the container's limit (cgroup)" in found
    assert "--memory-limit" in found


@pytest.mark.parametrize(("text", "value"), [("6Gi", 6 << 30), ("512Mi", 512 << 20),
                                             ("6G", 6_000_000_000), ("0", 0)])
def test_memory_limit_flag(text: str, value: int) -> None:
    assert memorylimit.parse_limit(text) == value


@pytest.mark.parametrize("text", ["lots", "-1Gi", "6", "1000000"])
def test_a_bad_memory_limit_flag_says_so(text: str) -> None:
    with pytest.raises(InputError, match="--memory-limit"):
        memorylimit.parse_limit(text)
