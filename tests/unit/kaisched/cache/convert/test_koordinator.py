"""Koordinator's optional gang annotations that do not parse: the gang uses
their defaults and the pod gets one warning Event naming the bad values,
told once, again only when they change."""
from __future__ import annotations

from kaisched.api.clock import ManualClock
from kaisched.api.types import GangMode
from kaisched.cluster.kinds import EVENT, KOORD_PODGROUP, POD
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from tests.builders.objects import build_node, build_pod, load_cluster, load_test_config, snapshot

K = "gang.scheduling.koordinator.sh/"
_KOORD_PG = (KOORD_PODGROUP, "default", "ring")
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


# -- as Koordinator's own gang cache tests have it -------------------------------------

def test_the_gang_takes_its_settings_from_the_first_pod_whose_minimum_parses() -> None:
    """gang_cache_test.go: pod3's min-available does not parse, pod4's does (with
    every optional value illegal): the gang is pod4's, pod3 a member of it."""
    pods = [build_pod("pod3", annotations={K + "name": "gangb", K + "min-available": "xxx"}),
            build_pod("pod4", annotations={K + "name": "gangb", K + "min-available": "2",
                                           K + "total-number": "1", K + "mode": "WenShiqi222",
                                           K + "waiting-time": "WenShiqi222",
                                           K + "groups": "ganga,gangx"})]
    job = snapshot(pods).jobs["default/gangb"]
    assert job.problem is None and set(job.tasks) == {"default/pod3", "default/pod4"}
    assert (job.min_member, job.spec.mode, job.spec.gang_group, job.spec.wait_time) == (
        2, GangMode.STRICT, (), None)


def test_a_zero_minimum_and_waiting_time_are_legal_defaults() -> None:
    """min-available 0 is no minimum (a gang of one here); a waiting-time of 0
    or below is the default."""
    for wait in ("0", "-20s"):
        job = snapshot([build_pod("p", annotations={K + "name": "g", K + "min-available": "0",
                                                     K + "waiting-time": wait})]).jobs["default/g"]
        assert (job.problem, job.min_member, job.spec.wait_time) == (None, 1, None)


def test_pods_made_before_their_podgroup_wait_for_it_then_start() -> None:
    """A pod naming a Koordinator PodGroup that does not exist yet belongs to a
    gang not set up: it waits (never alone), and the gang starts once the
    PodGroup is made, with the PodGroup's own settings."""
    clock = ManualClock()
    label = {"pod-group.scheduling.sigs.k8s.io": "ring"}
    cluster = load_cluster([build_node("n", cpu=8),
                            *(build_pod(f"r-{i}", labels=label) for i in range(3))], clock)
    config, registry = load_test_config()
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    assert dict(scheduler.run_once().placed) == {}
    said = [c["message"] for c in cluster.get(POD, "default", "r-0")["status"]["conditions"]]
    assert said == ["PodGroup (scheduling.sigs.k8s.io) default/ring does not exist"]
    cluster.create({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
                    "metadata": {"name": "ring", "namespace": "default", "annotations": {
                        K + "mode": "NonStrict", K + "groups": "[not json"}},
                    "spec": {"minMember": 3}})
    clock.advance(1.0)
    assert set(scheduler.run_once().placed) == {f"default/r-{i}" for i in range(3)}
    job = snapshot(cluster.list(POD) + [cluster.get(*_KOORD_PG)]).jobs["default/ring"]
    assert (job.min_member, job.spec.mode, job.spec.gang_group) == (3, GangMode.NON_STRICT, ())
