"""The cluster a what-if starts from: a snapshot (`kaisched snapshot-dump`)
read into the simulator's terms.

Its nodes, namespaces and PodGroups are created as they are; its Queues and
PriorityClasses become the scenario's (a scenario may replace a queue by
naming it). Every pod the scheduler owns belongs to a job: the pods of one
PodGroup, arrived at time 0, running (bound) or waiting. A job whose pods an
emulated operator owns (the training operator, MPI, JobSet, KubeRay, the Job
controller) has its evicted pods made again, as that operator would; any
other is a set of bare pods, which nobody makes again. Pods of other
schedulers (DaemonSets, system pods) keep their room and never finish.

A job's gang is the one its pods name, in whichever API they name it:
kaisched's PodGroup, the upstream Workload API's (a v1alpha2/v1beta1 PodGroup
named by spec.schedulingGroup, a podGroup of a v1alpha1 Workload named by
spec.workloadRef) or KAI's PodGroup (the pod-group-name annotation); its
minimum, queue and priority class are read from that object as the
scheduler reads them. Pods that name no gang (or one of another scheduler's
annotations) are jobs of one pod each.

How long each job still runs: the `sim.kaisched.io/remaining` annotation of
its pods; else, for a snapshot of a simulated cluster, the duration its pods
carry less the time they have run; else `--remaining`; else the scenario's
`remaining:` distribution; else DEFAULT_REMAINING (and the run says how many
jobs that was).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

import attrs
import numpy as np

from kaisched.api import labels as L
from kaisched.api import workloadkinds as K
from kaisched.api.clock import from_rfc3339
from kaisched.api.gpuask import GPU_GROUP, GPU_GROUP_PREFIX, RECEIVED_TYPE
from kaisched.api.job import GangSpec
from kaisched.api.quantity import parse_duration
from kaisched.api.resource import CPU, PODS
from kaisched.api.types import pod_key
from kaisched.cache import convert
from kaisched.cache.convert.pods import gang_job, gang_ref, pod_request, upstream_gang_ref
from kaisched.errors import InputError
from kaisched.sim.operators import DURATION_ANNOTATION, Blueprint, PodPlan
from kaisched.sim.specs import GANG_APIS, Base, JobKind, JobSpec, NodePool, QueueSpec, Remaining, RoleSpec
from podgrouper.roles import pod_role

Obj = dict[str, Any]

REMAINING_ANNOTATION = "sim.kaisched.io/remaining"
DEFAULT_REMAINING = 3600.0
MIN_REMAINING = 1.0
# A job's kind, from the kind of what owns its pods (its name: an ownerReference
# is read as the snapshot has it); anything else: bare pods.
_ADOPTED = ((K.PYTORCH_JOB, JobKind.PYTORCH), (K.TF_JOB, JobKind.TF), (K.MPI_JOB, JobKind.MPI),
            (K.RAY_CLUSTER, JobKind.RAY), (K.RAY_JOB, JobKind.RAY), (K.JOB, JobKind.JOB))
_OWNER_KINDS = {w.kind: kind for w, kind in _ADOPTED}
_PRECEDENCE = tuple(dict.fromkeys(kind for _, kind in _ADOPTED))
# Operators that name pods themselves: a pod made again keeps its name.
_FIXED_NAMES = tuple(w.kind for w, _ in _ADOPTED if w.pods.name and not w.pods.generated)
_LEADERS = tuple(dict.fromkeys(r for w, _ in _ADOPTED for r in w.leading))
_JOBSET_LABEL = K.JOBSET.pods.job_label
_DROP_POD_META = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                  "generateName", "managedFields", "name")
# The gangs a pod may name by an object, and that object's API group and kind.
_GANG_OBJECTS = {"kaisched": ("scheduling.kaisched.io", "PodGroup"),
                 "upstream": ("scheduling.k8s.io", "PodGroup"),
                 "workload": ("scheduling.k8s.io", "Workload"),
                 "kai": ("scheduling.run.ai", "PodGroup")}
_UPSTREAM_READERS = {"scheduling.k8s.io/v1alpha2": convert.podgroup_v1alpha2,
                     "scheduling.k8s.io/v1alpha3": convert.podgroup_v1beta1,
                     "scheduling.k8s.io/v1beta1": convert.podgroup_v1beta1}
GroupKey = tuple[str, str, str, str]        # API group, kind, namespace, name


@attrs.frozen
class Adopted:
    """A job of the snapshot: its spec as the report reads it, its PodGroup,
    its pods (annotated with their run time) and how its operator remakes them."""
    spec: JobSpec
    pod_group: str
    pods: tuple[Obj, ...]
    plan: Blueprint
    owner: Obj | None              # the owner to name in remade pods' ownerReferences
    running: bool                  # bound at the snapshot
    estimated: str                 # where its run time came from


@attrs.frozen
class Start:
    source: str
    now: float                     # the snapshot's moment: the virtual clock starts there
    base: Base
    objects: tuple[Obj, ...]       # nodes, namespaces, PodGroups, pods of other schedulers
    jobs: tuple[tuple[tuple[str, str], tuple[Obj, ...], Obj | None], ...]   # key, pods, PodGroup


def read_start(objects: Iterable[Obj], source: str, scheduler_name: str,
               taken: float | None = None) -> Start:
    """The snapshot's objects sorted into the cluster and its jobs (run times
    come later). taken: when it was dumped; else the latest time in it."""
    objs = list(objects)
    nodes = [o for o in objs if o.get("kind") == "Node"]
    if not nodes:
        raise InputError(f"{source}: no Nodes in the snapshot: nothing to simulate on")
    queues = tuple(_queue(o) for o in objs if o.get("kind") == "Queue")
    classes = tuple(sorted((o["metadata"]["name"], int(o.get("value", 0)))
                           for o in objs if o.get("kind") == "PriorityClass"))
    groups: dict[GroupKey, Obj] = {}
    for o in objs:
        if o.get("kind") in ("PodGroup", "Workload"):
            group = str(o.get("apiVersion", "")).rpartition("/")[0]
            # An object served in two versions is read once: in the first one seen.
            groups.setdefault((group, o["kind"], o["metadata"].get("namespace", ""),
                               o["metadata"]["name"]), o)
    kept: list[Obj] = []
    jobs: dict[tuple[str, str], list[Obj]] = {}
    named: dict[tuple[str, str], GroupKey | None] = {}
    for obj in objs:
        kind = obj.get("kind")
        if kind in ("Queue", "PriorityClass", "Event", "Lease"):
            continue
        if kind != "Pod":
            kept.append(obj)
            continue
        phase = (obj.get("status") or {}).get("phase", "Pending")
        if phase in ("Succeeded", "Failed"):
            continue            # done: holds nothing
        if (obj.get("spec") or {}).get("schedulerName") != scheduler_name:
            kept.append(obj)
            continue
        key, declared = _gang(obj)
        jobs.setdefault(key, []).append(obj)
        named[key] = declared
    names = frozenset(_job_name(key, pods) for key, pods in jobs.items())
    base = Base(Path(source).stem, _pools(nodes), queues, classes, names)
    return Start(source, taken if taken is not None else _moment(objs), base, tuple(kept),
                 tuple((key, tuple(pods), groups.get(found) if (found := named[key]) else None)
                       for key, pods in sorted(jobs.items())))


def _gang(pod: Obj) -> tuple[tuple[str, str], GroupKey | None]:
    """The job a pod belongs to, keyed as the scheduler keys its gang
    (namespace, name), and the object that declares that gang, if any."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    namespace = meta["namespace"]
    ref = upstream_gang_ref(spec) or gang_ref(meta)
    declared = _GANG_OBJECTS.get(ref.source)
    if declared is None:
        return (namespace, meta["name"]), None      # a job of one pod
    job = gang_job(pod_key(namespace, meta["name"]), namespace, ref).split("/", 1)[1]
    return (namespace, job), (*declared, namespace, ref.name)


