"""`kaisched bench binds` runs end to end (its figures are read, not asserted):
every pod of a tiny cluster is bound over HTTP to the emulator's process."""
from __future__ import annotations

from kaisched.bench.binds import run_binds


def test_the_binds_bench_binds_every_pod() -> None:
    result = run_binds(scale=0.004, binders=(1, 8), timeout=60.0)
    assert result["pods"] == 16 and result["nodes"] == 2
    assert [r["binders"] for r in result["runs"]] == [1, 8]
    assert all(r["bound"] == 16 and r["binds_per_second"] > 0 for r in result["runs"])
