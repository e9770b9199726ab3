"""The scenario a simulation runs: node pools, queues, priority classes and a
workload of jobs, read from YAML and checked key by key.

Every problem is one ScenarioError whose message names the file, the path of
the key and, for a job, the job: `demo.yaml: jobs[2] (bert).duration: not a
duration: 'soon'`. Unknown keys are refused, as in the scheduler config.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import yaml

from kaisched.api.gpuask import GPU_DEVICES, GPU_FRACTION, GPU_MEMORY, MEMORY_LABEL
from kaisched.api.resource import GPU, PODS
from kaisched.api.workloadkinds import HEAD, LAUNCHER, LEADER, MASTER, WORKER
from kaisched.cluster.files import LOADER, not_a_mapping, read_text, yaml_problem
from kaisched.errors import InputError
from kaisched.sim.draspecs import claim_specs, device_specs
from kaisched.sim.fields import (
    ALIASES,
    ALWAYS_OFFERED,
    FieldError,
    checked_amount,
    dns,
    duration,
    fields,
    integer,
    items,
    labels,
    listed,
    number,
    resources,
    show,
    text,
    unique,
)
from kaisched.sim.generator import generate
from kaisched.sim.specs import (
    ELASTIC_KINDS,
    ELASTIC_LEADS,
    GANG_APIS,
    MAX_JOB_NAME,
    ROLES,
    STARTUP_POLICIES,
    WORKLOADS,
    Base,
    JobKind,
    JobSpec,
    NodeGroup,
    NodePool,
    QueueSpec,
    Remaining,
    RoleSpec,
    Scenario,
    StorageClassSpec,
    VolumeSpec,
)

__all__ = ["MAX_OBJECTS", "Base", "ELASTIC_KINDS", "JobKind", "JobSpec", "NodePool", "QueueSpec", "RoleSpec", "ROLES",
           "Scenario", "ScenarioError", "load_scenario", "parse_scenario"]

_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# Roles that coordinate the others, in any simulated kind: listed first.
_LEADING = frozenset(r for w in WORKLOADS.values() for r in w.leading)
# The most nodes, and generated jobs, a scenario may ask for (--max-objects
# raises it): a typo of a zero or two should not eat the machine's memory.
MAX_OBJECTS = 20_000
_MANIFEST = ("this is a Kubernetes manifest (objects with apiVersion and kind), not a "
             "simulate scenario: run it with `kaisched replay`")


class ScenarioError(InputError):
    """A scenario that cannot be run; the message names the key (and the job)."""


# -- loading -------------------------------------------------------------------------------

_TOP = ("name", "description", "until", "nodePools", "queues", "priorityClasses", "jobs",
        "generate", "storageClasses", "remaining", "nodeGroups", "autoscaler")
_DURATION = ("median", "sigma", "min", "max")
_POOL = ("name", "count", "capacity", "labels", "taints", "devices")
_GROUP = ("name", "template", "min", "max", "provisioningDelay", "costPerHour")
_TEMPLATE = ("capacity", "labels", "taints")
_AUTOSCALER = ("scaleDownUnneededTime",)
_QUEUE = ("name", "parent", "priority", "resources")
_QUEUE_RESOURCE = ("quota", "limit", "overQuotaWeight")
_JOB = ("name", "kind", "queue", "namespace", "arrival", "duration", "runtimeLimit", "roles",
        "priorityClass", "minAvailable", "elastic", "nodeSelector", "tolerations", "startupPolicy",
        "gangApi")
_ROLE = ("replicas", "requests", "volumes", "claims", "gpuFraction", "gpuMemory", "gpuDevices")
_STORAGE_CLASS = ("name", "provisioner", "bindingMode", "allowedTopologies", "provisioningDelay",
                  "failure")
_VOLUME = ("name", "storageClass", "size")
_TOLERATION = ("key", "operator", "value", "effect")
# The API server's range of a pod's activeDeadlineSeconds, which a runtimeLimit becomes.
_MAX_DEADLINE = 2**32 - 1


def load_scenario(path: str | Path, seed: int | None = None, base: Base | None = None,
                  max_objects: int = MAX_OBJECTS) -> Scenario:
    return parse_scenario(read_text(path), str(path), seed, base, max_objects)


def parse_scenario(text: str, source: str = "scenario", seed: int | None = None,
                   base: Base | None = None, max_objects: int = MAX_OBJECTS) -> Scenario:
    """A checked Scenario; seed overrides generate.seed. With a base (a
    snapshot's cluster) the scenario adds to it: nodes, queues (one named as
    the snapshot's replaces it), priority classes and jobs, all optional."""
    try:
        data = yaml.load(text, Loader=LOADER)
    except yaml.YAMLError as exc:
        if _several_documents(text):
            raise ScenarioError(f"{source}: {_MANIFEST}") from None
        raise ScenarioError(f"{source}: {yaml_problem(exc)}") from None
    try:
        return _scenario(data, source, seed, base, max_objects)
    except FieldError as exc:
        raise ScenarioError(f"{source}: {exc}") from None


def base_scenario(base: Base) -> Scenario:
    """The snapshot's cluster alone: no nodes, queues or jobs added."""
    return Scenario(name=base.name, description="", node_pools=(), queues=base.queues,
                    priority_classes=base.priority_classes, jobs=(), source=base.name,
                    base_pools=base.pools)


def _scenario(data: Any, source: str, seed: int | None, base: Base | None = None,
              max_objects: int = MAX_OBJECTS) -> Scenario:
    if data is None and base is None:
        raise FieldError("empty scenario (expected nodePools, queues and jobs or generate)")
    if isinstance(data, dict) and "kind" in data and "apiVersion" in data:
        raise FieldError(_MANIFEST)
    if data is not None and not isinstance(data, dict):
        raise FieldError(not_a_mapping(data, " of nodePools, queues, jobs, ..."))
    if base is None and isinstance(data, dict) and not {"nodePools", "nodeGroups"} & set(data) and (
            "jobs" in data or "generate" in data):
        raise FieldError("nodePools: required; a scenario of jobs alone adds them to a "
                         "snapshot's cluster: run it with --from-snapshot FILE")
    top = fields(data if data is not None else {}, "", _TOP,
                 () if base or "nodeGroups" in (data or {}) else ("nodePools",))
    pools = tuple(_pool(p, f"nodePools[{i}]") for i, p in enumerate(items(top, "nodePools", "")))
    groups = tuple(_group(g, f"nodeGroups[{i}]") for i, g in enumerate(items(top, "nodeGroups", "")))
    if not pools and not groups and base is None:
        raise FieldError("nodePools: at least one pool is needed (or a node group)")
    unique([p.name for p in pools] + [g.name for g in groups], "nodePools and nodeGroups", "pool")
    if sum(p.count for p in pools) > max_objects:
        raise FieldError(f"nodePools: {sum(p.count for p in pools)} nodes in all, more than the "
                         f"cap of {max_objects} (--max-objects raises it)")
    own = tuple(_queue(q, f"queues[{i}]") for i, q in enumerate(items(top, "queues", "")))
    unique([q.name for q in own], "queues", "queue")
    replaced = {q.name for q in own}
    queues = tuple(q for q in (base.queues if base else ()) if q.name not in replaced) + own
    names = {q.name for q in queues} | {"default"}
    for i, q in enumerate(own):
        if q.parent is not None and q.parent not in names:
            raise FieldError(f"queues[{i}] ({q.name}).parent: no queue named {q.parent!r}")
    _refuse_cycles(queues, own)
    classes = tuple(sorted({**dict(base.priority_classes if base else ()),
                            **dict(_priority_classes(top.get("priorityClasses")))}.items()))
    all_pools = (base.pools if base else ()) + pools
    storage = tuple(_storage_class(c, f"storageClasses[{i}]")
                    for i, c in enumerate(items(top, "storageClasses", "")))
    unique([c.name for c in storage], "storageClasses", "storage class")
    jobs = [_job(j, f"jobs[{i}]") for i, j in enumerate(items(top, "jobs", ""))]
    used_seed = None
    if top.get("generate") is not None:
        generated, used_seed = generate(top["generate"], "generate", seed,
                                        [q.name for q in queues], dict(classes), all_pools,
                                        max_objects)
        jobs.extend(generated)
    if not jobs and base is None:
        raise FieldError("jobs: no jobs (list some, or add a generate: block)")
    for job in jobs:
        if base is not None and (job.namespace, job.name) in base.jobs:
            raise FieldError(f"{job.where}.name: the snapshot has a job {job.namespace}/{job.name} "
                             "already; give this one another name")
    scenario = Scenario(
        name=text(top.get("name", Path(source).stem), "name"),
        description=text(top.get("description", ""), "description"),
        node_pools=pools, queues=queues, priority_classes=classes,
        jobs=tuple(sorted(jobs, key=lambda j: (j.arrival, j.name))),
        until=duration(top["until"], "until") if top.get("until") is not None else None,
        seed=used_seed, source=source, storage_classes=storage,
        base_pools=base.pools if base else (),
        remaining=_remaining(top.get("remaining")) if top.get("remaining") is not None else None,
        node_groups=groups, scale_down_after=_scale_down_after(top.get("autoscaler")))
    _check_offered(scenario, own)
    _check_jobs(scenario, names, dict(classes))
    _check_volumes(scenario)
    return scenario


def _several_documents(text: str) -> bool:
    """Multi-document YAML of Kubernetes objects: a file for replay."""
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        return False
    return any(isinstance(d, dict) and "kind" in d for d in docs)


def _remaining(data: Any) -> Remaining:
    """How long the snapshot's jobs have left to run, when no annotation says."""
    f = fields(data, "remaining", _DURATION, ("median",))
    median = duration(f["median"], "remaining.median", positive=True)
    return Remaining(median, number(f.get("sigma", 1.0), "remaining.sigma"),
                     duration(f.get("min", "60s"), "remaining.min", positive=True),
                     duration(f["max"], "remaining.max", positive=True)
                     if f.get("max") is not None else median * 20)


def _offered(pools: tuple[NodePool, ...]) -> set[str]:
    return {n for p in pools for n, _ in p.capacity} | set(ALWAYS_OFFERED)


def _check_offered(scenario: Scenario, own: tuple[QueueSpec, ...]) -> None:
    """Every resource a queue or a job names is one some node offers: a typo
    (nvidia.com/gpus) would otherwise leave a job waiting forever."""
    offered = _offered(scenario.reachable_pools)
    known = ", ".join(sorted(offered - {"pods"}))
    for i, q in enumerate(own):
        for res, _ in q.resources:
            if res not in offered:
                raise FieldError(f"queues[{i}] ({q.name}).resources.{res}: no node pool offers "
                                 f"{res} (they offer {known})")
    labelled = any(k == MEMORY_LABEL for p in scenario.reachable_pools for k, _ in p.labels)
    for job in scenario.jobs:
        for role in job.roles:
            for res, _ in role.requests:
                if res not in offered:
                    raise FieldError(f"{job.where}.roles.{role.name}.requests.{res}: no node "
                                     f"pool offers {res} (they offer {known})")
            share = dict(role.gpu_share)
            if share and GPU not in offered:
                raise FieldError(f"{job.where}.roles.{role.name}: shares a GPU, but no node pool "
                                 f"offers nvidia.com/gpu")
            if GPU_MEMORY in share and not labelled:
                raise FieldError(f"{job.where}.roles.{role.name}.gpuMemory: no node pool labels "
                                 f"its GPUs' memory ({MEMORY_LABEL}: MiB), so no node takes it")


def _check_volumes(scenario: Scenario) -> None:
    known = {c.name for c in scenario.storage_classes}
    for job in scenario.jobs:
        for role in job.roles:
            for volume in role.volumes:
                if volume.storage_class not in known:
                    raise FieldError(f"{job.where}.roles.{role.name}.volumes ({volume.name})."
                               f"storageClass: no storage class named {volume.storage_class!r} "
                               f"(known: {', '.join(sorted(known)) or 'none'})")


def _storage_class(data: Any, where: str) -> StorageClassSpec:
    where = _named(data, where)
    f = fields(data, where, _STORAGE_CLASS, ("name",))
    mode = f.get("bindingMode", "WaitForFirstConsumer")
    if mode not in ("WaitForFirstConsumer", "Immediate"):
        raise FieldError(f"{where}.bindingMode: expected WaitForFirstConsumer or Immediate, got {mode!r}")
    allowed = f.get("allowedTopologies") or {}
    if not isinstance(allowed, dict) or not all(isinstance(v, list) for v in allowed.values()):
        raise FieldError(f"{where}.allowedTopologies: expected a mapping of node label to a list of values")
    failure = f.get("failure")
    return StorageClassSpec(
        name=dns(f["name"], f"{where}.name"),
        provisioner=text(f.get("provisioner", "sim.kaisched.io/provisioner"), f"{where}.provisioner"),
        binding_mode=mode,
        allowed_topologies=tuple(sorted((str(k), tuple(str(x) for x in v))
                                        for k, v in allowed.items())),
        provisioning_delay=duration(f.get("provisioningDelay", 0), f"{where}.provisioningDelay"),
        failure=text(failure, f"{where}.failure") if failure is not None else None)


def _refuse_cycles(queues: tuple[QueueSpec, ...], own: tuple[QueueSpec, ...]) -> None:
    """A queue that is its own ancestor (q -> q, or q -> q2 -> q): one line naming the
    cycle, as a cluster's Queue says it (the scheduler could not use any of them)."""
    parent = {q.name: q.parent for q in queues}
    for i, q in enumerate(own):
        path, at = [q.name], q.parent
        while at is not None and at not in path and at in parent:
            path.append(at)
            at = parent[at]
        if at == q.name:
            raise FieldError(f"queues[{i}] ({q.name}).parent: queue cycle: "
                             f"{' -> '.join([*path, q.name])}")


def _gpu_share(f: Mapping[str, Any], where: str,
               requests: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """A role's share of GPUs (gpuFraction: 0.5, or gpuMemory: MiB; gpuDevices: how
    many GPUs), as the annotations KAI's users write on their pods."""
    fraction, memory, devices = f.get("gpuFraction"), f.get("gpuMemory"), f.get("gpuDevices")
    if fraction is None and memory is None:
        if devices is not None:
            raise FieldError(f"{where}.gpuDevices: only with gpuFraction or gpuMemory")
        return ()
    if fraction is not None and memory is not None:
        raise FieldError(f"{where}: gpuFraction or gpuMemory, not both")
    if any(name == GPU for name, _ in requests):
        raise FieldError(f"{where}: a role that shares GPUs (gpuFraction, gpuMemory) does not "
                         f"also request nvidia.com/gpu")
    out = []
    if fraction is not None:
        # Its own range, said whole: a negative share is out of (0, 1], not "not >= 0".
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) \
                or not 0 < fraction <= 1:
            raise FieldError(f"{where}.gpuFraction: must be in (0, 1], the part of one GPU; "
                             f"got {fraction!r}")
        out.append((GPU_FRACTION, f"{float(fraction):g}"))
    else:
        out.append((GPU_MEMORY, str(integer(memory, f"{where}.gpuMemory", 1))))
    if devices is not None:
        out.append((GPU_DEVICES, str(integer(devices, f"{where}.gpuDevices", 1))))
    return tuple(out)


def _volumes(data: Any, where: str) -> tuple[VolumeSpec, ...]:
    out = []
    for i, entry in enumerate(listed(data, where, "{name, storageClass, size}")):
        at = _named(entry, f"{where}[{i}]")
        f = fields(entry, at, _VOLUME, _VOLUME)
        checked_amount("storage", f["size"], f"{at}.size")
        out.append(VolumeSpec(dns(f["name"], f"{at}.name"),
                              dns(f["storageClass"], f"{at}.storageClass"), str(f["size"])))
    unique([v.name for v in out], where, "volume")
    return tuple(out)


def _check_jobs(scenario: Scenario, queues: set[str], classes: dict[str, int]) -> None:
    seen: set[tuple[str, str]] = set()
    parents = {q.parent for q in scenario.queues if q.parent}
    for job in scenario.jobs:
        if (job.namespace, job.name) in seen:
            raise FieldError(f"{job.where}.name: a job {job.namespace}/{job.name} is listed twice")
        seen.add((job.namespace, job.name))
        if job.queue not in queues:
            raise FieldError(f"{job.where}.queue: no queue named {job.queue!r} "
                       f"(known: {', '.join(sorted(queues))})")
        if job.queue in parents:
            raise FieldError(f"{job.where}.queue: {job.queue!r} has child queues; jobs go to leaf queues")
        if job.priority_class is not None and job.priority_class not in classes:
            raise FieldError(f"{job.where}.priorityClass: no priority class named {job.priority_class!r}")
        if job.where.startswith("jobs["):
            # A hand-written job bigger than the whole cluster is a mistake in the file;
            # generated ones that cannot fit are reported in the results instead.
            for res in sorted({n for r in job.roles for n, _ in r.requests} - {PODS}):
                have = scenario.capacity(res)
                if job.minimum(res) > have:
                    raise FieldError(f"{job.where}.roles: needs {show(res, job.minimum(res))} {res}, "
                               f"the whole cluster has {show(res, have)}")


def _named(data: Any, where: str) -> str:
    """`list[i] (name)` when the entry has a name, for messages."""
    name = data.get("name") if isinstance(data, dict) else None
    return f"{where} ({name})" if isinstance(name, str) else where


def _pool(data: Any, where: str) -> NodePool:
    where = _named(data, where)
    f = fields(data, where, _POOL, ("name", "count", "capacity"))
    name = dns(f["name"], f"{where}.name")
    return NodePool(
        name=name,
        count=integer(f["count"], f"{where}.count", 1),
        capacity=resources(f["capacity"], f"{where}.capacity"),
        labels=labels(f.get("labels"), f"{where}.labels"),
        taints=tuple(_taint(t, f"{where}.taints[{i}]")
                     for i, t in enumerate(items(f, "taints", where))),
        devices=device_specs(f.get("devices"), f"{where}.devices"))


def _group(data: Any, where: str) -> NodeGroup:
    """A node group: a template node, and how many of it an autoscaler keeps."""
    where = _named(data, where)
    f = fields(data, where, _GROUP, ("name", "template", "max"))
    name = dns(f["name"], f"{where}.name")
    t = fields(f["template"], f"{where}.template", _TEMPLATE, ("capacity",))
    low, high = integer(f.get("min", 0), f"{where}.min", 0), integer(f["max"], f"{where}.max", 1)
    if low > high:
        raise FieldError(f"{where}.min: {low} is more than max ({high})")
    pool = NodePool(name=name, count=high,
                    capacity=resources(t["capacity"], f"{where}.template.capacity"),
                    labels=labels(t.get("labels"), f"{where}.template.labels"),
                    taints=tuple(_taint(x, f"{where}.template.taints[{i}]")
                                 for i, x in enumerate(items(t, "taints", f"{where}.template"))))
    return NodeGroup(pool, low, high,
                     duration(f.get("provisioningDelay", "0s"), f"{where}.provisioningDelay"),
                     number(f.get("costPerHour", 0), f"{where}.costPerHour"))


def _scale_down_after(data: Any) -> float:
    f = fields(data if data is not None else {}, "autoscaler", _AUTOSCALER)
    return duration(f.get("scaleDownUnneededTime", "10m"), "autoscaler.scaleDownUnneededTime")


def _taint(data: Any, where: str) -> tuple[str, str, str]:
    f = fields(data, where, ("key", "value", "effect"), ("key", "effect"))
    if f["effect"] not in _TAINT_EFFECTS:
        raise FieldError(f"{where}.effect: expected one of {', '.join(_TAINT_EFFECTS)}")
    return (text(f["key"], f"{where}.key"), text(f.get("value", ""), f"{where}.value"),
            f["effect"])


def _queue(data: Any, where: str) -> QueueSpec:
    where = _named(data, where)
    f = fields(data, where, _QUEUE, ("name",))
    name = dns(f["name"], f"{where}.name")
    resources = []
    raw = f.get("resources") or {}
    if not isinstance(raw, dict):
        raise FieldError(f"{where}.resources: expected a mapping of resource to "
                   "{quota, limit, overQuotaWeight}")
    for res_name, entry in sorted(raw.items(), key=lambda kv: str(kv[0])):
        res = ALIASES.get(str(res_name), str(res_name))
        at = f"{where}.resources.{res_name}"
        entry = fields(entry, at, _QUEUE_RESOURCE)
        kept: list[tuple[str, Any]] = []
        given = {}
        for key in ("quota", "limit"):
            if entry.get(key) is not None:
                given[key] = checked_amount(res, entry[key], f"{at}.{key}")
                kept.append((key, str(entry[key])))
        if "quota" in given and "limit" in given and given["limit"] < given["quota"]:
            raise FieldError(f"{at}.limit: {entry['limit']} is below the quota of "
                             f"{entry['quota']} (a queue may never use its whole quota)")
        if entry.get("overQuotaWeight") is not None:
            weight = entry["overQuotaWeight"]
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
                raise FieldError(f"{at}.overQuotaWeight: expected a number >= 0, got {weight!r}")
            kept.append(("overQuotaWeight", weight))
        resources.append((res, tuple(kept)))
    priority = f.get("priority", 100)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise FieldError(f"{where}.priority: expected an integer, got {priority!r}")
    parent = f.get("parent")
    return QueueSpec(name, dns(parent, f"{where}.parent") if parent is not None else None,
                     priority, tuple(resources))


def _priority_classes(data: Any) -> tuple[tuple[str, int], ...]:
    if data is None:
        return ()
    if not isinstance(data, dict):
        raise FieldError("priorityClasses: expected a mapping of name to value")
    out = []
    for name, value in sorted(data.items(), key=lambda kv: str(kv[0])):
        dns(name, "priorityClasses")
        if isinstance(value, bool) or not isinstance(value, int):
            raise FieldError(f"priorityClasses.{name}: expected an integer, got {value!r}")
        out.append((str(name), value))
    return tuple(out)


def _job(data: Any, where: str) -> JobSpec:
    where = _named(data, where)
    f = fields(data, where, _JOB, ("name", "kind", "queue", "duration", "roles"))
    name = dns(f["name"], f"{where}.name")
    if len(name) > MAX_JOB_NAME:
        raise FieldError(f"{where}.name: at most {MAX_JOB_NAME} characters (pod names add suffixes)")
    try:
        kind = JobKind(f["kind"])
    except ValueError:
        known = ", ".join(k.value for k in JobKind)
        raise FieldError(f"{where}.kind: unknown kind {f['kind']!r} (known: {known})") from None
    roles = _roles(f["roles"], f"{where}.roles", kind)
    queue = dns(f["queue"], f"{where}.queue")
    elastic_min = None
    if f.get("elastic") is not None:
        if kind not in ELASTIC_KINDS:
            raise FieldError(f"{where}.elastic: only {' and '.join(k.value for k in ELASTIC_KINDS)} "
                       "are elastic")
        elastic = fields(f["elastic"], f"{where}.elastic", ("minReplicas",), ("minReplicas",))
        elastic_min = integer(elastic["minReplicas"], f"{where}.elastic.minReplicas", 0)
        workers = sum(r.replicas for r in roles if r.name not in ELASTIC_LEADS)
        if elastic_min > workers:
            raise FieldError(f"{where}.elastic.minReplicas: {elastic_min} is more than the "
                       f"{workers} worker replicas")
    min_available = None
    if f.get("minAvailable") is not None:
        min_available = integer(f["minAvailable"], f"{where}.minAvailable", 1)
        total = sum(r.replicas for r in roles)
        if min_available > total:
            raise FieldError(f"{where}.minAvailable: {min_available} is more than the job's "
                       f"{total} pods")
    selector = labels(f.get("nodeSelector"), f"{where}.nodeSelector")
    tolerations = tuple(_toleration(t, f"{where}.tolerations[{i}]")
                        for i, t in enumerate(items(f, "tolerations", where)))
    pc = f.get("priorityClass")
    limit = f.get("runtimeLimit")
    startup = f.get("startupPolicy")
    if startup is not None and startup not in STARTUP_POLICIES.get(kind, ()):
        known = "; ".join(f"{k.value}: {', '.join(v)}" for k, v in STARTUP_POLICIES.items())
        raise FieldError(f"{where}.startupPolicy: {startup!r} is not a start order of {kind.value} "
                   f"(known: {known})")
    gang_api = f.get("gangApi", GANG_APIS[0])
    if gang_api != GANG_APIS[0] and kind is not JobKind.GANG:
        raise FieldError(f"{where}.gangApi: only a {JobKind.GANG.value} job names the API of its "
                         f"gang (a {kind.value}'s gang is its PodGrouper's)")
    if gang_api not in GANG_APIS:
        raise FieldError(f"{where}.gangApi: {gang_api!r} is not a gang API kaisched reads "
                         f"(known: {', '.join(GANG_APIS)})")
    return JobSpec(
        name=name, kind=kind, queue=queue, gang_api=gang_api,
        namespace=dns(f.get("namespace") or queue, f"{where}.namespace"),
        arrival=duration(f.get("arrival", 0), f"{where}.arrival"),
        duration=duration(f["duration"], f"{where}.duration", positive=True),
        runtime_limit=_runtime_limit(limit, f"{where}.runtimeLimit") if limit is not None else None,
        roles=roles,
        priority_class=text(pc, f"{where}.priorityClass") if pc is not None else None,
        min_available=min_available, elastic_min=elastic_min, startup_policy=startup,
        node_selector=selector, tolerations=tolerations, where=where)


def _runtime_limit(value: Any, where: str) -> float:
    """A job's runtimeLimit: a duration its pods' activeDeadlineSeconds (whole
    seconds, rounded up) can say, so the API server takes them."""
    seconds = duration(value, where, positive=True)
    if math.ceil(seconds) > _MAX_DEADLINE:
        raise FieldError(f"{where}: at most {_MAX_DEADLINE}s (a pod's activeDeadlineSeconds), "
                         f"got {value!r}")
    return seconds


def _roles(data: Any, where: str, kind: JobKind) -> tuple[RoleSpec, ...]:
    if not isinstance(data, dict) or not data:
        raise FieldError(f"{where}: expected a mapping of role name to {{replicas, requests}}")
    allowed = ROLES[kind]
    roles = []
    for role_name, entry in data.items():
        role = dns(role_name, where)
        at = f"{where}.{role}"
        if allowed is not None and role not in allowed:
            raise FieldError(f"{at}: {kind.value} has no role {role!r} (known: {', '.join(allowed)})")
        f = fields(entry, at, _ROLE, ("replicas", "requests"))
        requests = resources(f["requests"], f"{at}.requests")
        roles.append(RoleSpec(role, integer(f["replicas"], f"{at}.replicas", 1), requests,
                              _volumes(f.get("volumes"), f"{at}.volumes"),
                              claim_specs(f.get("claims"), f"{at}.claims"),
                              _gpu_share(f, at, requests)))
    if kind is JobKind.JOB and len(roles) != 1:
        raise FieldError(f"{where}: a Job has exactly one role (its pod template)")
    by_name = {r.name: r for r in roles}
    if kind in (JobKind.RAY, JobKind.RAYSERVICE) and HEAD not in by_name:
        raise FieldError(f"{where}: a {kind.value} needs a {HEAD} role")
    if kind in (JobKind.RAY, JobKind.RAYSERVICE) and by_name[HEAD].replicas != 1:
        raise FieldError(f"{where}.{HEAD}.replicas: a Ray cluster has exactly one {HEAD}")
    if kind is JobKind.MPI and LAUNCHER in by_name and by_name[LAUNCHER].replicas != 1:
        raise FieldError(f"{where}.{LAUNCHER}.replicas: an MPIJob has exactly one {LAUNCHER}")
    if kind is JobKind.PYTORCH and MASTER in by_name and by_name[MASTER].replicas != 1:
        raise FieldError(f"{where}.{MASTER}.replicas: a PyTorchJob has at most one {MASTER}")
    if kind is JobKind.LWS:
        _lws_roles(roles, where)
    # The roles that lead come first (a stable sort: the others keep the file's order).
    return tuple(sorted(roles, key=lambda r: r.name not in _LEADING))


def _lws_roles(roles: list[RoleSpec], where: str) -> None:
    """A leader per group (leader replicas = groups); the workers split evenly over them."""
    by_name = {r.name: r for r in roles}
    if LEADER not in by_name:
        raise FieldError(f"{where}: a LeaderWorkerSet needs a {LEADER} role (its replicas: the "
                         "groups)")
    groups = by_name[LEADER].replicas
    workers = by_name[WORKER].replicas if WORKER in by_name else 0
    if workers % groups:
        raise FieldError(f"{where}.{WORKER}.replicas: {workers} workers do not split evenly over "
                   f"{groups} groups")


def _toleration(data: Any, where: str) -> tuple[tuple[str, str], ...]:
    f = fields(data, where, _TOLERATION)
    return tuple((k, text(f[k], f"{where}.{k}")) for k in _TOLERATION if f.get(k) is not None)