def _declared(group: Obj, pods: tuple[Obj, ...]) -> GangSpec | None:
    """The gang an upstream or KAI object declares, as the scheduler reads it."""
    api = str(group.get("apiVersion", ""))
    if api.startswith("scheduling.run.ai/"):
        return convert.kai_podgroup(group)[0]
    if group.get("kind") == "Workload":
        member = str(((pods[0].get("spec") or {}).get("workloadRef") or {}).get("podGroup", ""))
        return convert.workload_v1alpha1(group).gang(member)
    reader = _UPSTREAM_READERS.get(api)
    return reader(group)[0] if reader is not None else None


def adopt(start: Start, remaining: float | None, distribution: Remaining | None,
          seed: int) -> tuple[list[Adopted], int]:
    """The snapshot's jobs with their run times; and how many got the default."""
    rng = np.random.default_rng(seed)
    out, defaulted = [], 0
    for key, pods, group in start.jobs:
        running = any((p.get("spec") or {}).get("nodeName") for p in pods)
        left, how = _annotated(pods, start.now)
        if left is None and remaining is not None:
            left, how = remaining, "--remaining"
        if left is None and distribution is not None:
            # Whole minutes: an estimate has no finer grain, and a big cluster's
            # jobs then end in batches rather than one every second.
            d = distribution
            drawn = float(np.clip(rng.lognormal(math.log(d.median), d.sigma), d.low, d.high))
            left = max(60.0, round(drawn / 60.0) * 60.0)
            how = "the scenario's remaining: distribution"
        if left is None:
            left, how = DEFAULT_REMAINING, "the default"
            defaulted += 1
        out.append(_adopted(key, pods, group, max(left, MIN_REMAINING), running, how))
    return out, defaulted


