"""kaisched installed as shipped schedules on a real kube-apiserver.

config/ applied as `kubectl apply -k config/` would; the scheduler and the
PodGrouper run with tokens of the ServiceAccounts the install creates (so the
shipped RBAC is all they may do) and the shipped configuration. The test plays
the Kubeflow operators: a PyTorchJob and an MPIJob (their CRDs, minimal, made
here) and their pods, and a PyTorchJob too big for the fake Nodes.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import pytest

from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import LEASE, POD, PODGROUP, Kind
from kaisched.cluster.kube import KubeCluster
from tests.builders.realapi import SYSTEM, Components, describe, eventually, scheduler_identity

OWNER = "install"
LEASE_SECONDS = 15


def operator_pods(job: Obj, replica_specs: str, role_label: str, cpu: str) -> list[Obj]:
    """The pods a Kubeflow operator makes: one per replica of every role,
    labelled with their role, asking for kaisched."""
    pods = []
    for role, replica in job["spec"][replica_specs].items():
        for i in range(replica["replicas"]):
            pods.append({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{job['metadata']['name']}-{role.lower()}-{i}",
                             "namespace": job["metadata"]["namespace"],
                             "labels": {role_label: role.lower(),
                                        "training.kubeflow.org/job-name": job["metadata"]["name"]}},
                "spec": {"schedulerName": "kaisched", "containers": [{
                    "name": "main", "image": "trainer:1",
                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}})
    return pods


def job(kind: Kind, name: str, namespace: str, field: str, roles: dict[str, int]) -> Obj:
    return {"apiVersion": kind.api_version, "kind": kind.kind,
            "metadata": {"name": name, "namespace": namespace},
            "spec": {field: {role: {"replicas": n, "template": {"spec": {"containers": [
                {"name": "main", "image": "trainer:1"}]}}} for role, n in roles.items()}}}


def node_of(admin: KubeCluster, pod: Obj) -> str:
    got = admin.get(POD, pod["metadata"]["namespace"], pod["metadata"]["name"])
    return str(((got or {}).get("spec") or {}).get("nodeName") or "")


def condition(obj: Obj | None, type_: str) -> dict[str, Any] | None:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or ()
                 if c.get("type") == type_), None)


def test_installed_as_shipped_it_schedules_gangs_whole(
        request: pytest.FixtureRequest, admin: KubeCluster, components: Components,
        namespace: str, fake_nodes: Callable[..., list[str]], minimal_crd: Callable[..., Kind],
        make_owner_chain: Callable[[list[Obj], list[Obj]], list[Obj]]) -> None:
    identity = scheduler_identity(request)
    nodes = fake_nodes(2, cpu="8")
    pytorch = minimal_crd("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
    mpi = minimal_crd("kubeflow.org", "v2beta1", "MPIJob", "mpijobs")

    # The scheduler takes its Lease, and keeps it past one lease duration.
    # (A Lease an earlier run released is there already, with no holder: wait for one.)
    lease = eventually(lambda: (held := admin.get(LEASE, SYSTEM, "kaisched"))
                       and held["spec"].get("holderIdentity") and held,
                       what="the Lease held", timeout=60)
    assert lease["spec"]["holderIdentity"] == identity, components.logs()
    first_renew = lease["spec"]["renewTime"]
    time.sleep(LEASE_SECONDS + 1)
    lease = admin.get(LEASE, SYSTEM, "kaisched")
    assert lease["spec"]["holderIdentity"] == identity, components.logs()
    assert lease["spec"]["renewTime"] > first_renew
    assert lease["spec"]["leaseTransitions"] == 0 or lease["spec"].get("acquireTime")
    grouper_lease = admin.get(LEASE, SYSTEM, "kaisched-podgrouper")
    assert grouper_lease and grouper_lease["spec"]["holderIdentity"], components.logs()

    # Two gangs that fit (4 + 3 pods of 2 cpu on 16 cpu) and one that cannot (4 x 6 cpu).
    def operator(kind: Kind, name: str, field: str, roles: dict[str, int], role_label: str,
                 cpu: str) -> list[Obj]:
        """The job, then its pods owned by it: what the operator would make."""
        spec = job(kind, name, namespace, field, roles)
        return make_owner_chain([spec], operator_pods(spec, field, role_label, cpu))[1:]

    gangs = {
        "train": operator(pytorch, "train", "pytorchReplicaSpecs", {"Master": 1, "Worker": 3},
                          "training.kubeflow.org/replica-type", "2"),
        "mpi": operator(mpi, "mpi", "mpiReplicaSpecs", {"Launcher": 1, "Worker": 2},
                        "training.kubeflow.org/job-role", "2"),
    }
    big = operator(pytorch, "big", "pytorchReplicaSpecs", {"Master": 1, "Worker": 3},
                   "training.kubeflow.org/replica-type", "6")

    for name, pods in gangs.items():
        try:
            eventually(lambda: all(node_of(admin, p) for p in pods), timeout=60)
        except AssertionError:
            raise AssertionError(f"gang {name} not bound:\n{describe(admin, namespace)}\n"
                                 f"{components.logs()}") from None
    assert {node_of(admin, p) for pods in gangs.values() for p in pods} <= set(nodes)

    # The big gang: its PodGroup says why, and so do its pods; none of them is bound.
    group = eventually(lambda: admin.get(PODGROUP, namespace, pg_name(admin, big[0])),
                       what="the big gang's PodGroup")
    assert group["spec"]["minMember"] == 4
    unscheduled = eventually(lambda: condition(admin.get(PODGROUP, namespace,
                                                         group["metadata"]["name"]),
                                               "Scheduled"), what="its condition")
    assert unscheduled["status"] == "False" and unscheduled.get("message"), unscheduled
    for pod in big:
        cond = eventually(lambda: condition(admin.get(POD, namespace, pod["metadata"]["name"]),
                                            "PodScheduled"), what="PodScheduled=False")
        assert cond["status"] == "False" and cond["reason"] == "Unschedulable", cond
        assert cond.get("message")
        assert not node_of(admin, pod)

    # The PodGroups of the gangs that fit carry the sizes the operators' specs give.
    for name, size in (("train", 4), ("mpi", 3)):
        pg = admin.get(PODGROUP, namespace, pg_name(admin, gangs[name][0]))
        assert pg["spec"]["minMember"] == size

    # Both serve metrics and probes.
    for process in (components.scheduler, components.podgrouper):
        assert process.get("/healthz")[0] == 200
        assert process.get("/readyz")[0] == 200
        status, body = process.get("/metrics")
        assert status == 200
    assert "kaisched_binds_total 7.0" in components.scheduler.get("/metrics")[1]
    assert "podgrouper_is_leader 1.0" in components.podgrouper.get("/metrics")[1]

    # SIGTERM: each exits within seconds and gives its Lease up.
    for process, lease_name in ((components.scheduler, "kaisched"),
                                (components.podgrouper, "kaisched-podgrouper")):
        code, took = process.stop()
        assert code == 0 and took < 10, (code, took, process.log()[-3000:])
        released = admin.get(LEASE, SYSTEM, lease_name)
        assert not released["spec"].get("holderIdentity"), released


def pg_name(admin: KubeCluster, pod: Obj) -> str:
    got = eventually(lambda: (admin.get(POD, pod["metadata"]["namespace"], pod["metadata"]["name"])
                              or {}).get("metadata", {}).get("annotations", {})
                     .get("kaisched.io/pod-group"), what="the pod's PodGroup annotation")
    return str(got)
