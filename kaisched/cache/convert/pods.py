"""Pods: what scheduling reads of one, what it asks for, and which gang it names."""
from __future__ import annotations

import functools
import hashlib
from typing import Callable, NamedTuple, TypeVar

import attrs
import orjson

from kaisched.api import gpuask as G
from kaisched.api import labels as L
from kaisched.api.clock import from_rfc3339
from kaisched.api.constraints import Placement
from kaisched.api.dradevices import PodClaimRef
from kaisched.api.gpuask import GpuShare
from kaisched.api.quantity import parse_duration
from kaisched.api.resource import GPU, PODS, Resource
from kaisched.api.types import DEFAULT_SCHEDULER, JobKey, NodeName, PodKey, TaskStatus, job_key, pod_key
from kaisched.api.volumes import PodClaim
from kaisched.api.workloadkinds import KINDS
from kaisched.cache.convert.common import Obj, finite, metadata, quantities
from kaisched.cache.convert.draobjects import pod_claim_refs, resolve_claims
from kaisched.cache.convert.koordinator import optional_settings
from kaisched.cache.convert.rules import placement
from kaisched.cache.convert.runtimes import PodRuntime, estimate, pod_runtime
from kaisched.cache.convert.volumes import pod_pvcs

_CRITICAL_CLASSES = ("system-cluster-critical", "system-node-critical")
# Owners whose pods form gangs (the table of workload kinds says which): such a
# pod waits for the PodGrouper's PodGroup rather than being scheduled alone (which
# would break the gang; an Argo step would run outside its Workflow's queue).
GANG_OWNER_GROUPS = frozenset(k.group for k in KINDS if k.gang_owner)
# Gang pods whose controller is a plain StatefulSet or ReplicaSet, known by the label
# their operator puts on them: a LeaderWorkerSet group's pods, a Knative revision's pods.
GANG_POD_LABELS = tuple(k.pods.job_label for k in KINDS if k.gang_by_label)


@attrs.frozen(slots=True, cache_hash=True)     # a key of the caches below
class GangRef:
    """Which gang a pod names, and how."""

    # kaisched | x-k8s | koord | kai | upstream (a PodGroup of the Workload API) |
    # workload (a podGroup of a v1alpha1 Workload) | koordinator | volcano | owner | none
    source: str
    name: str = ""         # the object it names: a PodGroup, or (workload) the Workload
    replica: str = ""      # workloadRef.podGroupReplicaKey: one gang per replica
    member: str = ""       # workloadRef.podGroup: the gang within the Workload


class PodFacts(NamedTuple):
    """What scheduling reads of a pod, converted once per pod event. A named
    tuple rather than a frozen attrs class: one is made per pod, 1,500,000 at
    a cold start of a big cluster, and a tuple is made four times faster."""

    key: PodKey
    uid: str
    job: JobKey                        # the gang it belongs to (itself, for a gang of one)
    scheduler_name: str
    status: TaskStatus | None          # None: going away without a node, ignore
    node_name: NodeName | None
    resreq: Resource
    priority: int | None
    priority_class: str
    queue_label: str | None
    subgroup: str | None
    gang: GangRef
    annotations: tuple[tuple[str, str], ...]
    creation: float
    placement: Placement
    critical: bool
    unschedulable: str | None
    problem: str | None = None
    unschedulable_reason: str | None = None
    started: float | None = None       # status.startTime
    labels: tuple[tuple[str, str], ...] = ()
    never_preempts: bool = False       # its own spec.preemptionPolicy (admission copies the class's)
    gates: tuple[str, ...] = ()        # spec.schedulingGates, by name
    pvcs: tuple[PodClaim, ...] = ()            # the PVCs it mounts
    claims: tuple[str, ...] = ()       # ResourceClaims it names (namespace/name)
    controlled: bool = False           # a controller owns it (makes it again when evicted)
    # Its spec.resourceClaims as written, for a pod of an upstream PodGroup: those
    # equal to one of the group's claims stand for the group's (see jobs.make_task).
    claim_refs: tuple[PodClaimRef, ...] = ()
    warnings: tuple[str, ...] = ()     # declarations ignored for their defaults, to tell once
    gpu: GpuShare | None = None        # part of a GPU, by KAI's annotations
    reserves: str | None = None        # a reservation pod: the shared device it holds
    kai_reservation: bool = False      # ... made by KAI's binder
    runtime: PodRuntime | None = None  # its limits, its Job, its estimate (most pods: none)

    def annotation(self, name: str) -> str | None:
        return next((v for k, v in self.annotations if k == name), None)


