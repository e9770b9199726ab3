"""Raw Kubernetes objects (plain dicts) -> model values. The only module that
knows field paths; everything past it is typed. Bad fields become problems
(strings for the user), never exceptions."""
from __future__ import annotations

from typing import Any

import attrs
import orjson

from kaisched.api import labels as L
from kaisched.api.clock import from_rfc3339
from kaisched.api.job import Condition, GangSpec, PodGroupStatus, SubGroup, TopologyRule
from kaisched.api.node import NodeSpec
from kaisched.api.quantity import parse_duration, parse_quantity
from kaisched.api.placement import (
    NO_RULES, HostPort, LabelSelector, Placement, PodAffinityTerm, PodMatcher, PodRules, Requirement,
    SelectorTerm, SpreadConstraint, Taint, Toleration, WeightedPodTerm,
)
from kaisched.api.queue import Amounts, QueueInfo, QueueStatus
from kaisched.api.queue_status import canonical
from kaisched.api.resource import PODS, Resource
from kaisched.api.types import (
    GangMode, JobKey, NodeName, PodGroupPhase, PodKey, QueueName, TaskStatus, job_key, pod_key,
)

Obj = dict[str, Any]
_CRITICAL_CLASSES = ("system-cluster-critical", "system-node-critical")
# Owners whose pods form gangs: such a pod waits for the PodGrouper's PodGroup
# rather than being scheduled alone (which would break the gang).
GANG_OWNER_GROUPS = frozenset({"kubeflow.org", "jobset.x-k8s.io", "ray.io", "batch"})
DEFAULT_MAX_PODS = 110
# KAI's topology annotations on a PodGroup: node labels naming a topology level.
KAI_TOPOLOGY_REQUIRED = "kai.scheduler/topology-required-placement"
KAI_TOPOLOGY_PREFERRED = "kai.scheduler/topology-preferred-placement"


@attrs.frozen(slots=True)
class GangRef:
    """Which gang a pod names, and how."""

    source: str            # kaisched | x-k8s | upstream | koordinator | volcano | owner | none
    name: str = ""
    replica: str = ""      # upstream workloadRef.podGroupReplicaKey: one gang per replica


@attrs.frozen(slots=True)
class PodFacts:
    """What scheduling reads of a pod, converted once per pod event."""

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
    labels: tuple[tuple[str, str], ...] = ()

    def annotation(self, name: str) -> str | None:
        return next((v for k, v in self.annotations if k == name), None)


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _resources(raw: Any, where: str, problems: list[str]) -> Resource:
    if not raw:
        return Resource()
    if not isinstance(raw, dict):
        problems.append(f"{where}: expected a map of quantities")
        return Resource()
    try:
        res = Resource.from_quantities(raw)
    except ValueError as exc:
        problems.append(f"{where}: {exc}")
        return Resource()
    # A negative amount would hand room back to the node it lands on.
    negative = next((name for name, value in res.items if value < 0), None)
    if negative is not None:
        problems.append(f"{where}: {negative}: negative quantity {raw[negative]!r}")
        return Resource()
    return res


def _declared(res: Resource) -> Resource | None:
    """None for an absent (or empty) minResources: there is nothing to check."""
    return None if res.is_empty() else res


def pod_request(spec: Obj, problems: list[str]) -> Resource:
    """As kube-scheduler: max(sum of containers + sidecars, the largest init
    step) + overhead, and one pod slot."""
    def req(c: Obj, where: str) -> Resource:
        # As the API server defaults it: a limit with no request is the request.
        resources = c.get("resources") or {}
        limits, requests = resources.get("limits"), resources.get("requests")
        if isinstance(limits, dict) and (requests is None or isinstance(requests, dict)):
            requests = {**limits, **(requests or {})}
        return _resources(requests, where, problems)

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
    total = _max(total + sidecars, init_peak)
    total = total + _resources(spec.get("overhead"), "overhead", problems)
    return total + Resource.of({PODS: 1})


def _max(a: Resource, b: Resource) -> Resource:
    names = set(a.names()) | set(b.names())
    return Resource.of({n: max(a.get(n), b.get(n)) for n in names})


