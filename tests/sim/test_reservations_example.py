"""The bundled reservations example shows what it claims: with reservation backfill (the
built-in config) the short time-limited jobs are lent the room held for the big gangs, so
far fewer GPU-hours are held idle and the other jobs wait less; each big gang starts no
later than its reservation's start, with backfill or without. Skipping quiet ticks decides
as a session every period does (lending only shrinks as time passes: a job placed later
ends later)."""
from __future__ import annotations

from pathlib import Path

import pytest

from kaisched.builtins.catalog import register_builtins
from kaisched.framework import parse_config
from kaisched.sim.scenario import parse_scenario
from tests.builders.sim import both_ways, compared

EXAMPLES = Path(__file__).resolve().parents[2] / "kaisched" / "examples"
BIG = ("research/big-a", "research/big-b")


@pytest.fixture(scope="module")
def compare() -> list[dict]:
    return compared("reservations", "reservation-backfill-off")


def _first_waits(report: dict) -> list[float]:
    return sorted(j["firstWait"] for j in report["jobs"]
                  if j["name"] not in BIG and j["firstWait"] is not None)


def test_backfill_halves_the_idle_held_room_and_the_others_wait_less(compare: list[dict]) -> None:
    backfill, off = compare
    assert (backfill["config"], off["config"]) == ("built-in", "reservation-backfill-off")
    assert backfill["cluster"]["heldIdleGpuHours"] <= off["cluster"]["heldIdleGpuHours"] / 2
    on_waits, off_waits = _first_waits(backfill), _first_waits(off)
    assert on_waits[len(on_waits) // 2] < off_waits[len(off_waits) // 2]
    for report in compare:
        assert all(j["state"] == "succeeded" for j in report["jobs"])


def test_every_big_gang_starts_no_later_than_its_reservation(compare: list[dict]) -> None:
    for report in compare:
        for name in BIG:
            job = next(j for j in report["jobs"] if j["name"] == name)
            assert job["reservedStart"] is not None and job["placedWhole"]
            assert job["started"] <= job["reservedStart"], (report["config"], job)


@pytest.mark.parametrize("config", ["", "reservationBackfill: false\n"])
def test_skipping_quiet_ticks_changes_nothing_with_reservations(config: str) -> None:
    scenario = parse_scenario("until: 2h30m\n" + (EXAMPLES / "reservations.yaml").read_text(),
                              "reservations.yaml")
    # A session every 10 s: every period is thousands of sessions still.
    parsed = parse_config(config + "schedulePeriod: 10s\n", register_builtins())
    jumping, every = both_ways(scenario, parsed)
    assert jumping == every