def pod_request(spec: Obj, problems: list[str]) -> Resource:
    """As kube-scheduler: max(sum of containers + sidecars, the largest init
    step) + overhead, and one pod slot. The pods of a job ask alike: what
    their containers ask is worked out once per distinct ask."""
    containers, init = spec.get("containers"), spec.get("initContainers")
    if not init and type(containers) is list and len(containers) == 1 \
            and type(containers[0]) is dict and "overhead" not in spec:
        # Most pods: one container, nothing else asked; its resources are the
        # key (none written reads as none asked: the same key).
        resources = containers[0].get("resources") or {}
        try:
            key = orjson.dumps(resources)
        except TypeError:
            return _request(spec, problems)      # a value no key holds (a hand-written file)
        res, found, nulls = _request_of_one(key)
        if nulls and not finite(resources):
            return _request(spec, problems)      # a key that stands for another ask too
        if found:
            problems.extend(found)
        return res
    try:
        # As _request reads them: resources none written or empty alike, and of
        # a restart policy only whether it is Always (a sidecar).
        main = [(c.get("resources") or {}, c.get("restartPolicy") == "Always")
                for c in containers] if containers else []
        steps = [(c.get("resources") or {}, c.get("restartPolicy") == "Always")
                 for c in init] if init else []
        asked = (main, steps, spec.get("overhead") or {})
        key = orjson.dumps(asked)
    except (AttributeError, TypeError):
        return _request(spec, problems)          # malformed: read as it is, and fail there
    res, found, nulls = _request_of(key)
    if nulls and not finite(asked):
        return _request(spec, problems)          # a key that stands for another ask too
    if found:
        problems.extend(found)
    return res


# What a key's ask is: its Resource, the problems read, and whether the key
# holds a null (then it is trusted only for an ask with no infinite number).
# common.json_key guards its keys alike, but looks for the null at every call:
# on this path, asked of every pod of a first list, that is 8-17 % more a pod,
# so the answer is kept with the ask instead.
Ask = tuple[Resource, tuple[str, ...], bool]


@functools.lru_cache(maxsize=4096)
def _request_of(key: bytes) -> Ask:
    main, init, overhead = orjson.loads(key)
    spec = {"containers": [{"resources": r, "restartPolicy": "Always" if p else None}
                           for r, p in main],
            "initContainers": [{"resources": r, "restartPolicy": "Always" if p else None}
                               for r, p in init],
            "overhead": overhead}
    problems: list[str] = []
    return _request(spec, problems), tuple(problems), key.find(b"null") != -1


@functools.lru_cache(maxsize=4096)
def _request_of_one(key: bytes) -> Ask:
    problems: list[str] = []
    return (_request({"containers": [{"resources": orjson.loads(key)}]}, problems),
            tuple(problems), key.find(b"null") != -1)


def _request(spec: Obj, problems: list[str]) -> Resource:
    def req(c: Obj, where: str) -> Resource:
        # As the API server defaults it: a limit with no request is the request.
        resources = c.get("resources") or {}
        limits, requests = resources.get("limits"), resources.get("requests")
        if isinstance(limits, dict) and (requests is None or isinstance(requests, dict)):
            requests = {**limits, **(requests or {})}
        return quantities(requests, where, problems)

    total = Resource()
    for i, c in enumerate(spec.get("containers") or []):
        total = total + req(c, f"containers[{i}].resources.requests")
    sidecars, init_peak = Resource(), Resource()
    for i, c in enumerate(spec.get("initContainers") or []):
        r = req(c, f"initContainers[{i}].resources.requests")
        step = sidecars + r
        if c.get("restartPolicy") == "Always":
            sidecars = sidecars + r
        init_peak = _max(init_peak, step)
    if not init_peak.is_empty():
        total = _max(total + sidecars, init_peak)
    total = total + quantities(spec.get("overhead"), "overhead", problems)
    return total + Resource.of({PODS: 1})


