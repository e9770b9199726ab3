"""The scenario a simulation runs: node pools, queues, priority classes and a
workload of jobs, read from YAML and checked key by key.

Every problem is one ScenarioError whose message names the file, the path of
the key and, for a job, the job: `demo.yaml: jobs[2] (bert).duration: not a
duration: 'soon'`. Unknown keys are refused, as in the scheduler config.
"""
from __future__ import annotations

import enum
import re
from decimal import Decimal
from pathlib import Path
from typing import Any, Mapping

import attrs
import yaml

from kaisched.api.quantity import parse_duration, parse_quantity
from kaisched.api.resource import CPU, GPU, MEMORY, PODS
from kaisched.errors import InputError
from kaisched.validation.rules import dns_label

# Room left in a 63-character pod name for the suffixes the operators add.
MAX_JOB_NAME = 40
ALIASES = {"gpu": GPU}
_INTEGER_RESOURCES = (GPU,)       # extended resources: whole units only
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class ScenarioError(InputError):
    """A scenario that cannot be run; the message names the key (and the job)."""


class JobKind(str, enum.Enum):
    PYTORCH = "PyTorchJob"
    TF = "TFJob"
    MPI = "MPIJob"
    JOBSET = "JobSet"
    RAY = "RayJob"
    JOB = "Job"
    GANG = "PodGroup"      # a plain gang: a PodGroup and bare pods that name it


# Role names each kind accepts; None: any DNS label.
ROLES: dict[JobKind, tuple[str, ...] | None] = {
    JobKind.PYTORCH: ("master", "worker"),
    JobKind.TF: ("chief", "master", "ps", "worker", "evaluator"),
    JobKind.MPI: ("launcher", "worker"),
    JobKind.JOBSET: None,
    JobKind.RAY: None,                  # "head" plus worker groups of any name
    JobKind.JOB: None,
    JobKind.GANG: None,
}
ELASTIC_KINDS = (JobKind.PYTORCH, JobKind.RAY)


@attrs.frozen
class VolumeSpec:
    """A volume each pod of a role gets a claim of its own for (an ephemeral
    volume: the claim `<pod>-<name>` is made with the pod)."""
    name: str
    storage_class: str
    size: str


@attrs.frozen
class StorageClassSpec:
    """A StorageClass and how the simulated provisioner behaves for it."""
    name: str
    provisioner: str
    binding_mode: str = "WaitForFirstConsumer"
    allowed_topologies: tuple[tuple[str, tuple[str, ...]], ...] = ()   # label -> values
    provisioning_delay: float = 0.0
    failure: str | None = None          # every provisioning attempt fails, saying this


@attrs.frozen
class RoleSpec:
    name: str
    replicas: int
    requests: tuple[tuple[str, str], ...]      # resource name -> quantity, canonical names
    volumes: tuple[VolumeSpec, ...] = ()

    def amount(self, resource: str) -> float:
        return sum(_amount(resource, q) for n, q in self.requests if n == resource)


@attrs.frozen
class JobSpec:
    name: str
    kind: JobKind
    queue: str
    namespace: str
    arrival: float                 # seconds after the start
    duration: float                # how long its pods run once started
    roles: tuple[RoleSpec, ...]
    priority_class: str | None = None
    min_available: int | None = None
    elastic_min: int | None = None     # PyTorch elasticPolicy / Ray worker minReplicas
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[tuple[tuple[str, str], ...], ...] = ()
    where: str = ""                    # how error messages name it: "jobs[2] (bert)"

    @property
    def pods(self) -> int:
        return sum(r.replicas for r in self.roles)

    def total(self, resource: str) -> float:
        return sum(r.replicas * r.amount(resource) for r in self.roles)

    def minimum(self, resource: str) -> float:
        """What the gang's minimum asks for: whole roles in order, trimmed to
        minAvailable as the PodGrouper trims subgroups (leading roles first)."""
        left = self.gang_min()
        total = 0.0
        for role in self.roles:
            take = min(role.replicas, left)
            total += take * role.amount(resource)
            left -= take
        return total

    def gang_min(self) -> int:
        if self.min_available is not None:
            return min(self.min_available, self.pods)
        if self.kind is JobKind.JOB:
            return 1
        if self.elastic_min is not None:
            leaders = sum(r.replicas for r in self.roles if r.name in ("master", "head"))
            return leaders + self.elastic_min
        return self.pods


