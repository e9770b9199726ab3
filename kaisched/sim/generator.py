"""Generated workloads: Poisson arrivals, job sizes and durations drawn from
the distributions of a scenario's `generate:` block, a per-queue mix of kinds.

numpy's PCG64 generator, seeded, gives the same jobs on every machine.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from kaisched.api.resource import CPU, GPU, MEMORY
from kaisched.api.workloadkinds import HEAD, LAUNCHER, NODE, WORKER
from kaisched.sim.fields import FieldError, dns, duration, fields, integer, number
from kaisched.sim.specs import WORKLOADS, JobKind, JobSpec, NodePool, RoleSpec

_KEYS = ("seed", "jobs", "start", "meanInterarrival", "gpus", "gpusPerPod", "duration",
         "perGpu", "queues", "namePrefix")
_DURATION = ("median", "sigma", "min", "max")
_QUEUE_MIX = ("weight", "kinds", "priorityClass")
_SHORT = {JobKind.PYTORCH: "pt", JobKind.TF: "tf", JobKind.MPI: "mpi", JobKind.JOBSET: "js",
          JobKind.RAY: "ray", JobKind.JOB: "job", JobKind.GANG: "gang", JobKind.XGBOOST: "xgb",
          JobKind.JAX: "jax", JobKind.TRAINJOB: "tj", JobKind.LWS: "lws", JobKind.RAYSERVICE: "rsvc"}
DEFAULT_SEED = 1


def generate(data: Any, where: str, seed: int | None, queues: list[str],
             classes: Mapping[str, int], pools: tuple[NodePool, ...],
             cap: int | None = None) -> tuple[list[JobSpec], int]:
    """The generated jobs, and the seed used (the override, else generate.seed)."""
    f = fields(data, where, _KEYS, ("jobs", "meanInterarrival", "gpus", "duration", "queues"))
    used = seed if seed is not None else integer(f.get("seed", DEFAULT_SEED), f"{where}.seed", 0)
    count = integer(f["jobs"], f"{where}.jobs", 1)
    if cap is not None and count > cap:
        raise FieldError(f"{where}.jobs: {count} is more than the cap of {cap} "
                         "(--max-objects raises it)")
    start = duration(f.get("start", 0), f"{where}.start")
    gap = duration(f["meanInterarrival"], f"{where}.meanInterarrival", positive=True)
    sizes, size_weights = _weights(f["gpus"], f"{where}.gpus", int_keys=True)
    per_pod = integer(f.get("gpusPerPod", 8), f"{where}.gpusPerPod", 1)
    for size in sizes:
        if size > per_pod and size % per_pod:
            raise FieldError(f"{where}.gpus.{size}: a job of more than gpusPerPod ({per_pod}) GPUs "
                       "must be a multiple of it")
    dur = fields(f["duration"], f"{where}.duration", _DURATION, ("median",))
    median = duration(dur["median"], f"{where}.duration.median", positive=True)
    sigma = number(dur.get("sigma", 1.0), f"{where}.duration.sigma")
    low = duration(dur.get("min", "60s"), f"{where}.duration.min", positive=True)
    high = duration(dur["max"], f"{where}.duration.max", positive=True) \
        if dur.get("max") is not None else median * 20
    per_gpu = fields(f.get("perGpu") or {"cpu": 8, "memory": "64Gi"}, f"{where}.perGpu",
                     (CPU, MEMORY))
    mixes = _queue_mixes(f["queues"], f"{where}.queues", queues, classes)
    prefix = dns(f["namePrefix"], f"{where}.namePrefix")[:20] if f.get("namePrefix") else None

    rng = np.random.default_rng(used)
    gaps = rng.exponential(gap, count)
    arrivals = start + np.concatenate(([0.0], np.cumsum(gaps[:-1])))
    queue_pick = rng.choice(len(mixes), count, p=_norm([m[1] for m in mixes]))
    size_pick = rng.choice(len(sizes), count, p=_norm(size_weights))
    durations = np.clip(rng.lognormal(math.log(median), sigma, count), low, high)
    kind_draw = rng.random(count)
    jobs = []
    for i in range(count):
        queue, _, kinds, kind_weights, priority = mixes[int(queue_pick[i])]
        kind = kinds[int(np.searchsorted(np.cumsum(_norm(kind_weights)), kind_draw[i],
                                         side="right").clip(0, len(kinds) - 1))]
        gpus = sizes[int(size_pick[i])]
        name = f"{prefix or queue[:20]}-{_SHORT[kind]}-{i:05d}"
        jobs.append(JobSpec(
            name=name, kind=kind, queue=queue, namespace=queue,
            arrival=float(round(arrivals[i])), duration=float(round(durations[i])),
            roles=_roles(kind, gpus, per_pod, per_gpu), priority_class=priority,
            where=f"{where} job {name}"))
    return jobs, used


def _roles(kind: JobKind, gpus: int, per_pod: int, per_gpu: Mapping[str, Any]) -> tuple[RoleSpec, ...]:
    """The pods of a job of `gpus` GPUs, as its kind lays them out."""
    each = min(gpus, per_pod)
    pods = gpus // each
    cpu = float(str(per_gpu.get(CPU, 8))) * each
    mem = _scaled(str(per_gpu.get(MEMORY, "64Gi")), each)
    gpu_pod = ((CPU, f"{cpu:g}"), (MEMORY, mem), (GPU, str(each)))
    small = ((CPU, "1"), (MEMORY, "2Gi"))
    if kind in (JobKind.PYTORCH, JobKind.TF, JobKind.LWS):
        # One pod of its first role (a LeaderWorkerSet: one group), the rest workers.
        roles = [RoleSpec(WORKLOADS[kind].roles[0], 1, gpu_pod)]
        return tuple(roles + ([RoleSpec(WORKER, pods - 1, gpu_pod)] if pods > 1 else []))
    if kind is JobKind.MPI:
        return (RoleSpec(LAUNCHER, 1, small), RoleSpec(WORKER, pods, gpu_pod))
    if kind in (JobKind.RAY, JobKind.RAYSERVICE):
        return (RoleSpec(HEAD, 1, ((CPU, "2"), (MEMORY, "8Gi"))), RoleSpec("gpu", pods, gpu_pod))
    if kind is JobKind.TRAINJOB:
        return (RoleSpec(NODE, pods, gpu_pod),)
    if kind is JobKind.JOBSET:
        return (RoleSpec("trainer", pods, gpu_pod),)
    if kind is JobKind.JOB:
        return (RoleSpec("main", pods, gpu_pod),)
    return (RoleSpec(WORKER, pods, gpu_pod),)


def _scaled(quantity: str, times: int) -> str:
    for suffix in ("Ki", "Mi", "Gi", "Ti"):
        if quantity.endswith(suffix):
            return f"{float(quantity[:-2]) * times:g}{suffix}"
    return f"{float(quantity) * times:g}"


def _queue_mixes(data: Any, where: str, queues: list[str], classes: Mapping[str, int]
                 ) -> list[tuple[str, float, list[JobKind], list[float], str | None]]:
    if not isinstance(data, dict) or not data:
        raise FieldError(f"{where}: expected a mapping of queue name to {{weight, kinds, priorityClass}}")
    out = []
    for queue, entry in data.items():
        at = f"{where}.{queue}"
        if queue not in queues:
            raise FieldError(f"{at}: no queue named {queue!r} in queues")
        f = fields(entry, at, _QUEUE_MIX, ("kinds",))
        weight = number(f.get("weight", 1), f"{at}.weight")
        names, kind_weights = _weights(f["kinds"], f"{at}.kinds")
        kinds = []
        for name in names:
            try:
                kinds.append(JobKind(name))
            except ValueError:
                known = ", ".join(k.value for k in JobKind)
                raise FieldError(f"{at}.kinds.{name}: unknown kind (known: {known})") from None
        priority = f.get("priorityClass")
        if priority is not None and priority not in classes:
            raise FieldError(f"{at}.priorityClass: no priority class named {priority!r}")
        out.append((str(queue), weight, kinds, kind_weights, priority))
    return out


def _weights(data: Any, where: str, int_keys: bool = False) -> tuple[list[Any], list[float]]:
    if not isinstance(data, dict) or not data:
        raise FieldError(f"{where}: expected a mapping of value to weight")
    keys, weights = [], []
    for key, weight in data.items():
        if int_keys:
            key = integer(key, f"{where}", 1)
        keys.append(key)
        weights.append(number(weight, f"{where}.{key}"))
    if sum(weights) <= 0:
        raise FieldError(f"{where}: the weights add up to zero")
    return keys, weights


def _norm(weights: list[float]) -> np.ndarray:
    array = np.asarray(weights, dtype=float)
    return array / array.sum()