def _max(a: Resource, b: Resource) -> Resource:
    names = set(a.names()) | set(b.names())
    return Resource.of({n: max(a.get(n), b.get(n)) for n in names})


def scheduler_name(spec: Obj) -> str:
    """The scheduler the pod names (or the default)."""
    return str(spec.get("schedulerName") or DEFAULT_SCHEDULER)


def task_status(pod: Obj) -> TaskStatus | None:
    spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, metadata(pod)
    phase = status.get("phase") or "Pending"
    node = spec.get("nodeName")
    deleting = bool(meta.get("deletionTimestamp"))
    if phase in ("Succeeded", "Failed"):
        # A pod deleted before it ended was stopped, not finished: an evicted
        # pod whose process exits 0 on SIGTERM ends Succeeded on its way out.
        # Counted, it would fill its gang's minimum for the pods its
        # controller makes again, and they would bind a few at a time.
        if deleting:
            return None
        return TaskStatus.SUCCEEDED if phase == "Succeeded" else TaskStatus.FAILED
    if deleting:
        return TaskStatus.RELEASING if node else None
    if not node:
        return TaskStatus.PENDING
    if phase == "Running":
        return TaskStatus.RUNNING
    if phase == "Pending":
        return TaskStatus.BOUND
    return TaskStatus.UNKNOWN


# The pods of a gang name it alike: one GangRef each, shared.
_gangs = functools.lru_cache(maxsize=1 << 16)(GangRef)
_NO_GANG = GangRef("none")


def _gang(source: str, name: str) -> GangRef:
    return _cached(_gangs, source, name)


def gang_ref(meta: Obj) -> GangRef:
    annotations, labels = meta.get("annotations") or {}, meta.get("labels") or {}
    if annotations.get(L.POD_GROUP_ANNOTATION):
        return _gang("kaisched", annotations[L.POD_GROUP_ANNOTATION])
    if labels.get(L.XK8S_POD_GROUP_LABEL):
        return _gang("x-k8s", labels[L.XK8S_POD_GROUP_LABEL])
    if annotations.get(L.KAI_POD_GROUP_ANNOTATION):
        return _gang("kai", annotations[L.KAI_POD_GROUP_ANNOTATION])
    if annotations.get(L.KOORD_NAME):
        return _gang("koordinator", annotations[L.KOORD_NAME])
    if labels.get(L.KOORD_POD_GROUP_LABEL):      # Koordinator's PodGroup object
        return _gang("koord", labels[L.KOORD_POD_GROUP_LABEL])
    if annotations.get(L.VOLCANO_GROUP_NAME):
        return _gang("volcano", annotations[L.VOLCANO_GROUP_NAME])
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller"):
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            if group in GANG_OWNER_GROUPS:
                return _gang("owner", f"{ref.get('kind')} {ref.get('name')}")
    for label in GANG_POD_LABELS:
        if labels.get(label):
            return _gang("owner", f"{label.partition('.')[0]} {labels[label]}")
    return _NO_GANG


def upstream_gang_ref(spec: Obj) -> GangRef | None:
    """The Workload API: spec.schedulingGroup.podGroupName names a PodGroup
    object (Kubernetes 1.36+); spec.workloadRef {name, podGroup,
    podGroupReplicaKey} names a podGroup of a v1alpha1 Workload (1.35), each
    replica key a gang of its own."""
    group = spec.get("schedulingGroup")
    if isinstance(group, dict) and group.get("podGroupName"):
        return GangRef("upstream", str(group["podGroupName"]))
    ref = spec.get("workloadRef")
    if isinstance(ref, dict) and ref.get("name") and ref.get("podGroup"):
        return GangRef("workload", str(ref["name"]), str(ref.get("podGroupReplicaKey") or ""),
                       str(ref["podGroup"]))
    return None