@attrs.frozen
class NodePool:
    name: str
    count: int
    capacity: tuple[tuple[str, str], ...]
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[tuple[str, str, str], ...] = ()      # key, value, effect


@attrs.frozen
class QueueSpec:
    name: str
    parent: str | None = None
    priority: int = 100
    resources: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()

    def limit(self, resource: str) -> float | None:
        for name, fields in self.resources:
            if name == resource:
                for key, value in fields:
                    if key == "limit":
                        return _amount(name, value)
        return None

    def quota(self, resource: str) -> float:
        for name, fields in self.resources:
            if name == resource:
                for key, value in fields:
                    if key == "quota":
                        return _amount(name, value)
        return 0.0


@attrs.frozen
class Scenario:
    name: str
    description: str
    node_pools: tuple[NodePool, ...]
    queues: tuple[QueueSpec, ...]
    priority_classes: tuple[tuple[str, int], ...]
    jobs: tuple[JobSpec, ...]
    until: float | None = None
    seed: int | None = None
    source: str = "scenario"
    storage_classes: tuple[StorageClassSpec, ...] = ()

    def capacity(self, resource: str) -> float:
        return sum(p.count * sum(_amount(resource, q) for n, q in p.capacity if n == resource)
                   for p in self.node_pools)

    def queue(self, name: str) -> QueueSpec | None:
        return next((q for q in self.queues if q.name == name), None)


# -- loading -------------------------------------------------------------------------------

_TOP = ("name", "description", "until", "nodePools", "queues", "priorityClasses", "jobs",
        "generate", "storageClasses")
_POOL = ("name", "count", "capacity", "labels", "taints")
_QUEUE = ("name", "parent", "priority", "resources")
_QUEUE_RESOURCE = ("quota", "limit", "overQuotaWeight")
_JOB = ("name", "kind", "queue", "namespace", "arrival", "duration", "roles", "priorityClass",
        "minAvailable", "elastic", "nodeSelector", "tolerations")
_ROLE = ("replicas", "requests", "volumes")
_STORAGE_CLASS = ("name", "provisioner", "bindingMode", "allowedTopologies", "provisioningDelay",
                  "failure")
_VOLUME = ("name", "storageClass", "size")
_TOLERATION = ("key", "operator", "value", "effect")


def load_scenario(path: str | Path, seed: int | None = None) -> Scenario:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.__class__.__name__}") from None
    return parse_scenario(text, str(path), seed)