# -- the pieces ----------------------------------------------------------------------------

def _adopted(key: tuple[str, str], pods: tuple[Obj, ...], group: Obj | None, left: float,
             running: bool, how: str) -> Adopted:
    namespace, pg = key
    owners = [_controller(p) for p in pods]
    kinds = [_OWNER_KINDS.get(str(o.get("kind")), JobKind.GANG) if o else JobKind.GANG
             for o in owners]
    kind = next((k for k in _PRECEDENCE if k in kinds), JobKind.GANG)
    if kind is JobKind.JOB and any(_JOBSET_LABEL in (p["metadata"].get("labels") or {})
                                   for p in pods):
        kind = JobKind.JOBSET
    annotated, plans, templates = [], [], {}
    counts: dict[str, int] = {}           # per role, in first-seen order
    shapes: dict[str, tuple[tuple[str, str], ...]] = {}
    run_for = f"{left:g}s"
    role_of = [_role(p) for p in pods]
    leaders = set(role_of) & set(_LEADERS) or set(role_of)    # no leading role: every pod
    for index, pod in enumerate(pods):
        meta = pod["metadata"]
        role = role_of[index]
        if role not in templates:
            # The pods of a role are made from one template: one shape.
            templates[role] = _template(pod)
            shapes[role] = _requests(pod)
        counts[role] = counts.get(role, 0) + 1
        annotated.append({**pod, "metadata": {**meta, "annotations": {
            **(meta.get("annotations") or {}), DURATION_ANNOTATION: run_for}}})
        owner = owners[index]
        fixed = owner is not None and owner.get("kind") in _FIXED_NAMES
        plans.append(PodPlan(role=role, index=index, parent=0 if owner else None,
                             name=meta["name"] if fixed or kind is JobKind.GANG else None,
                             prefix=_prefix(meta["name"]), labels=(), leader=role in leaders))
    owner_ref = next((o for o in owners if o), None)
    owner = ({"apiVersion": owner_ref.get("apiVersion", "v1"), "kind": owner_ref.get("kind"),
              "metadata": {"name": owner_ref.get("name"), "uid": owner_ref.get("uid"),
                           "namespace": namespace}} if owner_ref else None)
    g_spec = (group or {}).get("spec") or {}
    first_labels = pods[0]["metadata"].get("labels") or {}
    pod_class = (pods[0].get("spec") or {}).get("priorityClassName") or None
    own = str((group or {}).get("apiVersion", "")).startswith("scheduling.kaisched.io/")
    gang = _declared(group, pods) if group is not None and not own else None
    if gang is not None:
        queue = str(gang.queue or L.queue_label(first_labels) or "default")
        minimum: int | None = gang.min_member
        priority_class = gang.priority_class or pod_class
        gang_api = str(group.get("apiVersion")) if group is not None else GANG_APIS[0]
    else:
        queue = str(g_spec.get("queue") or first_labels.get(L.QUEUE_LABEL) or "default")
        minimum = int(g_spec["minMember"]) if g_spec.get("minMember") else None
        priority_class, gang_api = pod_class, GANG_APIS[0]
    spec = JobSpec(
        name=_job_name(key, pods)[1], kind=kind, queue=queue,
        namespace=namespace, arrival=0.0, duration=left,
        roles=tuple(RoleSpec(role, counts[role], request) for role, request in shapes.items()),
        priority_class=priority_class, min_available=minimum, gang_api=gang_api,
        where=f"snapshot job {namespace}/{pg}")
    plan = Blueprint(objects=(owner,) if owner else (), parents=(None,) if owner else (),
                     pods=tuple(plans), templates=templates,
                     recreates=kind is not JobKind.GANG)
    return Adopted(spec, pg if group is not None or len(pods) > 1 else "", tuple(annotated),
                   plan, owner, running, how)