def task_status(pod: Obj) -> TaskStatus | None:
    spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, _meta(pod)
    phase = status.get("phase") or "Pending"
    node = spec.get("nodeName")
    if phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if phase == "Failed":
        return TaskStatus.FAILED
    if meta.get("deletionTimestamp"):
        return TaskStatus.RELEASING if node else None
    if not node:
        return TaskStatus.PENDING
    if phase == "Running":
        return TaskStatus.RUNNING
    if phase == "Pending":
        return TaskStatus.BOUND
    return TaskStatus.UNKNOWN


def _requirements(raw: Any) -> tuple[Requirement, ...]:
    return tuple(Requirement(str(r.get("key", "")), str(r.get("operator", "")),
                             tuple(str(v) for v in r.get("values") or ()))
                 for r in raw or () if isinstance(r, dict))


def placement(spec: Obj, namespace: str = "default", labels: Obj | None = None) -> Placement:
    selector = spec.get("nodeSelector") or {}
    affinity = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = tuple(SelectorTerm(_requirements(t.get("matchExpressions")),
                               _requirements(t.get("matchFields")))
                  for t in affinity.get("nodeSelectorTerms") or () if isinstance(t, dict))
    tolerations = tuple(Toleration(str(t.get("key") or ""), str(t.get("operator") or "Equal"),
                                   str(t.get("value") or ""), str(t.get("effect") or ""))
                        for t in spec.get("tolerations") or () if isinstance(t, dict))
    return Placement(tuple(sorted((str(k), str(v)) for k, v in selector.items())),
                     terms, tolerations, preferred_node_affinity(spec),
                     pod_rules(spec, namespace, labels or {}))


def gang_ref(meta: Obj) -> GangRef:
    annotations, labels = meta.get("annotations") or {}, meta.get("labels") or {}
    if annotations.get(L.POD_GROUP_ANNOTATION):
        return GangRef("kaisched", annotations[L.POD_GROUP_ANNOTATION])
    if labels.get(L.XK8S_POD_GROUP_LABEL):
        return GangRef("x-k8s", labels[L.XK8S_POD_GROUP_LABEL])
    if annotations.get(L.KOORD_NAME) or labels.get(L.KOORD_POD_GROUP_LABEL):
        return GangRef("koordinator", annotations.get(L.KOORD_NAME) or labels[L.KOORD_POD_GROUP_LABEL])
    if annotations.get(L.VOLCANO_GROUP_NAME):
        return GangRef("volcano", annotations[L.VOLCANO_GROUP_NAME])
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller"):
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            if group in GANG_OWNER_GROUPS:
                return GangRef("owner", f"{ref.get('kind')} {ref.get('name')}")
    return GangRef("none")


def gang_job(key: PodKey, namespace: str, gang: GangRef) -> JobKey:
    if gang.source in ("none", "owner"):
        return JobKey(key)         # a gang of one (or one waiting for its PodGroup)
    if gang.replica:
        return job_key(namespace, f"{gang.name}[{gang.replica}]")
    return job_key(namespace, gang.name)


def pod_facts(pod: Obj) -> PodFacts:
    meta, spec = _meta(pod), pod.get("spec") or {}
    status = pod.get("status") or {}
    problems: list[str] = []
    resreq = pod_request(spec, problems)
    namespace = meta.get("namespace") or "default"
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    unschedulable = next((c.get("message") for c in status.get("conditions") or ()
                          if c.get("type") == "PodScheduled" and c.get("status") == "False"), None)
    pc = str(spec.get("priorityClassName") or "")
    priority = spec.get("priority")
    key = pod_key(namespace, meta.get("name", ""))
    # A gang named in the pod's spec (the upstream API) wins over annotations,
    # which the PodGrouper may have added to a pod that already had one.
    gang = upstream_gang_ref(spec) or gang_ref(meta)
    return PodFacts(
        key=key,
        uid=str(meta.get("uid", "")),
        job=gang_job(key, namespace, gang),
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        status=task_status(pod),
        node_name=NodeName(spec["nodeName"]) if spec.get("nodeName") else None,
        resreq=resreq,
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else None,
        priority_class=pc,
        queue_label=labels.get(L.QUEUE_LABEL),
        subgroup=labels.get(L.SUBGROUP_LABEL),
        gang=gang,
        annotations=tuple(sorted((k, str(v)) for k, v in annotations.items()
                                 if k.startswith(("gang.scheduling", "scheduling.k8s.io")))),
        creation=from_rfc3339(meta.get("creationTimestamp")) or 0.0,
        placement=placement(spec, namespace, labels),
        critical=namespace == "kube-system" or pc in _CRITICAL_CLASSES,
        unschedulable=unschedulable,
        problem="; ".join(problems) or None,
        labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
    )


