"""The shipped RBAC is derived from what the code sends.

The scheduler and the PodGrouper run their production loops (Lease, watches,
binds, evictions, status, conditions, Events, PodGroups, owner walks) against
the emulator through a client that records every request it sends: verb, API
group, resource, subresource, namespace. config/rbac.yaml must grant each of
them to the component's ServiceAccount, and grant nothing that was never sent
-- save `get` on the workload kinds a pod's owners may be, which the PodGrouper
reads only when a pod is owned by one.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import attrs
import kmock
import pytest
import yaml

from kaisched.api.clock import WallClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD, kind_for
from kaisched.cluster.kube import KubeCluster
from kaisched.framework import default_config
from kaisched.framework.autoscalingconfig import AutoscalingConfig
from kaisched.framework.effects import RecordEvent
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler, serve
from kaisched.runtime.throttle import WriteThrottle
from kaisched.service.leader import LeaderElector
from podgrouper.controller import PodGrouper
from podgrouper.groupers import builtin_groupers, group_owner, pick
from tests.builders.wire import (
    PATIENCE,
    Emulator,
    api_client,
    build_claim,
    build_node,
    build_pod,
    build_podgroup,
    build_volume,
    eventually,
    kube,
    storage_class,
    with_volume,
)

ROOT = Path(__file__).resolve().parents[2]
BETA = "resource.k8s.io/v1beta1"
DEVICES = [
    {"apiVersion": BETA, "kind": "DeviceClass", "metadata": {"name": "gpu"},
     "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.io"'}}]}},
    {"apiVersion": BETA, "kind": "ResourceSlice", "metadata": {"name": "n1-gpus"},
     "spec": {"driver": "gpu.io", "nodeName": "n1",
              "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
              "devices": [{"name": "gpu-0", "basic": {"attributes": {"model": {"string": "L4"}}}}]}},
    {"apiVersion": BETA, "kind": "ResourceClaim", "metadata": {"name": "gpu", "namespace": "default"},
     "spec": {"devices": {"requests": [{"name": "one", "deviceClassName": "gpu"}]}}},
]
SYSTEM = "kaisched-system"
# The API groups of what the components schedule and write; any other group the
# PodGrouper reads is a workload kind a pod's owner may be.
SCHEDULING_GROUPS = {"", "scheduling.kaisched.io", "coordination.k8s.io"}


@attrs.frozen(order=True)
class Request:
    verb: str
    group: str
    resource: str           # with its subresource: pods/binding
    namespace: str          # "" for cluster-scoped resources and cluster-wide lists

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        return f"{self.verb} {self.resource}.{self.group or 'core'}{where}"


def request_of(method: str, path: str, query: list[tuple[str, str]]) -> Request:
    """What RBAC checks of one HTTP request (as the API server's request info does)."""
    parts = path.strip("/").split("/")
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    group = "" if parts[0] == "api" else parts[1]
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    named = len(rest) > 1
    if method == "GET":
        verb = "get" if named else ("watch" if ("watch", "true") in query else "list")
    else:
        verb = {"POST": "create", "PATCH": "patch", "PUT": "update",
                "DELETE": "delete" if named else "deletecollection"}[method]
    return Request(verb, group, resource, namespace)


class RecordingCluster(KubeCluster):
    """The production client; every request it sends is noted on its way out."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: set[Request] = set()
        self._lock = threading.Lock()

    def _stream(self, what: str, path: str, query: Any, timeout: float) -> Any:
        self._note("GET", path, query)          # watches
        return super()._stream(what, path, query, timeout)

    def _exchange(self, what: str, method: str, path: str, query: Any, body: Any,
                  content_type: str) -> Any:
        self._note(method, path, query)         # every other request
        return super()._exchange(what, method, path, query, body, content_type)

    def _note(self, method: str, path: str, query: Any) -> None:
        with self._lock:
            self.sent.add(request_of(method, path, list(query)))


# -- what config/rbac.yaml grants ------------------------------------------------------

def rbac() -> list[dict]:
    return [d for d in yaml.safe_load_all((ROOT / "config" / "rbac.yaml").read_text()) if d]


def rules_of(account: str) -> list[tuple[str, dict]]:
    """(namespace the rule holds in, "" cluster-wide; rule) of every role bound to it."""
    docs = rbac()
    roles = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d
             for d in docs if d["kind"] in ("Role", "ClusterRole")}
    out = []
    for binding in (d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        if not any(s["kind"] == "ServiceAccount" and s["name"] == account
                   and s["namespace"] == SYSTEM for s in binding["subjects"]):
            continue
        where = binding["metadata"].get("namespace", "")
        ref = binding["roleRef"]
        role = roles[(ref["kind"], where if ref["kind"] == "Role" else "", ref["name"])]
        out += [(where, rule) for rule in role["rules"]]
    return out


def grants(rules: list[tuple[str, dict]], request: Request) -> bool:
    return any((not where or where == request.namespace)
               and request.group in rule["apiGroups"] and request.resource in rule["resources"]
               and request.verb in rule["verbs"] and not rule.get("resourceNames")
               for where, rule in rules)


def granted(rules: list[tuple[str, dict]]) -> set[tuple[str, str, str, str]]:
    """(verb, group, resource, namespace) of every grant."""
    return {(verb, group, resource, where) for where, rule in rules
            for group in rule["apiGroups"] for resource in rule["resources"]
            for verb in rule["verbs"]}


# -- running the components -------------------------------------------------------------

def recording(apiserver: Emulator) -> RecordingCluster:
    # Every kind it serves is served before the components start; the others (DRA
    # v1, later PodGroup versions) are asked for again rarely, as kube() does.
    return kube(api_client(apiserver.url), factory=RecordingCluster)


def test_the_shipped_roles_grant_what_the_components_send_and_nothing_more(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    scheduler_client = recording(apiserver)
    grouper_client = recording(apiserver)
    for obj in ({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                 "metadata": {"name": "low"}, "value": 10},
                {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                 "metadata": {"name": "high"}, "value": 1000},
                {"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "Queue",
                 "metadata": {"name": "default"}, "spec": {"priority": 1}}):
        cluster.create(obj)
    cluster.create(build_node("n1", cpu="7"))   # the low pods, the orphan, and room for one high pod
    broken = build_node("n-broken", cpu="4")
    broken["status"]["allocatable"]["cpu"] = "lots"     # a Node the cache cannot use: an Event
    cluster.create(broken)
    # A Job's pods for the PodGrouper (a PodGroup, a patch per pod), and a pod whose owner
    # is gone (a Warning Event; its PodGroup's top owner is the pod itself, read again).
    job = cluster.create({"apiVersion": "batch/v1", "kind": "Job",
                          "metadata": {"name": "low", "namespace": "default"},
                          "spec": {"parallelism": 2, "completions": 2, "template": {}}})
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "low",
             "uid": job["metadata"]["uid"], "controller": True}
    for i in range(2):
        pod = build_pod(f"low-{i}", cpu="2", owner=owner)
        pod["spec"]["priorityClassName"] = "low"
        cluster.create(pod)
    cluster.create(build_pod("orphan", cpu="100m", owner={
        "apiVersion": "batch/v1", "kind": "Job", "name": "gone", "uid": "u", "controller": True}))

    # The other schedulers' gangs, served here so that they are watched: every
    # version of the Workload API at once (no real cluster serves them all), KAI's objects.
    def serve_other_podgroups() -> None:
        for api in ("scheduling.x-k8s.io/v1alpha1", "scheduling.sigs.k8s.io/v1alpha1"):
            apiserver.emu.resources[f"{api}/podgroups"] = kmock.ResourceInfo(
                kind="PodGroup", namespaced=True, subresources={"status"})
        apiserver.emu.resources["kai.scheduler/v1alpha1/topologies"] = kmock.ResourceInfo(
            kind="Topology", namespaced=False)
        apiserver.emu.resources["autoscaling.x-k8s.io/v1/provisioningrequests"] = \
            kmock.ResourceInfo(kind="ProvisioningRequest", namespaced=True,
                               subresources={"status"})
    apiserver.call(serve_other_podgroups)
    apiserver.serve("1.35", "1.36", "1.37", "kai")

    registry = register_builtins()
    clock = WallClock()
    # Autoscaling on: the gang that never fits is asked for (a PodGroup read for its
    # uid, PodTemplates and a ProvisioningRequest made), then withdrawn once it is gone.
    config = attrs.evolve(default_config(registry), autoscaling=AutoscalingConfig(),
                          actions=(*default_config(registry).actions, "autoscale"))
    scheduler = Scheduler(scheduler_client, config, registry, clock,
                          Binder(scheduler_client, clock.now, workers=2,
                                 throttle=WriteThrottle()))
    grouper = PodGrouper(grouper_client, clock, owner_resync=0.5)   # owners read twice a second, not every 50 ms
    electors = [LeaderElector(c, clock, name, namespace=SYSTEM, name=name,
                              lease_seconds=15, renew_deadline=5, retry_period=0.2)
                for c, name in ((scheduler_client, "kaisched"),
                                (grouper_client, "kaisched-podgrouper"))]
    stop = threading.Event()
    threads = [threading.Thread(target=serve, args=(scheduler, stop, electors[0]), daemon=True),
               threading.Thread(target=grouper.run, args=(stop, 0.2, electors[1]), daemon=True)]
    for thread in threads:
        thread.start()
    try:
        eventually(lambda: all(cluster.get(POD, "default", f"low-{i}")["spec"].get("nodeName")
                               for i in range(2)))
        # A high-priority gang that fits only by evicting the low pods, and one that
        # never fits (PodGroup status, pod conditions, FailedScheduling Events).
        cluster.create(build_podgroup("high", min_member=2))
        for i in range(2):
            pod = build_pod(f"high-{i}", cpu="2", group="high")
            pod["spec"]["priorityClassName"] = "high"
            cluster.create(pod)
        cluster.create(build_podgroup("huge", min_member=2))
        for i in range(2):
            cluster.create(build_pod(f"huge-{i}", cpu="64", group="huge"))
        # An upstream PodGroup that never fits: its condition is written (podgroups/status).
        cluster.create({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                        "metadata": {"name": "upstream", "namespace": "default"},
                        "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}})
        wide = build_pod("upstream-0", cpu="64")
        wide["spec"]["schedulingGroup"] = {"podGroupName": "upstream"}
        cluster.create(wide)
        eventually(lambda: all(cluster.get(POD, "default", f"high-{i}")["spec"].get("nodeName")
                               for i in range(2)))
        eventually(lambda: Request("create", "", "events", "default") in scheduler_client.sent)
        eventually(lambda: Request("patch", "scheduling.k8s.io", "podgroups/status", "default")
                   in scheduler_client.sent)
        # Volumes and devices: a WaitForFirstConsumer claim (its selected node is written), a
        # static volume (pre-bound to its claim), a ResourceClaim (allocated in its status).
        cluster.create(build_node("n-vol", cpu="2"))     # made once n1 is full: theirs alone
        cluster.create(storage_class("fast", "csi.example.com"))
        cluster.create(build_claim("scratch", "fast"))
        cluster.create(with_volume(build_pod("wffc", cpu="100m"), "scratch"))
        cluster.create(storage_class("local", "kubernetes.io/no-provisioner"))
        cluster.create(build_volume("pv-local", "local", "n-vol"))
        cluster.create(build_claim("data", "local"))
        cluster.create(with_volume(build_pod("static", cpu="100m"), "data"))
        for obj in DEVICES:
            cluster.create(obj)
        cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "infer",
                                                                        "namespace": "default"},
                        "spec": {"schedulerName": "kaisched",
                                 "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}],
                                 "containers": [{"name": "main", "image": "x"}]}})
        for written in (Request("patch", "", "persistentvolumeclaims", "default"),
                        Request("patch", "", "persistentvolumes", ""),
                        Request("patch", "resource.k8s.io", "resourceclaims/status", "default")):
            eventually(lambda: written in scheduler_client.sent)
        # GPU sharing: a pod asking for half a GPU gets its GPU's reservation pod made and
        # is labelled with the GPU before its bind; once it is gone, the reservation pod
        # is deleted. KAI's reservation pod that no pod shares is evicted.
        gpu_node = build_node("n-gpu", cpu="1")
        gpu_node["status"]["allocatable"]["nvidia.com/gpu"] = "2"
        cluster.create(gpu_node)
        half = build_pod("half", cpu="100m")
        half["metadata"]["annotations"] = {"gpu-fraction": "0.5"}
        cluster.create(half)
        kai_node = build_node("n-kai", cpu="10m")      # no room for the half: KAI's GPU stays alone
        kai_node["status"]["allocatable"]["nvidia.com/gpu"] = "1"
        cluster.create(kai_node)
        kai = build_pod("kai-reservation", cpu="1m", namespace="kai-resource-reservation",
                        scheduler="kai-scheduler")
        kai["metadata"]["labels"] = {"app": "runai-reservation", "runai-gpu-group": "kai-g"}
        kai["spec"]["nodeName"] = "n-kai"
        cluster.create(kai)
        eventually(lambda: cluster.get(POD, "default", "half")["spec"].get("nodeName"))
        cluster.delete(POD, "default", "half")
        for written in (Request("create", "", "pods", SYSTEM), Request("patch", "", "pods", "default"),
                        Request("delete", "", "pods", SYSTEM),
                        Request("create", "", "pods/eviction", "kai-resource-reservation")):
            eventually(lambda: written in scheduler_client.sent)
        # The gang that never fits got its capacity asked for; gone, it is withdrawn.
        eventually(lambda: Request("create", "autoscaling.x-k8s.io", "provisioningrequests",
                                   "default") in scheduler_client.sent)
        for i in range(2):
            cluster.delete(POD, "default", f"huge-{i}")
        for written in (Request("delete", "autoscaling.x-k8s.io", "provisioningrequests", "default"),
                        Request("delete", "", "podtemplates", "default")):
            eventually(lambda: written in scheduler_client.sent)
        # The Job's owner asks for another gang size: the PodGrouper follows it (a patch).
        cluster.patch(kind_for("batch/v1", "Job"), "default", "low",
                      {"metadata": {"annotations": {"kaisched.io/min-member": "2"}}})
        eventually(lambda: Request("patch", "scheduling.kaisched.io", "podgroups", "default")
                   in grouper_client.sent)
    finally:
        stop.set()
        for thread in threads:
            thread.join(PATIENCE)
    # A PodGroup made behind the PodGrouper's watch (the emulator holds it without telling
    # the watch): its create conflicts, and it reads the one that is there.
    late = cluster.create({"apiVersion": "batch/v1", "kind": "Job",
                           "metadata": {"name": "late", "namespace": "default"},
                           "spec": {"parallelism": 1, "template": {}}})
    name = group_owner(late, pick(builtin_groupers(), late)).name
    apiserver.preload([build_podgroup(name, min_member=1)])
    cluster.create(build_pod("late-0", owner={
        "apiVersion": "batch/v1", "kind": "Job", "name": "late",
        "uid": late["metadata"]["uid"], "controller": True}))
    eventually(lambda: grouper.sync() or Request("get", "scheduling.kaisched.io", "podgroups",
                                                 "default") in grouper_client.sent)
    # The same Event said again after its backoff is counted on the first one (a patch):
    # rare in a short run, so the scheduler's binder is handed one twice.
    binder = Binder(scheduler_client, clock.now, throttle=WriteThrottle(first_repeat=0.0))
    said = RecordEvent("Pod", "default/huge-0", "Warning", "FailedScheduling", "no room")
    binder.submit(said)
    binder.submit(said)
    binder.wait(writes=True)
    binder.stop()
    sent = {"kaisched": set(scheduler_client.sent), "kaisched-podgrouper": set(grouper_client.sent)}
    for client in (scheduler_client, grouper_client):
        client.close()

    for account, requests in sent.items():
        rules = rules_of(account)
        refused = sorted(str(r) for r in requests if not grants(rules, r))
        assert not refused, f"{account} sends what its role does not grant: {refused}"

    # Least privilege: every grant was used, except reads of owners the test had no pod of.
    for account, requests in sent.items():
        in_system = [(w, rule) for w, rule in rules_of(account) if w == SYSTEM]
        used = {(r.verb, r.group, r.resource, SYSTEM if grants(in_system, r) else "")
                for r in requests}
        unused = granted(rules_of(account)) - used
        if account == "kaisched-podgrouper":
            unused = {g for g in unused if g[0] != "get" or g[1] in SCHEDULING_GROUPS}
        assert not unused, f"{account} is granted what it never sends: {sorted(unused)}"


def test_the_podgrouper_may_read_every_kind_it_has_a_grouper_for() -> None:
    rules = rules_of("kaisched-podgrouper")
    for group, kind in builtin_groupers():
        if kind == "Pod":
            continue
        plural = kind_for(f"{group}/v1" if group else "v1", kind).plural
        assert grants(rules, Request("get", group, plural, "team-a")), f"{kind}.{group}"


def test_owner_reads_are_get_only() -> None:
    """The walk reads one owner by name: never a list, a watch or a write."""
    for _, rule in rules_of("kaisched-podgrouper"):
        if not set(rule["apiGroups"]) & SCHEDULING_GROUPS:
            assert rule["verbs"] == ["get"], rule


# -- a permission the role lacks: one line naming it, never a silent stall -------------------

def forbidden(request: kmock.Request) -> Any:
    raise kmock.KubernetesError(status=403, reason="Forbidden", message=(
        f'{request.resource.plural} is forbidden: User "system:serviceaccount:kaisched-system:'
        f'kaisched" cannot list resource "{request.resource.plural}"'))


def test_a_watched_kind_the_role_cannot_list_is_one_line_and_the_rest_is_watched(
        apiserver: Emulator, looking: KubeCluster, caplog: pytest.LogCaptureFixture) -> None:
    from kaisched.cluster.kinds import NODE, PRIORITY_CLASS

    classes = kmock.resource("scheduling.k8s.io/v1/priorityclasses")
    apiserver.call(lambda: apiserver.emu.override[classes] << forbidden)
    looking.create(build_node("n1"))
    with caplog.at_level(logging.INFO, logger="kaisched.cluster.watch"):
        sub = looking.subscribe([NODE, PRIORITY_CLASS])
        eventually(lambda: apiserver.count("list", classes) >= 3)     # refused thrice
        events = sub.drain()
    assert [e.obj["metadata"]["name"] for e in events] == ["n1"]
    lines = [r.getMessage() for r in caplog.records if "not allowed" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "grant list and watch on priorityclasses.scheduling.k8s.io" in lines[0]


def test_an_owner_kind_the_role_cannot_read_is_one_line(
        apiserver: Emulator, cluster: KubeCluster, caplog: pytest.LogCaptureFixture) -> None:
    apiserver.call(lambda: apiserver.emu.override[kmock.resource("batch/v1/jobs")] << forbidden)
    for name in ("a", "b"):
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": name,
                 "controller": True}
        cluster.create(build_pod(f"{name}-0", owner=owner))
    grouper = PodGrouper(cluster, WallClock())
    with caplog.at_level(logging.WARNING, logger="podgrouper.controller"):
        grouper.sync()
        grouper.sync()
    lines = [r.getMessage() for r in caplog.records if "not allowed" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "grant get on jobs.batch" in lines[0]
    for name in ("a", "b"):                 # grouped all the same, by the pod itself
        pod = cluster.get(POD, "default", f"{name}-0")
        assert pod["metadata"]["annotations"]["kaisched.io/pod-group"]
