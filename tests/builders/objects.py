"""Raw Kubernetes objects for the memory backend, and one scheduler cycle over them.

Test modules import these (``from tests.builders.objects import build_pod``); they
are plain functions, so they can be used inside ``parametrize`` lists and
hypothesis strategies as well as in test bodies.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import attrs

from kaisched.api.clock import ManualClock
from kaisched.api.clusterinfo import ClusterInfo
from kaisched.builtins.catalog import register_builtins
from kaisched.cache import Cache
from kaisched.cluster.kinds import POD
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import Registry, SchedulerConfig, Session, default_config, parse_config
from kaisched.framework.effects import Bind, Effect
from kaisched.runtime.binder import Binder
from kaisched.runtime.cycle import CycleResult
from kaisched.runtime.scheduler import Scheduler

Obj = dict[str, Any]

PG_API = "scheduling.kaisched.io/v1alpha1"
DEFAULT_TIERS = """\
tiers:
  - plugins: [{name: priority}, {name: gang}]
  - plugins:
    - {name: proportion}
    - {name: predicates}
    - {name: nodeorder, arguments: {strategy: %s}}
"""


def config_text(strategy: str = "binpack") -> str:
    """allocate + backfill only (the other actions are not the unit under test)."""
    return "actions: [allocate, backfill]\n" + DEFAULT_TIERS % strategy


def load_test_config(strategy: str = "binpack") -> tuple[SchedulerConfig, Registry]:
    registry = register_builtins()
    return parse_config(config_text(strategy), registry), registry


# -- raw objects ------------------------------------------------------------------

def _quantities(cpu: float | str | None, gpu: float | str | None, memory: str | None,
                extra: Mapping[str, Any] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    if cpu:
        out["cpu"] = str(cpu)
    if memory:
        out["memory"] = memory
    if gpu:
        out["nvidia.com/gpu"] = str(gpu)
    out.update({k: str(v) for k, v in (extra or {}).items()})
    return out


def build_node(name: str, cpu: float | str = 4, gpu: float | str = 0, memory: str = "16Gi",
               pods: int | str | None = None, labels: Mapping[str, str] | None = None,
               taints: Iterable[Mapping[str, str]] = (), ready: bool | None = True,
               unschedulable: bool = False, extra: Mapping[str, Any] | None = None) -> Obj:
    """A Node; ready=None leaves out status.conditions (taken as Ready)."""
    allocatable = _quantities(cpu, gpu, memory, extra)
    if pods is not None:
        allocatable["pods"] = str(pods)
    status: Obj = {"allocatable": allocatable}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    spec: Obj = {}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": spec, "status": status}


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, str]:
    out = {"key": key, "effect": effect}
    if value:
        out["value"] = value
    return out


def build_pod(name: str, cpu: float | str = 1, gpu: float | str = 0, memory: str | None = None,
              group: str | None = None, namespace: str = "default", node: str | None = None,
              phase: str | None = None, queue: str | None = None,
              scheduler: str = "kaisched", node_selector: Mapping[str, str] | None = None,
              affinity_terms: list[Obj] | None = None, tolerations: list[Obj] | None = None,
              labels: Mapping[str, str] | None = None,
              annotations: Mapping[str, str] | None = None, priority: int | None = None,
              owner: Obj | None = None, extra: Mapping[str, Any] | None = None,
              creation: str | None = None) -> Obj:
    """A Pod with one container requesting cpu/gpu/memory (0 leaves it out).

    group names a kaisched PodGroup (the kaisched.io/pod-group annotation);
    node + phase describe a pod already placed (phase defaults to Running).
    """
    meta: Obj = {"name": name, "namespace": namespace, "labels": dict(labels or {}),
                 "annotations": dict(annotations or {})}
    if group:
        meta["annotations"]["kaisched.io/pod-group"] = group
    if queue:
        meta["labels"]["kaisched.io/queue"] = queue
    if owner:
        meta["ownerReferences"] = [owner]
    if creation:
        meta["creationTimestamp"] = creation
    requests = _quantities(cpu, gpu, memory, extra)
    container: Obj = {"name": "main", "image": "busybox"}
    if requests:
        container["resources"] = {"requests": requests}
    spec: Obj = {"schedulerName": scheduler, "containers": [container]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity_terms is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": affinity_terms}}}
    if tolerations:
        spec["tolerations"] = tolerations
    if priority is not None:
        spec["priority"] = priority
    status: Obj = {"phase": "Pending"}
    if node:
        spec["nodeName"] = node
        status["phase"] = phase or "Running"
    elif phase:
        status["phase"] = phase
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def sharer_pod(name: str, fraction: str, node: str | None = None, group: str | None = None) -> Obj:
    """A pod asking for a fraction of a GPU (KAI's gpu-fraction annotation); with group, it
    holds that shared GPU already (KAI's runai-gpu-group label)."""
    labels = {"runai-gpu-group": group} if group else {}
    return build_pod(name, node=node, annotations={"gpu-fraction": fraction}, labels=labels)


def reservation_pod(name: str, node: str, group: str, namespace: str = "kaisched-system",
                    app: str = "kaisched-gpu-reservation") -> Obj:
    """The pod that holds a shared GPU on its node for its sharers: kaisched's by default,
    KAI's with namespace kai-resource-reservation and app runai-reservation."""
    return build_pod(name, gpu=1, node=node, namespace=namespace, scheduler="default-scheduler",
                     labels={"app": app, "runai-gpu-group": group})


def build_podgroup(name: str, min_member: Any = 1, queue: str | None = None,
                   namespace: str = "default", api: str = PG_API, **spec: Any) -> Obj:
    body: Obj = {"minMember": min_member, **spec}
    if queue:
        body["queue"] = queue
    return {"apiVersion": api, "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace}, "spec": body}


def build_upstream_podgroup(version: str, name: str = "pg", **spec: Any) -> Obj:
    """A PodGroup of the upstream Workload API at version (v1alpha1...), a gang of two."""
    return {"apiVersion": f"scheduling.k8s.io/{version}", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default", "generation": 3},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, **spec}}


def build_kai_podgroup(name: str = "pg", **spec: Any) -> Obj:
    """A PodGroup of KAI's API (scheduling.run.ai/v2alpha2) with spec as given."""
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def build_queue(name: str, parent: str | None = None,
                resources: Mapping[str, Mapping[str, Any]] | None = None,
                priority: int | None = None) -> Obj:
    """A Queue; resources is {"cpu": {"quota": "2", "limit": "4", "overQuotaWeight": 1}}."""
    spec: Obj = {}
    if parent:
        spec["parentQueue"] = parent
    if resources:
        spec["resources"] = {k: (dict(v) if isinstance(v, Mapping) else v)
                             for k, v in resources.items()}
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": PG_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


# -- one cycle ----------------------------------------------------------------------

@attrs.frozen
class Cycle:
    result: CycleResult
    cluster: MemoryCluster = attrs.field(eq=False, repr=False)

    @property
    def bindings(self) -> dict[str, str]:
        """pod key -> node, as bound through the binder this cycle."""
        return {e.pod: e.node for e in self.result.effects if isinstance(e, Bind)}

    @property
    def effects(self) -> list[Effect]:
        return self.result.effects


def load_cluster(objects: Iterable[Obj], clock: ManualClock | None = None) -> MemoryCluster:
    cluster = MemoryCluster(clock or ManualClock())
    for obj in objects:
        cluster.create(obj)
    return cluster


def run_cycle(objects: Iterable[Obj], strategy: str = "binpack") -> Cycle:
    """Load raw objects into a MemoryCluster and run one Scheduler.run_once()."""
    clock = ManualClock()
    cluster = load_cluster(objects, clock)
    config, registry = load_test_config(strategy)
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    return Cycle(scheduler.run_once(), cluster)


def run_default_cycle(objects: Iterable[Obj]) -> Cycle:
    """One Scheduler.run_once() with the built-in config (every action and plugin)."""
    clock = ManualClock()
    cluster = load_cluster(objects, clock)
    registry = register_builtins()
    scheduler = Scheduler(cluster, default_config(registry), registry, clock, Binder(cluster, clock.now))
    return Cycle(scheduler.run_once(), cluster)


def snapshot(objects: Iterable[Obj], now: float = 0.0) -> ClusterInfo:
    """The ClusterInfo the cache assembles from raw objects."""
    cache = Cache()
    cache.sync(load_cluster(objects))
    return cache.snapshot(now)


def open_session(objects: Iterable[Obj], strategy: str = "binpack") -> Session:
    """A Session over raw objects, opened with the test config's plugins (no actions run)."""
    config, registry = load_test_config(strategy)
    return Session(snapshot(objects), config, registry.build_plugins(config))


def default_session(objects: Iterable[Obj], now: float = 0.0) -> Session:
    """A Session over raw objects with the built-in config: every action's plugins, as
    `kaisched run` opens it (no action run)."""
    registry = register_builtins()
    config = default_config(registry)
    return Session(snapshot(objects, now), config, registry.build_plugins(config))


def pod_scheduled_message(cluster: MemoryCluster, name: str, namespace: str = "default") -> str:
    """The message of a pod's PodScheduled=False condition (asserting it is there)."""
    pod = cluster.get(POD, namespace, name)
    assert pod is not None, f"pod {namespace}/{name} not found"
    cond = next((c for c in (pod.get("status") or {}).get("conditions") or ()
                 if c.get("type") == "PodScheduled"), {})
    assert cond.get("status") == "False", f"{namespace}/{name}: {cond}"
    return str(cond.get("message", ""))