def broken_pod(meta: Obj, spec: Obj, problem: str) -> PodFacts:
    """A pod that cannot be read: it waits, saying why, and takes no room
    the scheduler could count (a bound one still shows up on its node)."""
    namespace = str(meta.get("namespace") or "default")
    node = spec.get("nodeName") if isinstance(spec.get("nodeName"), str) else None
    key = pod_key(namespace, str(meta.get("name", "")))
    return PodFacts(
        key=key, uid=str(meta.get("uid", "")), job=JobKey(key),
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        status=TaskStatus.BOUND if node else TaskStatus.PENDING,
        node_name=NodeName(node) if node else None, resreq=Resource.of({PODS: 1}),
        priority=None, priority_class="", queue_label=None, subgroup=None,
        gang=GangRef("none"), annotations=(), creation=0.0, placement=Placement(),
        critical=False, unschedulable=None, problem=problem)


def node_spec(node: Obj) -> NodeSpec:
    return node_spec_and_problem(node)[0]


def node_spec_and_problem(node: Obj) -> tuple[NodeSpec, str | None]:
    """The node, and why no pod can be placed on it when it cannot be used at
    all (no allocatable reported, or one that does not parse): such a node is
    no candidate, and the cache says so once, as a warning Event."""
    meta, spec, status = _meta(node), node.get("spec") or {}, node.get("status") or {}
    problems: list[str] = []
    raw_alloc = status.get("allocatable") or status.get("capacity") or {}
    if not raw_alloc:
        # Not yet reported by a kubelet (or written by hand without it).
        problems.append("status.allocatable: none reported (nor status.capacity)")
    alloc = _resources(raw_alloc, "status.allocatable", problems)
    if not isinstance(raw_alloc, dict) or PODS not in raw_alloc:
        alloc = alloc + Resource.of({PODS: DEFAULT_MAX_PODS})   # hand-written nodes omit it
    conditions = status.get("conditions")
    # A node written by hand without conditions is taken as Ready.
    ready = not conditions or any(c.get("type") == "Ready" and c.get("status") == "True"
                                  for c in conditions)
    taints = tuple(Taint(str(t.get("key", "")), str(t.get("value") or ""),
                         str(t.get("effect") or "NoSchedule"))
                   for t in spec.get("taints") or () if isinstance(t, dict))
    node_info = NodeSpec(NodeName(meta.get("name", "")), alloc, dict(meta.get("labels") or {}),
                         taints, ready and not problems, bool(spec.get("unschedulable")))
    return node_info, "; ".join(problems) or None


def priority_class(obj: Obj) -> tuple[str, int, bool]:
    value = obj.get("value")
    return (_meta(obj).get("name", ""), value if isinstance(value, int) else 0,
            bool(obj.get("globalDefault")))


def _int(value: Any, where: str, minimum: int, problems: list[str]) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        problems.append(f"{where} must be an integer >= {minimum}, got {value!r}")
        return None
    try:
        number = int(value)
    except ValueError:
        problems.append(f"{where} must be an integer >= {minimum}, got {value!r}")
        return None
    if number < minimum:
        problems.append(f"{where} must be an integer >= {minimum}, got {number}")
        return None
    return number


def _seconds(value: Any, where: str, problems: list[str]) -> float | None:
    if value is None:
        return None
    got = _int(value, where, 1, problems)
    return float(got) if got is not None else None