def gang_job(key: PodKey, namespace: str, gang: GangRef) -> JobKey:
    if gang.source in ("none", "owner"):
        return JobKey(key)         # a gang of one (or one waiting for its PodGroup)
    return _cached(_named_job, namespace, gang)


@functools.lru_cache(maxsize=1 << 16)
def _named_job(namespace: str, gang: GangRef) -> JobKey:
    """The job of a gang's pods: one key, shared by them all."""
    # A Workload's gangs are its podGroups (a DNS label, so ':' cannot clash).
    name = f"{gang.name}:{gang.member}" if gang.source == "workload" else gang.name
    if gang.replica:
        return job_key(namespace, f"{name}[{gang.replica}]")
    return job_key(namespace, name)


def pod_facts(pod: Obj) -> PodFacts:
    # Made once per pod event, so written for speed: each field read with one
    # lookup, the rare ones (claims, GPU shares, warnings) only when present,
    # and the facts made by position (_make: no keyword to match, every field given).
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    status = pod.get("status") or {}
    problems: list[str] = []
    resreq = pod_request(spec, problems)
    namespace = meta.get("namespace") or "default"
    name = meta.get("name", "")
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    scheduled_false = _scheduled_false(status) if status.get("conditions") else None
    pc = str(spec.get("priorityClassName") or "")
    priority = spec.get("priority")
    key = PodKey(f"{namespace}/{name}")
    # A gang named in the pod's spec (the upstream API) wins over annotations,
    # which the PodGrouper may have added to a pod that already had one.
    gang = upstream_gang_ref(spec) or gang_ref(meta)
    refs = pod_claim_refs(pod) if spec.get("resourceClaims") else ()
    claims: tuple[str, ...] = ()
    if refs:
        claims, _, waiting = resolve_claims(refs, namespace)
        # A pod of an upstream PodGroup may wait for its group's claim instead:
        # its job says so, knowing the group (kaisched.cache.jobs).
        if waiting and gang.source != "upstream":
            problems.append(waiting)
    expected, wrong = (estimate(annotations, labels)
                       if L.EXPECTED_RUNTIME in annotations or L.KUEUE_MAX_EXEC_TIME in labels
                       else (None, None))
    share, reserves, kai = None, None, False
    if G.GPU_FRACTION in annotations or G.GPU_MEMORY in annotations or G.GPU_DEVICES in annotations:
        share, refused = G.parse_share(annotations, labels, resreq.get(GPU))
        if refused:
            problems.append(refused)
    elif labels.get(G.GPU_GROUP):
        reserves, kai = reservation(namespace, labels)
        if reserves is not None:        # its GPU is its device's, counted once as such
            resreq = resreq - Resource.of({GPU: resreq.get(GPU)})
    node = spec.get("nodeName")
    owners = meta.get("ownerReferences")
    return PodFacts._make((
        key,                                                    # key
        str(meta.get("uid", "")),                               # uid
        gang_job(key, namespace, gang),                         # job
        scheduler_name(spec),                                   # scheduler_name
        task_status(pod),                                       # status
        NodeName(node) if node else None,                       # node_name
        resreq,                                                 # resreq
        priority if isinstance(priority, int) and not isinstance(priority, bool) else None,
        pc,                                                     # priority_class
        L.queue_label(labels) if labels else None,              # queue_label
        labels.get(L.SUBGROUP_LABEL) or labels.get(L.KAI_SUBGROUP_LABEL) if labels else None,
        gang,                                                   # gang
        _shared(_read_annotations, annotations) if annotations else (),
        from_rfc3339(meta.get("creationTimestamp")) or 0.0,     # creation
        placement(spec, namespace, labels),                     # placement
        namespace == "kube-system" or pc in _CRITICAL_CLASSES,  # critical
        scheduled_false.get("message") if scheduled_false else None,    # unschedulable
        "; ".join(problems) or None,                            # problem
        scheduled_false.get("reason") if scheduled_false else None,     # unschedulable_reason
        from_rfc3339(status.get("startTime")),                  # started
        _shared(_sorted_labels, labels) if labels else (),        # labels
        spec.get("preemptionPolicy") == "Never",                # never_preempts
        scheduling_gates(spec) if "schedulingGates" in spec else (),   # gates
        pod_pvcs(spec, namespace, str(name)) if spec.get("volumes") else (),   # pvcs
        claims,                                                 # claims
        any(isinstance(ref, dict) and ref.get("controller") is True for ref in owners)
        if owners else False,                                   # controlled
        refs if gang.source == "upstream" else (),              # claim_refs
        _warnings(annotations, gang, wrong) if annotations or wrong else (),  # warnings
        share,                                                  # gpu
        reserves,                                               # reserves
        kai,                                                    # kai_reservation
        pod_runtime(meta, spec, expected),                      # runtime
    ))


