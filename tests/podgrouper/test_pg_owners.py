"""The top-owner walk on its own, with a dict as the reader."""
from __future__ import annotations

from typing import Any

import pytest

from kaisched.errors import PermanentApiError, TransientApiError
from podgrouper.owners import OwnerRef, top_owner

Obj = dict[str, Any]


def obj(api_version: str, kind: str, name: str, *owners: Obj, controller: bool = True) -> Obj:
    refs = [{"apiVersion": o["apiVersion"], "kind": o["kind"], "name": o["metadata"]["name"],
             "uid": o["metadata"]["uid"], "controller": controller} for o in owners]
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{kind}-{name}",
                         "ownerReferences": refs}}


class Reader:
    """Objects by kind/name; some names raise, and every read is counted."""

    def __init__(self, *objs: Obj, errors: dict[str, Exception] | None = None) -> None:
        self.objs = {(o["kind"], o["metadata"]["name"]): o for o in objs}
        self.errors = errors or {}
        self.reads: list[str] = []

    def __call__(self, namespace: str, ref: OwnerRef) -> Obj | None:
        assert namespace == "ns"
        self.reads.append(str(ref))
        if ref.name in self.errors:
            raise self.errors[ref.name]
        return self.objs.get((ref.kind, ref.name))


def test_pod_without_owner_is_its_own_top() -> None:
    pod = obj("v1", "Pod", "p")
    walk = top_owner(pod, Reader())
    assert walk.top is pod and walk.problems == () and not walk.broken


def test_deployment_through_replicaset() -> None:
    deploy = obj("apps/v1", "Deployment", "web")
    rs = obj("apps/v1", "ReplicaSet", "web-5d4f", deploy)
    walk = top_owner(obj("v1", "Pod", "web-5d4f-x", rs), Reader(deploy, rs))
    assert walk.top is deploy
    assert walk.chain == ("Pod/web-5d4f-x", "ReplicaSet/web-5d4f", "Deployment/web")
    assert walk.problems == ()


def test_only_controller_references_are_followed() -> None:
    other = obj("v1", "ConfigMap", "cm")
    pod = obj("v1", "Pod", "p", other, controller=False)
    reader = Reader(other)
    assert top_owner(pod, reader).top is pod and reader.reads == []


def test_a_cronjob_job_is_the_top() -> None:
    cron = obj("batch/v1", "CronJob", "nightly")
    job = obj("batch/v1", "Job", "nightly-29450520", cron)
    reader = Reader(cron, job)
    walk = top_owner(obj("v1", "Pod", "nightly-29450520-x", job), reader)
    assert walk.top is job and walk.problems == ()
    assert reader.reads == ["Job/nightly-29450520"]


def test_a_job_of_an_mpijob_climbs_to_the_mpijob() -> None:
    mpi = obj("kubeflow.org/v2beta1", "MPIJob", "pi")
    job = obj("batch/v1", "Job", "pi-launcher", mpi)
    assert top_owner(obj("v1", "Pod", "pi-launcher-x", job), Reader(mpi, job)).top is mpi


@pytest.mark.parametrize("error, text", [
    (None, "owner ReplicaSet/rs not found; grouped by Pod/p"),
    (PermanentApiError("replicasets.apps is forbidden", 403),
     "cannot read owner ReplicaSet/rs: forbidden; grouped by Pod/p"),
    (PermanentApiError("the server could not find the requested resource", 404),
     "cannot read owner ReplicaSet/rs: the server could not find"),
])
def test_unreadable_owner_ends_the_walk_at_the_last_one_read(error: Exception | None,
                                                               text: str) -> None:
    rs = obj("apps/v1", "ReplicaSet", "rs")
    pod = obj("v1", "Pod", "p", rs)
    walk = top_owner(pod, Reader(errors={"rs": error} if error else None))
    assert walk.top is pod and not walk.broken
    assert len(walk.problems) == 1 and text in walk.problems[0]


def test_unreadable_grandparent_ends_at_the_parent() -> None:
    mpi = obj("kubeflow.org/v2beta1", "MPIJob", "pi")
    job = obj("batch/v1", "Job", "pi-launcher", mpi)
    walk = top_owner(obj("v1", "Pod", "x", job), Reader(job))
    assert walk.top is job
    assert walk.problems == ("owner MPIJob/pi not found; grouped by Job/pi-launcher",)


def test_transient_errors_are_not_problems_but_raised() -> None:
    rs = obj("apps/v1", "ReplicaSet", "rs")
    with pytest.raises(TransientApiError):
        top_owner(obj("v1", "Pod", "p", rs), Reader(errors={"rs": TransientApiError("timeout", 504)}))


def test_cycle_is_a_problem_and_breaks_the_walk() -> None:
    a = obj("example.com/v1", "Widget", "a")
    b = obj("example.com/v1", "Widget", "b", a)
    a["metadata"]["ownerReferences"] = obj("x", "x", "x", b)["metadata"]["ownerReferences"]
    walk = top_owner(obj("v1", "Pod", "p", a), Reader(a, b))
    assert walk.broken and walk.top is b
    assert walk.problems == ("ownerReferences form a cycle: Pod/p -> Widget/a -> Widget/b -> "
                             "Widget/a; grouped by Widget/b",)


def test_self_owned_object_is_a_cycle() -> None:
    a = obj("example.com/v1", "Widget", "a")
    a["metadata"]["ownerReferences"] = obj("x", "x", "x", a)["metadata"]["ownerReferences"]
    walk = top_owner(obj("v1", "Pod", "p", a), Reader(a))
    assert walk.broken and "cycle" in walk.problems[0]


def test_several_controller_owners_break_the_walk() -> None:
    one, two = obj("apps/v1", "ReplicaSet", "one"), obj("apps/v1", "ReplicaSet", "two")
    pod = obj("v1", "Pod", "p", one, two)
    reader = Reader(one, two)
    walk = top_owner(pod, reader)
    assert walk.broken and walk.top is pod and reader.reads == []
    assert walk.problems == ("Pod/p has 2 controller ownerReferences (ReplicaSet/one, "
                             "ReplicaSet/two); grouped by Pod/p",)


def test_stale_uid_is_a_problem() -> None:
    rs = obj("apps/v1", "ReplicaSet", "rs")
    pod = obj("v1", "Pod", "p", rs)
    pod["metadata"]["ownerReferences"][0]["uid"] = "uid-of-a-deleted-replicaset"
    walk = top_owner(pod, Reader(rs))
    assert walk.top is pod and "stale reference" in walk.problems[0]


def test_malformed_controller_reference_is_a_problem() -> None:
    pod = obj("v1", "Pod", "p")
    pod["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "controller": True}]
    walk = top_owner(pod, Reader())
    assert walk.top is pod
    assert walk.problems == ("Pod/p ownerReferences[0] needs apiVersion, kind and name; "
                             "grouped by Pod/p",)


def test_reference_without_uid_is_followed() -> None:
    rs = obj("apps/v1", "ReplicaSet", "rs")
    pod = obj("v1", "Pod", "p", rs)
    del pod["metadata"]["ownerReferences"][0]["uid"]
    assert top_owner(pod, Reader(rs)).top is rs