def podgroup(obj: Obj) -> tuple[GangSpec, PodGroupStatus, str | None]:
    """A scheduling.kaisched.io PodGroup: its spec, status and any problem."""
    spec = obj.get("spec") or {}
    problems: list[str] = []
    min_member = _int(spec.get("minMember", 1), "spec.minMember", 1, problems) or 1
    mode = spec.get("mode", "Strict")
    if mode not in ("Strict", "NonStrict"):
        problems.append(f"spec.mode must be Strict or NonStrict, got {mode!r}")
        mode = "Strict"
    subgroups = []
    for i, sg in enumerate(spec.get("subGroups") or ()):
        if not isinstance(sg, dict) or not sg.get("name"):
            problems.append(f"spec.subGroups[{i}] needs a name")
            continue
        sub_min = _int(sg.get("minMember", 0), f"spec.subGroups[{i}].minMember", 0, problems)
        subgroups.append(SubGroup(str(sg["name"]), sub_min or 0, topology_rule(sg.get("topology"))))
    gang_group = tuple(JobKey(str(g)) if "/" in str(g) else job_key(_meta(obj).get("namespace") or "default", str(g))
                       for g in spec.get("gangGroup") or ())
    preemptible = spec.get("preemptible", True)
    gang = GangSpec(
        min_member=min_member,
        queue=QueueName(str(spec.get("queue") or "")),
        priority_class=spec.get("priorityClassName") or None,
        min_resources=_declared(_resources(spec.get("minResources"), "spec.minResources", problems)),
        schedule_timeout=_seconds(spec.get("scheduleTimeoutSeconds"), "spec.scheduleTimeoutSeconds", problems),
        mode=GangMode(mode),
        gang_group=gang_group,
        subgroups=tuple(subgroups),
        preemptible=preemptible if isinstance(preemptible, bool) else True,
        stale_grace=_seconds(spec.get("staleGangGracePeriodSeconds"), "spec.staleGangGracePeriodSeconds", problems),
        wait_time=_seconds(spec.get("waitTimeSeconds"), "spec.waitTimeSeconds", problems),
        starvation_threshold=_seconds(spec.get("starvationThresholdSeconds"),
                                      "spec.starvationThresholdSeconds", problems),
        declared=True,
        generation=int(_meta(obj).get("generation") or 0),
        topology=topology_rule(spec.get("topology"), _meta(obj).get("annotations")),
    )
    return gang, podgroup_status(obj.get("status") or {}), "; ".join(problems) or None


def xk8s_podgroup(obj: Obj) -> tuple[GangSpec, PodGroupStatus, str | None]:
    """A scheduler-plugins PodGroup: minMember, minResources, scheduleTimeoutSeconds."""
    spec = obj.get("spec") or {}
    problems: list[str] = []
    gang = GangSpec(
        min_member=_int(spec.get("minMember", 1), "spec.minMember", 1, problems) or 1,
        min_resources=_declared(_resources(spec.get("minResources"), "spec.minResources", problems)),
        schedule_timeout=_seconds(spec.get("scheduleTimeoutSeconds"), "spec.scheduleTimeoutSeconds", problems),
        declared=False,
    )
    return gang, PodGroupStatus(), "; ".join(problems) or None


def annotated_gang(facts: PodFacts) -> tuple[GangSpec, str | None]:
    """A gang declared by Koordinator or Volcano annotations on its pods."""
    problems: list[str] = []
    if facts.gang.source == "koordinator":
        raw = facts.annotation(L.KOORD_MIN_AVAILABLE) or "1"
        mode = facts.annotation(L.KOORD_MODE) or "Strict"
        groups = facts.annotation(L.KOORD_GROUPS)
        group_keys: tuple[JobKey, ...] = ()
        if groups:
            try:
                group_keys = tuple(JobKey(str(g)) for g in orjson.loads(groups))
            except (orjson.JSONDecodeError, TypeError):
                problems.append(f"{L.KOORD_GROUPS} must be a JSON list of namespace/name")
        wait = None
        if facts.annotation(L.KOORD_WAITING_TIME):
            try:
                wait = parse_duration(facts.annotation(L.KOORD_WAITING_TIME))
            except ValueError as exc:
                problems.append(f"{L.KOORD_WAITING_TIME}: {exc}")
        gang = GangSpec(min_member=_int(raw, L.KOORD_MIN_AVAILABLE, 1, problems) or 1,
                        mode=GangMode.NON_STRICT if mode == "NonStrict" else GangMode.STRICT,
                        gang_group=group_keys, wait_time=wait)
    else:
        raw = facts.annotation(L.VOLCANO_GROUP_POD_NUM) or "1"
        gang = GangSpec(min_member=_int(raw, L.VOLCANO_GROUP_POD_NUM, 1, problems) or 1)
    return gang, "; ".join(problems) or None


