"""Koordinator's optional gang annotations that do not parse: the gang uses
their defaults and the pod gets one warning Event naming the bad values,
told once, again only when they change."""
from __future__ import annotations

from kaisched.api.clock import ManualClock
from kaisched.api.types import GangMode
from kaisched.cluster.kinds import EVENT, POD
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler

from .conftest import build_node, build_pod, load_cluster, load_test_config, snapshot

K = "gang.scheduling.koordinator.sh/"
BAD = {K + "name": "ring", K + "min-available": "2", K + "total-number": "two",
       K + "mode": "Sometimes", K + "waiting-time": "soon", K + "groups": "[not json"}


def _warnings(cluster) -> list[str]:       # type: ignore[no-untyped-def]
    return [e["message"] for e in cluster.list(EVENT, "default")
            if e["reason"] == "IgnoredGangAnnotation"]


def test_bad_optional_annotations_fall_back_to_defaults() -> None:
    job = snapshot([build_pod(f"r-{i}", annotations=BAD) for i in range(2)]).jobs["default/ring"]
    assert job.problem is None
    assert job.min_member == 2
    assert job.spec.mode is GangMode.STRICT
    assert job.spec.gang_group == () and job.spec.wait_time is None


def test_warning_event_names_the_bad_values_once() -> None:
    clock = ManualClock()
    cluster = load_cluster([build_node("n", cpu=8),
                            *(build_pod(f"r-{i}", annotations=BAD) for i in range(2))], clock)
    config, registry = load_test_config()
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    scheduler.run_once()
    messages = _warnings(cluster)
    assert len(messages) == 2           # one per pod
    for bad in ("'two'", "'Sometimes'", "'soon'", "'[not json'"):
        assert all(bad in m for m in messages), messages
    clock.advance(1.0)
    scheduler.run_once()
    assert len(_warnings(cluster)) == 2     # not told again
    cluster.patch(POD, "default", "r-0", {"metadata": {"annotations": {K + "mode": "Strict"}}})
    clock.advance(1.0)
    scheduler.run_once()
    assert len(_warnings(cluster)) == 3     # what is wrong changed: told again