# Alike pods (a gang's, a workload's) have alike labels and annotations: what
# is read of them is made once per distinct set and shared, in memory as in time.
Pairs = tuple[tuple[str, str], ...]
T = TypeVar("T")


def _shared(read: Callable[[tuple[tuple[str, object], ...]], Pairs], raw: Obj) -> Pairs:
    return _cached(read, tuple(raw.items()))


def _cached(read: Callable[..., T], *args: object) -> T:
    """read(*args) through its lru_cache; made anew for values no key can hold
    (only a hand-written file has them: an API server takes strings only)."""
    try:
        return read(*args)
    except TypeError:
        return read.__wrapped__(*args)      # type: ignore[attr-defined]


@functools.lru_cache(maxsize=1 << 16)
def _sorted_labels(items: tuple[tuple[str, object], ...]) -> Pairs:
    return tuple(sorted((str(k), str(v)) for k, v in items))


@functools.lru_cache(maxsize=1 << 16)
def _read_annotations(items: tuple[tuple[str, object], ...]) -> Pairs:
    """The annotations scheduling reads, sorted."""
    return tuple(sorted([(k, str(v)) for k, v in items
                         if k.startswith(_READ_PREFIXES) or k == L.KAI_PREEMPTION_DELAY]))


_READ_PREFIXES = ("gang.scheduling", "scheduling.k8s.io")


def _warnings(annotations: Obj, gang: GangRef, wrong: str | None) -> tuple[str, ...]:
    """The declarations on the pod ignored for their defaults, to tell once."""
    koord = (optional_settings(lambda k: _text(annotations.get(k)))[3]
             if gang.source in ("koordinator", "koord") else ())
    delay = (delay_warnings(_text(annotations.get(L.KAI_PREEMPTION_DELAY)))
             if L.KAI_PREEMPTION_DELAY in annotations else ())
    if not koord and not delay and not wrong:
        return ()
    return (*koord, *delay, *((f"{wrong}; ignored",) if wrong else ()))


def reservation(namespace: str, labels: dict[str, str]) -> tuple[str | None, bool]:
    """The shared device a reservation pod holds (kaisched's, or KAI's own,
    recognised when taking over a cluster KAI ran), and whether it is KAI's."""
    group = labels.get(G.GPU_GROUP)
    if namespace == G.RESERVATION_NAMESPACE and labels.get("app") == G.RESERVATION_APP:
        return group, False
    if namespace == G.KAI_RESERVATION_NAMESPACE and labels.get("app") == G.KAI_RESERVATION_APP:
        return group, True
    return None, False
def _scheduled_false(status: Obj) -> Obj | None:
    """The pod's PodScheduled=False condition, if it has one."""
    return next((c for c in status.get("conditions") or ()
                 if isinstance(c, dict) and c.get("type") == "PodScheduled"
                 and c.get("status") == "False"), None)

_FACT_NAMES = PodFacts._fields
_STATUS, _NODE, _UNSCHEDULABLE, _REASON, _STARTED = (
    _FACT_NAMES.index(n)
    for n in ("status", "node_name", "unschedulable", "unschedulable_reason", "started"))

