"""Autoscaling on a living cluster: kaisched asks for a gang's missing capacity in a
ProvisioningRequest (cluster-autoscaler's CRD, vendored in kaisched/validation/crds/), and
the test, playing cluster-autoscaler, answers it with hollow nodes -- real kubelets over a
fake runtime -- started by the script that brought the cluster up (KAISCHED_TEST_K8S_UP;
skipped without it).

A gang of 4 pods x 8 GPUs (a PodGroup of minMember 4) on two 8-GPU hollow nodes, room for 2:
one request, for exactly the 2 pods missing, owned by the PodGroup, the pods annotated to
consume it, none of them bound meanwhile. The provisioner accepts the request, starts as many
new hollow nodes as its pod sets count, and once they are Ready answers Provisioned and gives
them the labels the pod sets' templates select (the node group's template). The gang is then
bound whole, one pod a node, its kubelets run it, and kaisched deletes the request. At the end
the gang is deleted and the new nodes are stopped and their Nodes deleted: the cluster has the
hollow nodes it had.

kaisched runs as a process of this module, under a schedulerName of its own with `autoscaling`
configured, without leader election. Its pods name their PodGroup by annotation, so no
PodGrouper takes part.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Iterator

import pytest
from kubernetes import client as k8s_client

from kaisched.api.provisioning import CONSUME_ANNOTATION
from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import NODE, POD, POD_TEMPLATE, PODGROUP
from kaisched.cluster.kube import KubeCluster
from tests.builders.cluster import (
    HOLLOW,
    K8S_UP,
    GangWatch,
    bound_pods,
    delete_quietly,
    hollow_nodes,
    k8s_up,
    placed,
    running,
    template,
    wait_for,
)
from tests.builders.realapi import (
    Process,
    answer,
    autoscaling_scheduler,
    describe,
    provisioning_requests,
    served_provisioning_crd,
)

SCHEDULER = "cl-autoscaling-kaisched"
GANG, SIZE = "big", 4
STARTING = 300.0        # k8s-up.sh waits as long for the hollow nodes it starts to be Ready
BIND_WITHIN = 20.0      # Provisioned to the gang bound: a few sessions, the new nodes' taints lifted

# Checked before the fixtures start a scheduler for nothing.
pytestmark = pytest.mark.skipif(not K8S_UP, reason="KAISCHED_TEST_K8S_UP names no script to "
                                "start hollow nodes with")


@pytest.fixture(scope="module")
def provisioning_crd(admin: KubeCluster, installed: list[Obj]) -> Iterator[None]:
    yield from served_provisioning_crd(admin)


@pytest.fixture(scope="module")
def scheduler(admin_kubeconfig: str, provisioning_crd: None, admin_api: k8s_client.ApiClient,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    yield from autoscaling_scheduler(admin_kubeconfig, admin_api, tmp_path_factory.mktemp("cl-autoscaling"),
                                     SCHEDULER, "cl-autoscaling-scheduler", {"after": "0s"})


def hollow_names(client: KubeCluster) -> set[str]:
    """Every hollow node, Ready or not: k8s-up.sh numbers the ones it starts on from them."""
    return {n["metadata"]["name"] for n in client.list(NODE)
            if (n["metadata"].get("labels") or {}).get(HOLLOW) == "true"}


class HollowProvisioner:
    """cluster-autoscaler, played in a thread with a client of its own: each new
    ProvisioningRequest of the namespace is accepted; for each of its pod sets as many new
    hollow nodes are started as it counts; once they are Ready the request is answered
    Provisioned and the nodes take the labels the pod set's template selects.

    `answered`: the requests it took up, by name; `provisioned`: when (monotonic) each was
    answered Provisioned; `started`: the hollow nodes it started, for the test to stop."""

    def __init__(self, kubeconfig: str, namespace: str) -> None:
        self.client = KubeCluster(kubeconfig, timeout=60.0, connect_timeout=60.0)
        self.namespace = namespace
        self.answered: list[str] = []
        self.provisioned: dict[str, float] = {}
        self.started: list[str] = []
        self.failure: BaseException | None = None
        self._seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hollow-provisioner", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """No more requests taken up; waits for the one at hand (its nodes must be known to
        be stopped)."""
        self._stop.set()
        self._thread.join(STARTING + 60)
        self.client.close()

    def check(self) -> None:
        """Raises what broke the thread, if anything did."""
        if self.failure is not None:
            raise AssertionError(f"the provisioner failed: {self.failure!r}") from self.failure

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for request in provisioning_requests(self.client, self.namespace):
                    if request["metadata"]["uid"] not in self._seen:
                        self._seen.add(request["metadata"]["uid"])
                        self.answered.append(request["metadata"]["name"])
                        self._provision(request)
                self._stop.wait(0.5)
        except BaseException as exc:        # noqa: BLE001 -- the test raises it with check()
            self.failure = exc

    def _provision(self, request: Obj) -> None:
        ns, name = self.namespace, request["metadata"]["name"]
        answer(self.client, ns, request, "Accepted", "scaling up hollow nodes")
        groups: list[tuple[list[str], dict[str, str]]] = []
        for pod_set in request["spec"]["podSets"]:
            ref = pod_set["podTemplateRef"]["name"]
            tmpl = self.client.get(POD_TEMPLATE, ns, ref)
            assert tmpl is not None, f"PodTemplate {ns}/{ref} of {name} not found"
            groups.append((self._start(pod_set["count"]),
                           tmpl["template"]["spec"].get("nodeSelector") or {}))
        every = [node for names, _ in groups for node in names]
        wait_for(lambda: set(every) <= set(hollow_nodes(self.client)), 120, f"{every} Ready")
        # Provisioned before the nodes take the group's labels, as cluster-autoscaler answers
        # once its scale-up is made and the nodes register with them later. Room for the gang
        # before the answer would rightly have kaisched place it unasked and withdraw the
        # request, and the test could not tell that nothing was bound before Provisioned.
        answer(self.client, ns, request, "Provisioned", f"started {', '.join(every)}")
        self.provisioned[name] = time.monotonic()
        for names, selector in groups:
            for node in names:
                self.client.patch(NODE, "", node, {"metadata": {"labels": selector}})

    def _start(self, count: int) -> list[str]:
        """count new hollow nodes: k8s-up.sh starts hollow-N.. up to the number it is given,
        those already running left alone."""
        before = hollow_names(self.client)
        try:
            k8s_up("--hollow-nodes", str(len(before) + count))
        finally:        # what did start, even if not all did, is to be stopped
            new = sorted(hollow_names(self.client) - before)
            self.started.extend(new)
        assert len(new) == count, f"{count} hollow nodes asked of k8s-up.sh, {new} started"
        return new


def gang(admin: KubeCluster, namespace: str) -> list[str]:
    """A PodGroup of minMember SIZE and its SIZE pods of 8 GPUs for this module's scheduler,
    naming it by annotation, kept to the nodes labelled for the test; the pods' names."""
    admin.create({"apiVersion": PODGROUP.api_version, "kind": "PodGroup",
                  "metadata": {"name": GANG, "namespace": namespace},
                  "spec": {"minMember": SIZE}})
    tmpl = placed(template(GANG, gpus=8, annotations={"kaisched.io/pod-group": GANG}), namespace)
    pods = [f"{GANG}-{i}" for i in range(SIZE)]
    for pod in pods:
        admin.create({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {**tmpl["metadata"], "name": pod, "namespace": namespace},
                      "spec": {**tmpl["spec"], "schedulerName": SCHEDULER}})
    return pods