def podgroup_status(status: Obj) -> PodGroupStatus:
    phase = status.get("phase") or "Pending"
    try:
        parsed = PodGroupPhase(phase)
    except ValueError:
        parsed = PodGroupPhase.UNKNOWN
    conditions = tuple(Condition(str(c.get("type", "")), str(c.get("status", "")),
                                 str(c.get("reason") or ""), str(c.get("message") or ""),
                                 c.get("lastTransitionTime"))
                       for c in status.get("conditions") or () if isinstance(c, dict))
    counts = {k: status.get(k) if isinstance(status.get(k), int) else 0
              for k in ("scheduled", "running", "succeeded", "failed", "pending")}
    observed = status.get("observedGeneration")
    return PodGroupStatus(parsed, conditions, last_schedule_time=status.get("lastScheduleTime"),
                          stale_since=status.get("staleSince"),
                          unschedulable_since=status.get("unschedulableSince"),
                          observed_generation=observed if isinstance(observed, int) else 0,
                          **counts)


def status_dict(status: PodGroupStatus) -> Obj:
    """The PodGroup status as written back (a merge patch; None clears)."""
    return {
        "phase": status.phase.value,
        "conditions": [{k: v for k, v in {
            "type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
            "lastTransitionTime": c.last_transition_time}.items() if v is not None}
            for c in status.conditions],
        "scheduled": status.scheduled, "running": status.running,
        "succeeded": status.succeeded, "failed": status.failed, "pending": status.pending,
        "lastScheduleTime": status.last_schedule_time, "staleSince": status.stale_since,
        "unschedulableSince": status.unschedulable_since,
        "observedGeneration": status.observed_generation or None,
    }


def queue(obj: Obj) -> QueueInfo:
    meta, spec = _meta(obj), obj.get("spec") or {}
    problems: list[str] = []
    quota: dict[str, Any] = {}
    limits: list[tuple[str, float]] = []
    weights: list[tuple[str, float]] = []
    resources = spec.get("resources") or {}
    if not isinstance(resources, dict):
        problems.append("spec.resources must be a map of resource name to {quota, limit, overQuotaWeight}")
        resources = {}
    for name, entry in sorted(resources.items()):
        if not isinstance(entry, dict):
            problems.append(f"spec.resources.{name} must be a map")
            continue
        if "quota" in entry:
            quota[name] = entry["quota"]
        if "limit" in entry:
            got = _resources({name: entry["limit"]}, f"spec.resources.{name}.limit", problems)
            limits.append((name, got.get(name)))
        if "overQuotaWeight" in entry:
            weight = entry["overQuotaWeight"]
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
                problems.append(f"spec.resources.{name}.overQuotaWeight must be a number >= 0")
            else:
                weights.append((name, float(weight)))
    priority = spec.get("priority", 100)
    return QueueInfo(
        name=QueueName(meta.get("name", "")),
        parent=QueueName(spec["parentQueue"]) if spec.get("parentQueue") else None,
        priority=priority if isinstance(priority, int) else 100,
        quota=_resources(quota, "spec.resources.*.quota", problems),
        limits=tuple(limits), weights=tuple(weights),
        creation=from_rfc3339(meta.get("creationTimestamp")) or 0.0,
        problem="; ".join(problems) or None,
        declared=True,
        status=queue_status(obj.get("status")),
    )


# Queue.status field -> QueueStatus attribute, for the amount maps.
_QUEUE_AMOUNTS = (("allocated", "allocated"), ("fairShare", "fair_share"), ("quota", "quota"),
                  ("limit", "limit"))


