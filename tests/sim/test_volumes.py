"""Simulated storage: a scenario's StorageClass with a slow provisioner; a
gang's pods, each with its own ephemeral volume, are placed in the zone the
class allows and bound only once their claims are; the report shows the wait."""
from __future__ import annotations

from pathlib import Path

import pytest

from kaisched.cluster.kinds import PV, PVC
from kaisched.framework import SchedulerConfig
from kaisched.sim.report import build_report
from kaisched.sim.scenario import ScenarioError, load_scenario, parse_scenario
from kaisched.sim.simulation import Simulation

EXAMPLE = Path(__file__).resolve().parents[2] / "kaisched" / "examples" / "volumes.yaml"


def test_gang_waits_for_its_volumes_then_runs(config: SchedulerConfig) -> None:
    sim = Simulation(load_scenario(EXAMPLE), config)
    result = sim.run()
    report = build_report(result, "default")

    jobs = {j["name"]: j for j in report["jobs"]}
    assert all(j["state"] == "succeeded" for j in jobs.values()), jobs
    assert jobs["research/bert"]["placedWhole"]
    # Three claims, each provisioned 30s after its node was selected.
    assert report["volumeWait"]["claims"] == 3
    assert report["volumeWait"]["max"] >= 30
    assert jobs["research/bert"]["wait"] >= 30
    assert jobs["research/notebook"]["wait"] < 30      # no volumes: not held up by bert's
    # Ephemeral claims go with their pods, and their volumes with them.
    assert not sim.cluster.list(PVC) and not sim.cluster.list(PV)


def test_volumes_are_in_the_allowed_zone(config: SchedulerConfig) -> None:
    sim = Simulation(load_scenario(EXAMPLE), config)
    seen: list[str] = []
    original = sim.storage._bind_pair

    def spy(claim, volume, now):      # type: ignore[no-untyped-def]
        terms = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        seen.extend(e["values"][0] for t in terms for e in t["matchExpressions"])
        original(claim, volume, now)

    sim.storage._bind_pair = spy      # type: ignore[method-assign]
    sim.run()
    assert seen == ["zone-b"] * 3


def test_a_volume_naming_an_unknown_class_is_refused() -> None:
    text = EXAMPLE.read_text().replace("storageClass: zonal-ssd, size: 100Gi}]}\n  - name: notebook",
                                       "storageClass: slow, size: 100Gi}]}\n  - name: notebook")
    with pytest.raises(ScenarioError, match=r"worker.volumes \(ckpt\).storageClass: no storage class named 'slow'"):
        parse_scenario(text, "volumes.yaml")