def _annotated(pods: tuple[Obj, ...], now: float) -> tuple[float | None, str]:
    """The run time left that the pods say: remaining, or duration less time run."""
    left: float | None = None
    how = ""
    for pod in pods:
        annotations = pod["metadata"].get("annotations") or {}
        if REMAINING_ANNOTATION not in annotations and DURATION_ANNOTATION not in annotations:
            continue
        try:
            if REMAINING_ANNOTATION in annotations:
                value = parse_duration(annotations[REMAINING_ANNOTATION])
                how = f"the {REMAINING_ANNOTATION} annotation"
            elif DURATION_ANNOTATION in annotations:
                value = parse_duration(annotations[DURATION_ANNOTATION])
                started = from_rfc3339((pod.get("status") or {}).get("startTime"))
                if started is not None and (pod.get("status") or {}).get("phase") == "Running":
                    value -= now - started
                how = f"the {DURATION_ANNOTATION} annotation less the time run"
            else:
                continue
        except ValueError as exc:
            name = f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"
            raise InputError(f"pod {name}: {exc}") from None
        left = value if left is None else max(left, value)
    return left, how


def _controller(pod: Obj) -> Obj | None:
    refs = pod["metadata"].get("ownerReferences") or []
    return next((r for r in refs if r.get("controller")), refs[0] if refs else None)


def _job_name(key: tuple[str, str], pods: Iterable[Obj]) -> tuple[str, str]:
    """Jobs are named after what owns their pods (the MPIJob rather than its
    launcher's Job) when one thing does, else after their PodGroup."""
    owners = {(r.get("kind"), r.get("name")) for p in pods if (r := _controller(p)) is not None
              and r.get("kind") in _OWNER_KINDS}
    top = {o for o in owners if o[0] != K.JOB.kind} or owners
    return (key[0], str(next(iter(top))[1])) if len(top) == 1 else key


def _role(pod: Obj) -> str:
    labels = pod["metadata"].get("labels") or {}
    return str(labels.get(L.SUBGROUP_LABEL) or labels.get(L.KAI_SUBGROUP_LABEL)
               or pod_role(labels) or "main")


def _requests(pod: Obj) -> tuple[tuple[str, str], ...]:
    """What the pod asks for, as quantities."""
    request = pod_request(pod.get("spec") or {}, [])
    return tuple(sorted((name, f"{value:g}m" if name == CPU else f"{value:g}")
                        for name, value in request.items if name != PODS and value))


