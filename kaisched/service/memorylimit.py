"""Whether the cluster fits in the memory the scheduler is given, said in one
line at start rather than learned from an OOM kill in the middle of a cycle.

The scheduler keeps every node and pod of the cluster, converted, and at
start also the objects of its first lists while it converts them. What that
takes grows with the counts, which the API server tells without listing
everything (a list of one says how many remain). The estimate is a line
through the peaks `kaisched bench scale-10k` measured at 10,000, 20,000 and
50,000 nodes (30 pods a node; see docs/performance.md), plus a margin: the
bench's pods are lean, real ones carry more labels, annotations and
containers. The limit is the container's (cgroup v2 memory.max, else v1
memory.limit_in_bytes), or what --memory-limit says.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from kaisched.api.quantity import parse_quantity
from kaisched.errors import InputError

MIB = 1 << 20
# The line through the measured peaks (MiB = BASE + nodes * NODE + pods * POD):
# 854, 1,644 and 4,120 MiB at 10,000, 20,000 and 50,000 nodes (2026-11-27).
BASE_MIB = 40.0
NODE_KIB = 6.0
POD_KIB = 2.6
MARGIN = 1.25           # real pods are larger than the bench's
CGROUP_FILES = (Path("/sys/fs/cgroup/memory.max"),                     # cgroup v2
                Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))  # cgroup v1
_UNLIMITED = 1 << 60    # v1 says "no limit" with a number near 2**63


def estimate(nodes: int, pods: int) -> int:
    """Bytes the scheduler needs for a cluster of this many nodes and pods."""
    mib = BASE_MIB + (nodes * NODE_KIB + pods * POD_KIB) / 1024
    return int(mib * MARGIN * MIB)


def cgroup_limit(files: Sequence[Path] = CGROUP_FILES) -> int | None:
    """The container's memory limit in bytes (None: none, or not in a cgroup)."""
    for path in files:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text == "max":
            return None
        try:
            value = int(text)
        except ValueError:
            continue
        return value if value < _UNLIMITED else None
    return None


def parse_limit(text: str) -> int:
    """--memory-limit: a quantity with its unit (6Gi, 512Mi, 6G); 0 checks nothing.
    A number without a unit is refused, as a duration without one is: 6 could be
    bytes or GiB."""
    try:
        value = parse_quantity(text)
    except ValueError as exc:
        raise InputError(f"--memory-limit: {exc}") from None
    if value and text.strip().lstrip("+").replace(".", "", 1).isdigit():
        raise InputError(f"--memory-limit: {text} could mean bytes or GiB; give a unit, "
                         f"e.g. {text}Gi or {text}Mi (0: no check)")
    if value < 0:
        raise InputError(f"--memory-limit: must not be negative, not {text!r}")
    return int(value)


def shortfall(nodes: int, pods: int, limit: int, source: str) -> str | None:
    """Why the cluster does not fit in limit bytes (source: where the limit
    comes from), or None when it fits."""
    need = estimate(nodes, pods)
    if need <= limit:
        return None
    return (f"a cluster of {nodes:,} nodes and {pods:,} pods needs about {_gib(need)} of memory, "
            f"more than the {_gib(limit)} of {source}: give the scheduler more memory, "
            f"or start it with --memory-limit SIZE (0: no check) to override")


def _gib(value: int) -> str:
    if value < 1 << 30:     # a small cluster or limit: "0.0 GiB" would say nothing
        return f"{value / MIB:.0f} MiB"
    return f"{value / (1 << 30):.1f} GiB"