def parse_scenario(text: str, source: str = "scenario", seed: int | None = None) -> Scenario:
    """A checked Scenario; seed overrides generate.seed."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScenarioError(f"{source}: invalid YAML{where}: {problem}") from None
    try:
        return _scenario(data, source, seed)
    except _Bad as exc:
        raise ScenarioError(f"{source}: {exc}") from None


class _Bad(Exception):
    """A problem at a path; becomes a ScenarioError with the file name."""


def fields(data: Any, where: str, known: tuple[str, ...], required: tuple[str, ...] = ()
           ) -> Mapping[str, Any]:
    """A mapping with only known keys and every required one."""
    if not isinstance(data, dict):
        raise _Bad(f"{where}: expected a mapping with keys {', '.join(known)}")
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise _Bad(f"{_join(where, unknown[0])}: unknown key (known: {', '.join(known)})")
    for key in required:
        if data.get(key) is None:
            raise _Bad(f"{_join(where, key)}: required")
    return data


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _scenario(data: Any, source: str, seed: int | None) -> Scenario:
    if data is None:
        raise _Bad("empty scenario (expected nodePools, queues and jobs or generate)")
    top = fields(data, "", _TOP, ("nodePools",))
    pools = tuple(_pool(p, f"nodePools[{i}]") for i, p in enumerate(_list(top, "nodePools", "")))
    if not pools:
        raise _Bad("nodePools: at least one pool is needed")
    _unique([p.name for p in pools], "nodePools", "pool")
    queues = tuple(_queue(q, f"queues[{i}]") for i, q in enumerate(_list(top, "queues", "")))
    _unique([q.name for q in queues], "queues", "queue")
    names = {q.name for q in queues} | {"default"}
    for i, q in enumerate(queues):
        if q.parent is not None and q.parent not in names:
            raise _Bad(f"queues[{i}] ({q.name}).parent: no queue named {q.parent!r}")
    classes = _priority_classes(top.get("priorityClasses"))
    storage = tuple(_storage_class(c, f"storageClasses[{i}]")
                    for i, c in enumerate(_list(top, "storageClasses", "")))
    _unique([c.name for c in storage], "storageClasses", "storage class")
    jobs = [_job(j, f"jobs[{i}]") for i, j in enumerate(_list(top, "jobs", ""))]
    used_seed = None
    if top.get("generate") is not None:
        from kaisched.sim.generator import generate      # the generator reads specs back
        generated, used_seed = generate(top["generate"], "generate", seed,
                                        [q.name for q in queues], dict(classes), pools)
        jobs.extend(generated)
    if not jobs:
        raise _Bad("jobs: no jobs (list some, or add a generate: block)")
    scenario = Scenario(
        name=_text(top.get("name", Path(source).stem), "name"),
        description=_text(top.get("description", ""), "description"),
        node_pools=pools, queues=queues, priority_classes=classes,
        jobs=tuple(sorted(jobs, key=lambda j: (j.arrival, j.name))),
        until=_duration(top["until"], "until") if top.get("until") is not None else None,
        seed=used_seed, source=source, storage_classes=storage)
    _check_jobs(scenario, names, dict(classes))
    _check_volumes(scenario)
    return scenario


def _check_volumes(scenario: Scenario) -> None:
    known = {c.name for c in scenario.storage_classes}
    for job in scenario.jobs:
        for role in job.roles:
            for volume in role.volumes:
                if volume.storage_class not in known:
                    raise _Bad(f"{job.where}.roles.{role.name}.volumes ({volume.name})."
                               f"storageClass: no storage class named {volume.storage_class!r} "
                               f"(known: {', '.join(sorted(known)) or 'none'})")


def _storage_class(data: Any, where: str) -> StorageClassSpec:
    where = _named(data, where)
    f = fields(data, where, _STORAGE_CLASS, ("name",))
    mode = f.get("bindingMode", "WaitForFirstConsumer")
    if mode not in ("WaitForFirstConsumer", "Immediate"):
        raise _Bad(f"{where}.bindingMode: expected WaitForFirstConsumer or Immediate, got {mode!r}")
    allowed = f.get("allowedTopologies") or {}
    if not isinstance(allowed, dict) or not all(isinstance(v, list) for v in allowed.values()):
        raise _Bad(f"{where}.allowedTopologies: expected a mapping of node label to a list of values")
    failure = f.get("failure")
    return StorageClassSpec(
        name=_dns(f["name"], f"{where}.name"),
        provisioner=_text(f.get("provisioner", "sim.kaisched.io/provisioner"), f"{where}.provisioner"),
        binding_mode=mode,
        allowed_topologies=tuple(sorted((str(k), tuple(str(x) for x in v))
                                        for k, v in allowed.items())),
        provisioning_delay=_duration(f.get("provisioningDelay", 0), f"{where}.provisioningDelay"),
        failure=_text(failure, f"{where}.failure") if failure is not None else None)


def _volumes(data: Any, where: str) -> tuple[VolumeSpec, ...]:
    if data is None:
        return ()
    if not isinstance(data, list):
        raise _Bad(f"{where}: expected a list of {{name, storageClass, size}}")
    out = []
    for i, entry in enumerate(data):
        at = _named(entry, f"{where}[{i}]")
        f = fields(entry, at, _VOLUME, _VOLUME)
        _amount_checked("storage", f["size"], f"{at}.size")
        out.append(VolumeSpec(_dns(f["name"], f"{at}.name"),
                              _dns(f["storageClass"], f"{at}.storageClass"), str(f["size"])))
    _unique([v.name for v in out], where, "volume")
    return tuple(out)


def _check_jobs(scenario: Scenario, queues: set[str], classes: dict[str, int]) -> None:
    seen: set[tuple[str, str]] = set()
    parents = {q.parent for q in scenario.queues if q.parent}
    for job in scenario.jobs:
        if (job.namespace, job.name) in seen:
            raise _Bad(f"{job.where}.name: a job {job.namespace}/{job.name} is listed twice")
        seen.add((job.namespace, job.name))
        if job.queue not in queues:
            raise _Bad(f"{job.where}.queue: no queue named {job.queue!r} "
                       f"(known: {', '.join(sorted(queues))})")
        if job.queue in parents:
            raise _Bad(f"{job.where}.queue: {job.queue!r} has child queues; jobs go to leaf queues")
        if job.priority_class is not None and job.priority_class not in classes:
            raise _Bad(f"{job.where}.priorityClass: no priority class named {job.priority_class!r}")
        if job.where.startswith("jobs["):
            # A hand-written job bigger than the whole cluster is a mistake in the file;
            # generated ones that cannot fit are reported in the results instead.
            for res in sorted({n for r in job.roles for n, _ in r.requests} - {PODS}):
                have = scenario.capacity(res)
                if job.minimum(res) > have:
                    raise _Bad(f"{job.where}.roles: needs {_show(res, job.minimum(res))} {res}, "
                               f"the whole cluster has {_show(res, have)}")


def _named(data: Any, where: str) -> str:
    """`list[i] (name)` when the entry has a name, for messages."""
    name = data.get("name") if isinstance(data, dict) else None
    return f"{where} ({name})" if isinstance(name, str) else where


def _pool(data: Any, where: str) -> NodePool:
    where = _named(data, where)
    f = fields(data, where, _POOL, ("name", "count", "capacity"))
    name = _dns(f["name"], f"{where}.name")
    return NodePool(
        name=name,
        count=_int(f["count"], f"{where}.count", 1),
        capacity=_resources(f["capacity"], f"{where}.capacity"),
        labels=_labels(f.get("labels"), f"{where}.labels"),
        taints=tuple(_taint(t, f"{where}.taints[{i}]")
                     for i, t in enumerate(_list(f, "taints", where))))


def _taint(data: Any, where: str) -> tuple[str, str, str]:
    f = fields(data, where, ("key", "value", "effect"), ("key", "effect"))
    if f["effect"] not in _TAINT_EFFECTS:
        raise _Bad(f"{where}.effect: expected one of {', '.join(_TAINT_EFFECTS)}")
    return (_text(f["key"], f"{where}.key"), _text(f.get("value", ""), f"{where}.value"),
            f["effect"])


def _queue(data: Any, where: str) -> QueueSpec:
    where = _named(data, where)
    f = fields(data, where, _QUEUE, ("name",))
    name = _dns(f["name"], f"{where}.name")
    resources = []
    raw = f.get("resources") or {}
    if not isinstance(raw, dict):
        raise _Bad(f"{where}.resources: expected a mapping of resource to "
                   "{quota, limit, overQuotaWeight}")
    for res_name, entry in sorted(raw.items(), key=lambda kv: str(kv[0])):
        res = ALIASES.get(str(res_name), str(res_name))
        at = f"{where}.resources.{res_name}"
        entry = fields(entry, at, _QUEUE_RESOURCE)
        kept: list[tuple[str, Any]] = []
        for key in ("quota", "limit"):
            if entry.get(key) is not None:
                _amount_checked(res, entry[key], f"{at}.{key}")
                kept.append((key, str(entry[key])))
        if entry.get("overQuotaWeight") is not None:
            weight = entry["overQuotaWeight"]
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
                raise _Bad(f"{at}.overQuotaWeight: expected a number >= 0, got {weight!r}")
            kept.append(("overQuotaWeight", weight))
        resources.append((res, tuple(kept)))
    priority = f.get("priority", 100)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise _Bad(f"{where}.priority: expected an integer, got {priority!r}")
    parent = f.get("parent")
    return QueueSpec(name, _dns(parent, f"{where}.parent") if parent is not None else None,
                     priority, tuple(resources))


def _priority_classes(data: Any) -> tuple[tuple[str, int], ...]:
    if data is None:
        return ()
    if not isinstance(data, dict):
        raise _Bad("priorityClasses: expected a mapping of name to value")
    out = []
    for name, value in sorted(data.items(), key=lambda kv: str(kv[0])):
        _dns(name, "priorityClasses")
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Bad(f"priorityClasses.{name}: expected an integer, got {value!r}")
        out.append((str(name), value))
    return tuple(out)


def _job(data: Any, where: str) -> JobSpec:
    where = _named(data, where)
    f = fields(data, where, _JOB, ("name", "kind", "queue", "duration", "roles"))
    name = _dns(f["name"], f"{where}.name")
    if len(name) > MAX_JOB_NAME:
        raise _Bad(f"{where}.name: at most {MAX_JOB_NAME} characters (pod names add suffixes)")
    try:
        kind = JobKind(f["kind"])
    except ValueError:
        known = ", ".join(k.value for k in JobKind)
        raise _Bad(f"{where}.kind: unknown kind {f['kind']!r} (known: {known})") from None
    roles = _roles(f["roles"], f"{where}.roles", kind)
    queue = _dns(f["queue"], f"{where}.queue")
    elastic_min = None
    if f.get("elastic") is not None:
        if kind not in ELASTIC_KINDS:
            raise _Bad(f"{where}.elastic: only {' and '.join(k.value for k in ELASTIC_KINDS)} "
                       "are elastic")
        elastic = fields(f["elastic"], f"{where}.elastic", ("minReplicas",), ("minReplicas",))
        elastic_min = _int(elastic["minReplicas"], f"{where}.elastic.minReplicas", 0)
        workers = sum(r.replicas for r in roles if r.name not in ("master", "head"))
        if elastic_min > workers:
            raise _Bad(f"{where}.elastic.minReplicas: {elastic_min} is more than the "
                       f"{workers} worker replicas")
    min_available = None
    if f.get("minAvailable") is not None:
        min_available = _int(f["minAvailable"], f"{where}.minAvailable", 1)
        total = sum(r.replicas for r in roles)
        if min_available > total:
            raise _Bad(f"{where}.minAvailable: {min_available} is more than the job's "
                       f"{total} pods")
    selector = _labels(f.get("nodeSelector"), f"{where}.nodeSelector")
    tolerations = tuple(_toleration(t, f"{where}.tolerations[{i}]")
                        for i, t in enumerate(_list(f, "tolerations", where)))
    pc = f.get("priorityClass")
    return JobSpec(
        name=name, kind=kind, queue=queue,
        namespace=_dns(f.get("namespace") or queue, f"{where}.namespace"),
        arrival=_duration(f.get("arrival", 0), f"{where}.arrival"),
        duration=_duration(f["duration"], f"{where}.duration", positive=True),
        roles=roles,
        priority_class=_text(pc, f"{where}.priorityClass") if pc is not None else None,
        min_available=min_available, elastic_min=elastic_min,
        node_selector=selector, tolerations=tolerations, where=where)


def _roles(data: Any, where: str, kind: JobKind) -> tuple[RoleSpec, ...]:
    if not isinstance(data, dict) or not data:
        raise _Bad(f"{where}: expected a mapping of role name to {{replicas, requests}}")
    allowed = ROLES[kind]
    roles = []
    for role_name, entry in data.items():
        role = _dns(role_name, where)
        at = f"{where}.{role}"
        if allowed is not None and role not in allowed:
            raise _Bad(f"{at}: {kind.value} has no role {role!r} (known: {', '.join(allowed)})")
        f = fields(entry, at, _ROLE, ("replicas", "requests"))
        roles.append(RoleSpec(role, _int(f["replicas"], f"{at}.replicas", 1),
                              _resources(f["requests"], f"{at}.requests"),
                              _volumes(f.get("volumes"), f"{at}.volumes")))
    if kind is JobKind.JOB and len(roles) != 1:
        raise _Bad(f"{where}: a Job has exactly one role (its pod template)")
    if kind is JobKind.RAY and "head" not in {r.name for r in roles}:
        raise _Bad(f"{where}: a RayJob needs a head role")
    if kind is JobKind.RAY and next(r for r in roles if r.name == "head").replicas != 1:
        raise _Bad(f"{where}.head.replicas: a Ray cluster has exactly one head")
    if kind is JobKind.MPI and "launcher" in {r.name for r in roles} \
            and next(r for r in roles if r.name == "launcher").replicas != 1:
        raise _Bad(f"{where}.launcher.replicas: an MPIJob has exactly one launcher")
    if kind is JobKind.PYTORCH and "master" in {r.name for r in roles} \
            and next(r for r in roles if r.name == "master").replicas != 1:
        raise _Bad(f"{where}.master.replicas: a PyTorchJob has at most one master")
    lead = {"master": 0, "chief": 0, "launcher": 0, "head": 0}
    return tuple(sorted(roles, key=lambda r: lead.get(r.name, 1)))


def _toleration(data: Any, where: str) -> tuple[tuple[str, str], ...]:
    f = fields(data, where, _TOLERATION)
    return tuple((k, _text(f[k], f"{where}.{k}")) for k in _TOLERATION if f.get(k) is not None)


# -- scalars -------------------------------------------------------------------------------

def _list(parent: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = parent.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Bad(f"{_join(where, key)}: expected a list")
    return value


def _unique(names: list[str], where: str, what: str) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            raise _Bad(f"{where}[{i}].name: a {what} named {name!r} is listed twice")
        seen.add(name)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise _Bad(f"{where}: expected a string, got {value!r}")
    return str(value)


def _dns(value: Any, where: str) -> str:
    """A DNS-1123 label, as the API server wants names, namespaces and role names."""
    if dns_label(value) is not None:
        raise _Bad(f"{where}: {value!r} is not a DNS-1123 label (lower-case letters, digits "
                   "and '-', at most 63)")
    return value


def _int(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad(f"{where}: expected an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise _Bad(f"{where}: must be at least {minimum}, got {value}")
    return value


def _duration(value: Any, where: str, positive: bool = False) -> float:
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise _Bad(f"{where}: {exc}") from None
    if positive and seconds <= 0:
        raise _Bad(f"{where}: must be more than zero")
    return seconds


def _labels(data: Any, where: str) -> tuple[tuple[str, str], ...]:
    if data is None:
        return ()
    if not isinstance(data, dict):
        raise _Bad(f"{where}: expected a mapping of strings")
    return tuple(sorted((_text(k, where), _text(v, f"{where}.{k}")) for k, v in data.items()))


def _resources(data: Any, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(data, dict) or not data:
        raise _Bad(f"{where}: expected a mapping of resource to quantity (cpu, memory, "
                   "nvidia.com/gpu)")
    out = {}
    for raw_name, value in data.items():
        name = ALIASES.get(str(raw_name), str(raw_name))
        _amount_checked(name, value, f"{where}.{raw_name}")
        out[name] = str(value)
    return tuple(sorted(out.items()))


def _amount_checked(name: str, value: Any, where: str) -> Decimal:
    try:
        amount = parse_quantity(value)
    except ValueError as exc:
        raise _Bad(f"{where}: {exc}") from None
    if amount < 0:
        raise _Bad(f"{where}: must not be negative, got {value!r}")
    if name in _INTEGER_RESOURCES and amount != amount.to_integral_value():
        raise _Bad(f"{where}: {name} is counted in whole units, got {value!r}")
    return amount


def _amount(name: str, value: Any) -> float:
    """In the scheduler's units: cpu in millicores, the rest as given."""
    amount = float(parse_quantity(value))
    return amount * 1000 if name == CPU else amount


def _show(name: str, value: float) -> str:
    if name == CPU:
        return f"{value / 1000:g}"
    if name == MEMORY:
        return f"{value / 2**30:g}Gi"
    return f"{value:g}"