# What metadata says that no fact of a pod reads (or only its status reads,
# which echoed() reads again): left out of its source digest.
_UNREAD_METADATA = frozenset({"resourceVersion", "managedFields", "generation",
                              "deletionTimestamp", "deletionGracePeriodSeconds"})


def source_digest(pod: Obj) -> bytes | None:
    """A digest of everything pod_facts reads of the pod but its status, its
    node and whether it is being deleted: two versions with one digest differ
    in nothing else scheduling reads. None for a pod whose facts read its
    status further (ResourceClaims from templates) or that cannot be digested."""
    meta, spec = pod.get("metadata"), pod.get("spec")
    if not isinstance(meta, dict) or not isinstance(spec, dict) or spec.get("resourceClaims"):
        return None
    try:
        # Keys in the order they came: an API server sends an object's fields
        # in one order (were it not to, a digest would differ: converted again).
        raw = orjson.dumps(({k: v for k, v in meta.items() if k not in _UNREAD_METADATA},
                            {k: v for k, v in spec.items() if k != "nodeName"}))
    except TypeError:
        return None
    return hashlib.blake2b(raw, digest_size=16).digest()


def echoed(pod: Obj, before: PodFacts) -> PodFacts:
    """The facts of a new version of a pod whose source digest is before's:
    only what a bind, a condition, the kubelet's start or a deletion changes
    is read again (the echo of the scheduler's own writes, converted without
    a conversion)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    node = spec.get("nodeName")
    scheduled_false = _scheduled_false(status)
    values = list(before)
    values[_STATUS], values[_NODE] = task_status(pod), NodeName(node) if node else None
    values[_UNSCHEDULABLE] = scheduled_false.get("message") if scheduled_false else None
    values[_REASON] = scheduled_false.get("reason") if scheduled_false else None
    values[_STARTED] = from_rfc3339(status.get("startTime"))
    return PodFacts._make(values)


def preemption_delay(raw: str | None) -> float | None:
    """KAI's preemption-delay annotation as seconds; None when absent or not a
    duration (ignored, as KAI does, with a warning: delay_warnings)."""
    if raw is None:
        return None
    try:
        return parse_duration(raw)
    except ValueError:
        return None


def delay_warnings(raw: str | None) -> tuple[str, ...]:
    if raw is None or preemption_delay(raw) is not None:
        return ()
    return (f"{L.KAI_PREEMPTION_DELAY} {raw!r} is not a duration (e.g. 5m); ignored",)


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def scheduling_gates(spec: Obj) -> tuple[str, ...]:
    """The names of the pod's scheduling gates (a gate without a name still gates)."""
    gates = spec.get("schedulingGates")
    if not isinstance(gates, list):
        return ()
    return tuple(str(g.get("name") or "(unnamed)") if isinstance(g, dict) else str(g)
                 for g in gates)


def broken_pod(meta: Obj, spec: Obj, problem: str) -> PodFacts:
    """A pod that cannot be read: it waits, saying why, and takes no room
    the scheduler could count (a bound one still shows up on its node)."""
    namespace = str(meta.get("namespace") or "default")
    node = spec.get("nodeName") if isinstance(spec.get("nodeName"), str) else None
    key = pod_key(namespace, str(meta.get("name", "")))
    return PodFacts(
        key=key, uid=str(meta.get("uid", "")), job=JobKey(key),
        scheduler_name=scheduler_name(spec),
        status=TaskStatus.BOUND if node else TaskStatus.PENDING,
        node_name=NodeName(node) if node else None, resreq=Resource.of({PODS: 1}),
        priority=None, priority_class="", queue_label=None, subgroup=None,
        gang=GangRef("none"), annotations=(), creation=0.0, placement=Placement(),
        critical=False, unschedulable=None, problem=problem)


def priority_class(obj: Obj) -> tuple[str, int, bool, bool]:
    """A PriorityClass: (name, value, globalDefault, preemptionPolicy is Never),
    what pods' priorityClassName resolves to."""
    value = obj.get("value")
    return (metadata(obj).get("name", ""), value if isinstance(value, int) else 0,
            bool(obj.get("globalDefault")), obj.get("preemptionPolicy") == "Never")