def consuming(admin: KubeCluster, namespace: str, pods: list[str]) -> set[str]:
    """The requests the pods are annotated to consume ('' for a pod without)."""
    return {(((admin.get(POD, namespace, p) or {}).get("metadata") or {}).get("annotations")
             or {}).get(CONSUME_ANNOTATION, "") for p in pods}


def remove_gang(admin: KubeCluster, namespace: str) -> None:
    """The namespace's pods deleted and gone (their kubelets end them) before their nodes are
    stopped, so that none is left Terminating on a node that is no more; then the PodGroup."""
    for pod in admin.list(POD, namespace):
        delete_quietly(admin, POD, namespace, pod["metadata"]["name"])
    wait_for(lambda: not admin.list(POD, namespace), 120, "the gang's pods ended by their kubelets")
    delete_quietly(admin, PODGROUP, namespace, GANG)


def stop_hollow_node(admin: KubeCluster, name: str) -> None:
    """Its kubelet stopped first: a running one would register the Node again."""
    k8s_up("--stop-node", name)
    delete_quietly(admin, NODE, "", name)


def test_a_gang_of_4_on_room_for_2_runs_whole_on_hollow_nodes_provisioned_for_it(
        admin: KubeCluster, admin_kubeconfig: str, scheduler: Process, namespace: str,
        nodes: Callable[[int], list[str]]) -> None:
    ns = namespace
    taken = nodes(2)

    def why() -> str:
        return f"{describe(admin, ns)}\n{scheduler.log()[-4000:]}"

    provisioner = HollowProvisioner(admin_kubeconfig, ns)

    def unbound_until_provisioned() -> None:
        provisioner.check()
        # The pods first: the nodes take the gang's label only after Provisioned is recorded,
        # so a pod bound by now means it is recorded by now.
        early = [p["metadata"]["name"] for p in bound_pods(admin, ns, GANG)]
        assert not early or provisioner.provisioned, f"bound before Provisioned: {early}\n{why()}"
        assert len(provisioning_requests(admin, ns)) <= 1, f"asked twice\n{why()}"

    def asked() -> list[Obj]:
        unbound_until_provisioned()
        return provisioning_requests(admin, ns)

    def answered() -> bool:
        unbound_until_provisioned()
        return bool(provisioner.provisioned)

    provisioner.start()
    try:
        pods = gang(admin, ns)
        [request] = wait_for(asked, 120, "a ProvisioningRequest", why)
        name = request["metadata"]["name"]
        assert [s["count"] for s in request["spec"]["podSets"]] == [2], request
        owner = request["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("PodGroup", GANG), request

        def annotated() -> bool:
            unbound_until_provisioned()
            return consuming(admin, ns, pods) == {name}
        wait_for(annotated, 60, "the pods annotated to consume the request", why)
        wait_for(answered, STARTING + 60, "the provisioner's Provisioned", why)
        started, since = provisioner.started, provisioner.provisioned[name]
        assert len(started) == 2, started

        watch = GangWatch(admin, ns, GANG, SIZE)
        wait_for(lambda: watch.sample() == SIZE, 120, "the gang bound whole", why)
        took = time.monotonic() - since
        assert took <= BIND_WITHIN, f"bound {took:.1f} s after Provisioned\n{why()}"
        # Bound in one session's binds: never a part of it waiting for the rest.
        assert watch.longest <= 5.0, f"the gang was partly bound {watch.longest:.1f} s\n{why()}"
        placed_on = sorted(p["spec"]["nodeName"] for p in bound_pods(admin, ns, GANG))
        assert placed_on == sorted(taken + started), why()       # one pod a node, 8 GPUs each
        wait_for(lambda: running(admin, ns, GANG, SIZE), 120, "the gang running", why)
        wait_for(lambda: not provisioning_requests(admin, ns) and not admin.list(POD_TEMPLATE, ns),
                 60, "the request and its PodTemplate deleted once the gang is placed", why)
        provisioner.check()
        assert provisioner.answered == [name], provisioner.answered
    finally:
        provisioner.stop()
        try:
            remove_gang(admin, ns)
        finally:
            for node in provisioner.started:
                stop_hollow_node(admin, node)
