"""The PodGrouper on the owners the controllers actually write: a batch/v1 Job with the
`kaisched.io/min-member` annotation (its gang size), a Deployment (its pods' owner is the
ReplicaSet the Deployment controller made) and a StatefulSet with the annotation. Each gets
one PodGroup owned by its top owner, every pod names it, and each binds whole."""
from __future__ import annotations

from typing import Callable

from kaisched.api import labels as L
from kaisched.cluster.kinds import PODGROUP
from kaisched.cluster.kube import KubeCluster
from tests.builders.cluster import (
    deployment,
    job,
    placed,
    pods_of,
    running,
    stateful_set,
    template,
    wait_for,
)
from tests.builders.realapi import Components, describe


def test_jobs_deployments_and_statefulsets_get_their_podgroups_from_their_real_owners(
        admin: KubeCluster, components: Components, namespace: str,
        nodes: Callable[[int], list[str]]) -> None:
    ns = namespace
    nodes(1)

    def why() -> str:
        return f"{describe(admin, ns)}\n{components.podgrouper.log()[-4000:]}"

    admin.create(job(ns, "train", 3, placed(template("train", gpus=1), ns), min_member=3))
    admin.create(deployment(ns, "web", 2, placed(template("web", gpus=1), ns)))
    admin.create(stateful_set(ns, "db", 2, placed(template("db", gpus=1), ns), min_member=2))
    expected = {"train": ("Job", 3, 3), "web": ("Deployment", 1, 2), "db": ("StatefulSet", 2, 2)}
    for app, (_, _, pods) in expected.items():
        wait_for(lambda app=app, pods=pods: running(admin, ns, app, pods), 120,
                 f"{app}'s pods running", why)
    groups = {g["metadata"]["name"]: g for g in admin.list(PODGROUP, ns)}
    for app, (kind, minimum, _) in expected.items():
        names = {(p["metadata"].get("annotations") or {}).get(L.POD_GROUP_ANNOTATION)
                 for p in pods_of(admin, ns, app)}
        assert len(names) == 1 and None not in names, (app, names, why())
        group = groups[names.pop()]
        (owner,) = group["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"]) == (kind, app), (app, owner)
        assert group["spec"]["minMember"] == minimum, (app, group["spec"])
