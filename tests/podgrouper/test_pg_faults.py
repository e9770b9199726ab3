"""Bad owners and API faults: an Event on the pod and the default grouping, never a
crash, and one bad pod never stops the others. Faults are injected at our own seam,
a ClusterClient wrapped around the memory backend."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable

import attrs
import pytest

from kaisched.cluster.client import WatchEvent
from kaisched.cluster.kinds import EVENT, POD, PODGROUP, Kind
from kaisched.cluster.memory import MemoryCluster
from kaisched.errors import (
    ApiError,
    GoneError,
    NotFoundError,
    PermanentApiError,
    TransientApiError,
)
from podgrouper import PodGrouper

Obj = dict[str, Any]


@attrs.define
class Fault:
    method: str
    error: ApiError
    when: Callable[..., bool]
    times: int


class FaultyCluster:
    """The memory backend, with errors injected per method, and a watch that can be
    made to miss PodGroup events (as a lagging watch does)."""

    def __init__(self, cluster: MemoryCluster) -> None:
        self.cluster = cluster
        self.faults: list[Fault] = []
        self.hide_podgroups = False

    def inject(self, method: str, error: ApiError, when: Callable[..., bool] = lambda *_: True,
               times: int = 1_000_000) -> None:
        self.faults.append(Fault(method, error, when, times))

    def _check(self, method: str, *args: Any) -> None:
        for fault in self.faults:
            if fault.method == method and fault.times > 0 and fault.when(*args):
                fault.times -= 1
                raise fault.error

    def list(self, kind: Kind, namespace: str | None = None) -> list[Obj]:
        return self.cluster.list(kind, namespace)

    def get(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        self._check("get", kind, namespace, name)
        return self.cluster.get(kind, namespace, name)

    def create(self, obj: Obj) -> Obj:
        self._check("create", obj)
        return self.cluster.create(obj)

    def patch(self, kind: Kind, namespace: str, name: str, patch: Obj) -> Obj:
        self._check("patch", kind, namespace, name)
        return self.cluster.patch(kind, namespace, name, patch)

    def patch_status(self, kind: Kind, namespace: str, name: str, status: Obj) -> Obj:
        return self.cluster.patch_status(kind, namespace, name, status)

    def delete(self, kind: Kind, namespace: str, name: str) -> None:
        self.cluster.delete(kind, namespace, name)

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self.cluster.bind(namespace, name, uid, node)

    def evict(self, namespace: str, name: str) -> None:
        self.cluster.evict(namespace, name)

    def subscribe(self, kinds: Iterable[Kind]) -> _Subscription:
        return _Subscription(self, self.cluster.subscribe(kinds))


class _Subscription:
    def __init__(self, owner: FaultyCluster, inner: Any) -> None:
        self.owner, self.inner = owner, inner

    def settle(self) -> None:
        self.inner.settle()

    def drain(self) -> list[WatchEvent]:
        self.owner._check("drain")
        events = self.inner.drain()
        if self.owner.hide_podgroups:
            events = [e for e in events if e.kind != PODGROUP]
        return events


@pytest.fixture
def faulty(kit: Any) -> FaultyCluster:
    return FaultyCluster(kit.cluster)


def grouper_on(faulty: FaultyCluster, kit: Any) -> PodGrouper:
    return PodGrouper(faulty, kit.clock)


def kind_is(name: str) -> Callable[..., bool]:
    return lambda kind, *_: kind.kind == name


def pytorch(kit: Any, name: str, spec: Obj | None) -> Obj:
    return kit.owner("kubeflow.org/v1", "PyTorchJob", name, spec)


def pytorch_spec(workers: Any) -> Obj:
    return {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": workers}}}


# -- malformed owners ------------------------------------------------------------
def test_malformed_owners_get_events_and_the_others_are_still_grouped(
        kit: Any, name_of: Callable[[Obj], str]) -> None:
    good = pytorch(kit, "good", pytorch_spec(1))
    negative = pytorch(kit, "negative", pytorch_spec(-1))
    no_spec = pytorch(kit, "no-spec", None)
    not_int = kit.owner("kubeflow.org/v1", "TFJob", "not-int",
                        {"tfReplicaSpecs": {"Worker": {"replicas": "three"}}})
    a = kit.owner("example.com/v1", "Widget", "a")
    b = kit.create({"apiVersion": "example.com/v1", "kind": "Widget",
                    "metadata": {"name": "b", "namespace": "default",
                                 "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Widget",
                                                      "name": "a", "uid": a["metadata"]["uid"],
                                                      "controller": True}]}})
    a = kit.patch(a, {"metadata": {"ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Widget",
                                                        "name": "b", "uid": b["metadata"]["uid"],
                                                        "controller": True}]}})
    kit.pod("good-master-0", good, labels={"training.kubeflow.org/replica-type": "master"})
    kit.pod("negative-worker-0", negative, labels={"training.kubeflow.org/replica-type": "worker"})
    kit.pod("no-spec-worker-0", no_spec)
    kit.pod("not-int-worker-0", not_int)
    kit.pod("in-a-cycle", a)
    orphan = kit.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "orphan", "namespace": "default", "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone-5d4f",
            "uid": "4b1d0c3e-0000-4000-8000-000000000000", "controller": True}]},
        "spec": {"schedulerName": "kaisched"}})

    kit.sync()

    assert kit.podgroup(name_of(good))["spec"]["minMember"] == 2
    assert kit.subgroup_of("good-master-0") == "master"
    assert kit.events("good-master-0") == []
    expected = {
        "negative-worker-0": (negative, "spec.pytorchReplicaSpecs.Worker.replicas must not be negative, got -1"),
        "no-spec-worker-0": (no_spec, "spec is missing"),
        "not-int-worker-0": (not_int, "spec.tfReplicaSpecs.Worker.replicas must be an integer, got 'three'"),
        "in-a-cycle": (b, "ownerReferences form a cycle: Pod/in-a-cycle -> Widget/a -> Widget/b -> Widget/a"),
        "orphan": (orphan, "owner ReplicaSet/gone-5d4f not found; grouped by Pod/orphan"),
    }
    for pod, (top, message) in expected.items():
        events = kit.events(pod)
        assert len(events) == 1, pod
        event = events[0]
        assert (event["type"], event["reason"]) == ("Warning", "PodGroupDefaulted")
        assert message in event["message"]
        assert event["involvedObject"]["kind"] == "Pod"
        assert event["source"] == {"component": "podgrouper"}
        group = kit.podgroup(name_of(top))
        assert group["spec"] == {"minMember": 1, "queue": "default"}, pod
        assert kit.group_of(pod) == name_of(top)
        assert kit.subgroup_of(pod) is None
    assert kit.sync() == 0                                   # no Event twice


def test_bad_min_member_annotation_is_an_event_and_ignored(kit: Any,
                                                           name_of: Callable[[Obj], str]) -> None:
    job = kit.owner("kubeflow.org/v2beta1", "MPIJob", "pi",
                    {"mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {"replicas": 2}}},
                    annotations={"kaisched.io/min-member": "lots"})
    kit.pod("pi-worker-0", job, labels={"training.kubeflow.org/job-role": "worker"})
    kit.sync()
    assert kit.podgroup(name_of(job))["spec"]["minMember"] == 3
    [event] = kit.events("pi-worker-0")
    assert event["reason"] == "PodGroupOverrideIgnored"
    assert "kaisched.io/min-member must be an integer >= 1, got 'lots'" in event["message"]


def test_owner_broken_after_grouping_gets_an_event_on_the_podgroup(
        kit: Any, name_of: Callable[[Obj], str]) -> None:
    job = pytorch(kit, "pt", pytorch_spec(3))
    kit.pod("pt-worker-0", job)
    kit.sync()
    kit.patch(job, {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": -3}}}})
    assert kit.sync() == 2                                   # the patch and its Event
    assert kit.podgroup(name_of(job))["spec"] == {"minMember": 1, "queue": "default"}
    [event] = kit.events(name_of(job))
    assert event["involvedObject"]["kind"] == "PodGroup" and "must not be negative" in event["message"]
    assert kit.sync() == 0


# -- API faults --------------------------------------------------------------------
def test_forbidden_owner_ends_the_walk_with_an_event(kit: Any, faulty: FaultyCluster,
                                                     name_of: Callable[[Obj], str]) -> None:
    made = {o["metadata"]["name"]: o for o in kit.load("mpijob.yaml")}
    faulty.inject("get", PermanentApiError('mpijobs.kubeflow.org "pi" is forbidden', 403),
                  kind_is("MPIJob"))
    grouper_on(faulty, kit).sync()
    launcher_job = made["pi-launcher"]
    assert kit.group_of("pi-launcher-x7bq2") == name_of(launcher_job)
    [event] = kit.events("pi-launcher-x7bq2")
    assert event["message"] == "cannot read owner MPIJob/pi: forbidden; grouped by Job/pi-launcher"
    assert kit.group_of("pi-worker-0") == name_of(made["pi-worker-0"])


def test_transient_owner_read_is_retried_next_sync(kit: Any, faulty: FaultyCluster,
                                                   name_of: Callable[[Obj], str]) -> None:
    job = kit.load("mpijob.yaml")[0]
    faulty.inject("get", TransientApiError("etcdserver: request timed out", 504),
                  kind_is("MPIJob"), times=1)
    grouper = grouper_on(faulty, kit)
    grouper.sync()
    # The launcher (first by name) hit the timeout; the workers read the MPIJob after it.
    assert kit.group_of("pi-launcher-x7bq2") is None
    assert {kit.group_of(f"pi-worker-{i}") for i in range(4)} == {name_of(job)}
    assert grouper.sync() == 1
    assert kit.group_of("pi-launcher-x7bq2") == name_of(job)
    assert kit.events() == []


def test_transient_pod_patch_is_retried(kit: Any, faulty: FaultyCluster,
                                        name_of: Callable[[Obj], str]) -> None:
    job = kit.owner("batch/v1", "Job", "j", {})
    kit.pod("j-1", job)
    faulty.inject("patch", TransientApiError("too many requests", 429), times=1)
    grouper = grouper_on(faulty, kit)
    assert grouper.sync() == 1                               # the PodGroup only
    assert kit.group_of("j-1") is None
    assert grouper.sync() == 1                               # now the pod
    assert kit.group_of("j-1") == name_of(job)


def test_refused_podgroup_is_an_event_and_the_others_go_on(kit: Any, faulty: FaultyCluster,
                                                           name_of: Callable[[Obj], str]) -> None:
    bad, good = kit.owner("batch/v1", "Job", "bad", {}), kit.owner("batch/v1", "Job", "good", {})
    kit.pod("bad-1", bad)
    kit.pod("good-1", good)
    faulty.inject("create", PermanentApiError("PodGroup is invalid: spec.queue: Too long", 422),
                  lambda obj: obj["kind"] == "PodGroup" and obj["metadata"]["name"] == name_of(bad))
    grouper_on(faulty, kit).sync()
    assert kit.group_of("good-1") == name_of(good)
    assert kit.group_of("bad-1") is None
    [event] = kit.events("bad-1")
    assert event["reason"] == "PodGroupFailed" and "spec.queue: Too long" in event["message"]


def test_events_that_cannot_be_written_do_not_stop_grouping(kit: Any, faulty: FaultyCluster,
                                                            name_of: Callable[[Obj], str]) -> None:
    pod = kit.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "orphan", "namespace": "default", "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone", "controller": True}]},
        "spec": {"schedulerName": "kaisched"}})
    faulty.inject("create", PermanentApiError("events is forbidden", 403),
                  lambda obj: obj["kind"] == "Event")
    assert grouper_on(faulty, kit).sync() == 2               # PodGroup + pod, no Event
    assert kit.group_of("orphan") == name_of(pod)
    assert kit.cluster.list(EVENT) == []


def test_podgroup_made_behind_a_lagging_watch_is_adopted(kit: Any, faulty: FaultyCluster,
                                                         name_of: Callable[[Obj], str]) -> None:
    faulty.hide_podgroups = True
    job = kit.owner("batch/v1", "Job", "j", {})
    kit.cluster.create({"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup",
                        "metadata": {"name": name_of(job), "namespace": "default"},
                        "spec": {"minMember": 3, "queue": "manual"}})
    kit.pod("j-1", job)
    assert grouper_on(faulty, kit).sync() == 1               # the pod; the PodGroup is theirs
    assert kit.podgroup(name_of(job))["spec"] == {"minMember": 3, "queue": "manual"}
    assert kit.group_of("j-1") == name_of(job)


def test_expired_watch_is_listed_again(kit: Any, faulty: FaultyCluster,
                                       name_of: Callable[[Obj], str]) -> None:
    job = kit.owner("batch/v1", "Job", "j", {})
    kit.pod("j-1", job)
    grouper = grouper_on(faulty, kit)
    grouper.sync()
    kit.pod("j-2", job)
    faulty.inject("drain", GoneError("too old resource version"), times=1)
    assert grouper.sync() == 1
    assert kit.group_of("j-2") == name_of(job)


def test_run_loop_survives_a_failing_sync_and_stops(kit: Any, faulty: FaultyCluster,
                                                    name_of: Callable[[Obj], str]) -> None:
    job = kit.owner("batch/v1", "Job", "j", {})
    kit.pod("j-1", job)
    faulty.inject("drain", TransientApiError("connection refused", 503), times=2)
    stop = threading.Event()
    thread = threading.Thread(target=grouper_on(faulty, kit).run, args=(stop, 0.01))
    thread.start()
    deadline = time.monotonic() + 120       # patience: it only keeps a hang from lasting
    while kit.group_of("j-1") is None and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert kit.group_of("j-1") == name_of(job)


def test_not_found_while_grouping_is_retried(kit: Any, faulty: FaultyCluster,
                                             name_of: Callable[[Obj], str]) -> None:
    """A 404 from creating the PodGroup (its CRD not installed yet) is retried each sync."""
    job = kit.owner("batch/v1", "Job", "j", {})
    kit.pod("j-1", job)
    faulty.inject("create", NotFoundError("the server could not find the requested resource"),
                  lambda obj: obj["kind"] == "PodGroup", times=2)
    grouper = grouper_on(faulty, kit)
    assert (grouper.sync(), grouper.sync()) == (0, 0)
    assert grouper.sync() == 2
    assert kit.group_of("j-1") == name_of(job)


def test_pod_deleted_while_its_group_is_being_made_is_dropped(kit: Any, faulty: FaultyCluster) -> None:
    job = kit.owner("batch/v1", "Job", "j", {})
    kit.pod("j-1", job)
    faulty.inject("patch", NotFoundError("pods \"j-1\" not found"), times=1)
    grouper = grouper_on(faulty, kit)
    assert grouper.sync() == 1                               # the PodGroup
    kit.cluster.delete(POD, "default", "j-1")
    assert grouper.sync() == 0                               # the DELETED event ends the retries
    assert grouper.sync() == 0