def _template(pod: Obj) -> Obj:
    """What a remade pod looks like: this one, unbound, not started."""
    meta = {k: v for k, v in pod["metadata"].items()
            if k not in _DROP_POD_META and k != "ownerReferences" and k != "namespace"}
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
    # The GPU a sharer was given is its own: a pod made again is given its own.
    labels = {k: v for k, v in (meta.get("labels") or {}).items()
              if k != GPU_GROUP and not k.startswith(GPU_GROUP_PREFIX)}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != RECEIVED_TYPE}
    return {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec}


def _prefix(name: str) -> str:
    head, _, tail = name.rpartition("-")
    return f"{head}-" if head and len(tail) == 5 else f"{name}-"


def _pools(nodes: list[Obj]) -> tuple[NodePool, ...]:
    """The nodes as pools of alike ones (capacity, labels, taints), for the checks."""
    pools: dict[Any, int] = {}
    for node in nodes:
        alloc = (node.get("status") or {}).get("allocatable") or {}
        labels = tuple(sorted((k, str(v)) for k, v in (node["metadata"].get("labels") or {}).items()
                              if k != "kubernetes.io/hostname"))
        taints = tuple((t.get("key", ""), str(t.get("value", "")), t.get("effect", ""))
                       for t in (node.get("spec") or {}).get("taints") or ())
        key = (tuple(sorted((k, str(v)) for k, v in alloc.items() if k != PODS)), labels, taints)
        pools[key] = pools.get(key, 0) + 1
    return tuple(NodePool(f"snapshot-{i}", count, capacity, labels, taints)
                 for i, ((capacity, labels, taints), count) in enumerate(pools.items()))


def _queue(obj: Obj) -> QueueSpec:
    if str(obj.get("apiVersion", "")).startswith("scheduling.run.ai/"):
        return _kai_queue(obj)
    spec = obj.get("spec") or {}
    resources = []
    for name, entry in sorted((spec.get("resources") or {}).items()):
        kept = tuple((k, str(entry[k]) if k != "overQuotaWeight" else entry[k])
                     for k in ("quota", "limit", "overQuotaWeight")
                     if isinstance(entry, dict) and entry.get(k) is not None)
        resources.append((str(name), kept))
    return QueueSpec(obj["metadata"]["name"], spec.get("parentQueue"),
                     int(spec.get("priority", 100)), tuple(resources))


def _moment(objs: list[Obj]) -> float:
    """When the snapshot was taken, as near as its objects tell: the latest time in them."""
    latest = 0.0
    for obj in objs:
        for value in ((obj.get("metadata") or {}).get("creationTimestamp"),
                      (obj.get("status") or {}).get("startTime")):
            moment = from_rfc3339(value) if isinstance(value, str) else None
            if moment is not None and moment > latest:
                latest = moment
    return latest or 1_767_225_600.0


def _kai_queue(obj: Obj) -> QueueSpec:
    """A KAI Queue as the scheduler reads it (its gpu, cpu in millicores and
    memory in megabytes, -1 for all of it), in the scenario's terms: the
    simulated cluster has it as a kaisched Queue of the same meaning."""
    found = convert.kai_queue(obj)
    limits, weights = dict(found.limits), dict(found.weights)
    names = sorted(set(found.quota.names()) | set(limits) | set(weights))

    def text(name: str, value: float) -> str:
        return f"{int(value)}m" if name == CPU else str(int(value)) if value.is_integer() else f"{value:g}"

    resources = []
    for name in names:
        fields: list[tuple[str, Any]] = []
        if name in found.quota.names():
            fields.append(("quota", text(name, found.quota.get(name))))
        if name in limits:
            fields.append(("limit", text(name, limits[name])))
        if name in weights:
            fields.append(("overQuotaWeight", weights[name]))
        resources.append((name, tuple(fields)))
    return QueueSpec(found.name, found.parent, found.priority, tuple(resources))