def queue_status(raw: Any) -> QueueStatus | None:
    """The Queue status kaisched wrote last; None when there is none or it is
    not one kaisched could have written (it is then written again)."""
    if not isinstance(raw, dict) or not raw:
        return None
    fields: dict[str, Any] = {}
    try:
        for key, attr in _QUEUE_AMOUNTS:
            entries = raw.get(key) or {}
            values = []
            for name, quantity in entries.items():
                amount = parse_quantity(quantity) * (1000 if name == "cpu" else 1)
                values.append((str(name), canonical(str(name), float(amount))))
            fields[attr] = tuple(sorted(values))
    except (AttributeError, ValueError):
        return None
    for key, attr in (("runningJobs", "running_jobs"), ("pendingJobs", "pending_jobs")):
        count = raw.get(key, 0)
        if isinstance(count, bool) or not isinstance(count, int):
            return None
        fields[attr] = count
    return QueueStatus(**fields)


def quantity_text(name: str, value: float) -> str:
    """An amount as a Kubernetes quantity: "4", "2500m", "16Gi", "1536Mi"."""
    if name == "cpu":                      # held in millicores
        milli = round(value)
        return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
    amount = canonical(name, value)
    if amount != int(amount):
        return f"{round(amount * 1000)}m"
    whole = int(amount)
    for suffix, unit in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if name == "memory" and whole and whole % unit == 0:
            return f"{whole // unit}{suffix}"
    return str(whole)


def queue_status_dict(status: QueueStatus, previous: QueueStatus | None) -> Obj:
    """The Queue status as written back (a merge patch): amounts the previous
    status had and this one has not are cleared."""
    def amounts(new: Amounts, old: Amounts) -> Obj:
        out: Obj = {name: None for name, _ in old}
        out.update({name: quantity_text(name, value) for name, value in new})
        return out
    out: Obj = {key: amounts(getattr(status, attr), getattr(previous, attr) if previous else ())
                for key, attr in _QUEUE_AMOUNTS}
    out["runningJobs"] = status.running_jobs
    out["pendingJobs"] = status.pending_jobs
    return out


# -- placement rules over other pods, topology, the upstream gang API ---------------------

def _selector(raw: Any, labels: Obj | None = None, match_keys: Any = (),
              mismatch_keys: Any = ()) -> LabelSelector | None:
    """A LabelSelector; matchLabelKeys / mismatchLabelKeys are folded in from
    the pod's own labels, as the API server does."""
    if not isinstance(raw, dict):
        return None
    pairs = {str(k): str(v) for k, v in (raw.get("matchLabels") or {}).items()}
    exprs = list(_requirements(raw.get("matchExpressions")))
    own = labels or {}
    for key in match_keys or ():
        if key in own:
            exprs.append(Requirement(str(key), "In", (str(own[key]),)))
    for key in mismatch_keys or ():
        if key in own:
            exprs.append(Requirement(str(key), "NotIn", (str(own[key]),)))
    return LabelSelector(tuple(sorted(pairs.items())), tuple(exprs))


def _pod_term(raw: Obj, namespace: str, labels: Obj) -> PodAffinityTerm:
    ns_sel = raw.get("namespaceSelector")
    namespaces = tuple(sorted(str(n) for n in raw.get("namespaces") or ()))
    if not namespaces and ns_sel is None:
        namespaces = (namespace,)      # neither given: the pod's own namespace
    matcher = PodMatcher(_selector(raw.get("labelSelector"), labels, raw.get("matchLabelKeys"),
                                   raw.get("mismatchLabelKeys")),
                         namespaces, _selector(ns_sel))
    return PodAffinityTerm(matcher, str(raw.get("topologyKey") or ""))


def _pod_terms(raw: Any, namespace: str, labels: Obj) -> tuple[PodAffinityTerm, ...]:
    return tuple(_pod_term(t, namespace, labels) for t in raw or () if isinstance(t, dict))


def _weighted(raw: Any, namespace: str, labels: Obj) -> tuple[WeightedPodTerm, ...]:
    return tuple(WeightedPodTerm(int(w.get("weight") or 0),
                                 _pod_term(w.get("podAffinityTerm") or {}, namespace, labels))
                 for w in raw or () if isinstance(w, dict))


def pod_rules(spec: Obj, namespace: str, labels: Obj) -> PodRules:
    """podAffinity, podAntiAffinity, topologySpreadConstraints and host ports."""
    affinity = spec.get("affinity") or {}
    aff, anti = affinity.get("podAffinity") or {}, affinity.get("podAntiAffinity") or {}
    spread = []
    for c in spec.get("topologySpreadConstraints") or ():
        if not isinstance(c, dict):
            continue
        matcher = PodMatcher(_selector(c.get("labelSelector"), labels, c.get("matchLabelKeys")),
                             (namespace,))
        spread.append(SpreadConstraint(
            max_skew=max(int(c.get("maxSkew") or 1), 1), topology_key=str(c.get("topologyKey") or ""),
            matcher=matcher, hard=c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule",
            min_domains=max(int(c.get("minDomains") or 1), 1),
            honor_node_affinity=c.get("nodeAffinityPolicy", "Honor") != "Ignore",
            honor_taints=c.get("nodeTaintsPolicy", "Ignore") == "Honor"))
    ports = []
    for c in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        for p in (c.get("ports") or ()) if isinstance(c, dict) else ():
            if isinstance(p, dict) and p.get("hostPort"):
                ports.append(HostPort(int(p["hostPort"]), str(p.get("protocol") or "TCP"),
                                      str(p.get("hostIP") or "")))
    if not (aff or anti or spread or ports):
        return NO_RULES
    return PodRules(
        affinity=_pod_terms(aff.get("requiredDuringSchedulingIgnoredDuringExecution"), namespace, labels),
        anti_affinity=_pod_terms(anti.get("requiredDuringSchedulingIgnoredDuringExecution"),
                                 namespace, labels),
        preferred_affinity=_weighted(aff.get("preferredDuringSchedulingIgnoredDuringExecution"),
                                     namespace, labels),
        preferred_anti_affinity=_weighted(anti.get("preferredDuringSchedulingIgnoredDuringExecution"),
                                          namespace, labels),
        spread=tuple(spread), host_ports=tuple(sorted(set(ports), key=attrs.astuple)))


def preferred_node_affinity(spec: Obj) -> tuple[tuple[int, SelectorTerm], ...]:
    node_aff = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    return tuple((int(p.get("weight") or 0),
                  SelectorTerm(_requirements((p.get("preference") or {}).get("matchExpressions")),
                               _requirements((p.get("preference") or {}).get("matchFields"))))
                 for p in node_aff.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
                 if isinstance(p, dict))


def topology_rule(raw: Any, annotations: Obj | None = None) -> TopologyRule:
    """spec.topology {required, preferred}; KAI's placement annotations fill what it leaves out."""
    raw = raw if isinstance(raw, dict) else {}
    notes = annotations or {}
    required = raw.get("required") or notes.get(KAI_TOPOLOGY_REQUIRED)
    preferred = raw.get("preferred") or notes.get(KAI_TOPOLOGY_PREFERRED)
    return TopologyRule(str(required) if required else None, str(preferred) if preferred else None)


def upstream_gang_ref(spec: Obj) -> GangRef | None:
    """The Workload API: spec.schedulingGroup.podGroupName, or spec.workloadRef
    {podGroup, podGroupReplicaKey} (each replica is a gang of its own)."""
    group = spec.get("schedulingGroup")
    if isinstance(group, dict) and group.get("podGroupName"):
        return GangRef("upstream", str(group["podGroupName"]))
    ref = spec.get("workloadRef")
    if isinstance(ref, dict) and (ref.get("podGroup") or ref.get("name")):
        return GangRef("upstream", str(ref.get("podGroup") or ref.get("name")),
                       str(ref.get("podGroupReplicaKey") or ""))
    return None


def upstream_podgroup(obj: Obj) -> tuple[GangSpec, PodGroupStatus, str | None]:
    """A scheduling.k8s.io PodGroup: spec.schedulingPolicy.gang.minCount (a
    basic policy, or none, is a gang of one)."""
    policy = (obj.get("spec") or {}).get("schedulingPolicy") or {}
    problems: list[str] = []
    gang = policy.get("gang") if isinstance(policy, dict) else None
    min_count = 1
    if isinstance(gang, dict):
        min_count = _int(gang.get("minCount", 1), "spec.schedulingPolicy.gang.minCount", 1,
                         problems) or 1
    return GangSpec(min_member=min_count, declared=False), PodGroupStatus(), "; ".join(problems) or None


def namespace_labels(obj: Obj) -> dict[str, str]:
    return {str(k): str(v) for k, v in (_meta(obj).get("labels") or {}).items()}
