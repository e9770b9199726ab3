"""Devices in a simulated cluster (Dynamic Resource Allocation): what a
scenario declares -- a DRA driver's devices per node pool, device claims per
job role -- read and checked, and the objects the simulated cluster holds for
them: a DeviceClass per driver, a ResourceSlice per node, a
ResourceClaimTemplate per role's claim (the resource-claim controller,
kaisched.sim.claims, makes each pod its claim from it)."""
from __future__ import annotations

from typing import Any, Iterable

from kaisched.sim.fields import FieldError, checked_amount, dns, fields, integer, listed, text, unique
from kaisched.sim.specs import ClaimSpec, DeviceSpec, JobSpec, NodePool, RoleSpec

Obj = dict[str, Any]
API = "resource.k8s.io/v1"
_DEVICES = ("driver", "count", "attributes", "capacity")
_CLAIM = ("name", "driver", "count", "selector")


def device_specs(data: Any, where: str) -> tuple[DeviceSpec, ...]:
    """nodePools[].devices: [{driver, count, attributes: {name: value}, capacity: {name: qty}}]."""
    out = []
    for i, entry in enumerate(listed(data, where, "{driver, count, attributes, capacity}")):
        at = f"{where}[{i}]"
        f = fields(entry, at, _DEVICES, ("driver", "count"))
        attributes = f.get("attributes") or {}
        capacity = f.get("capacity") or {}
        if not isinstance(attributes, dict) or not all(
                isinstance(v, (str, int, bool)) for v in attributes.values()):
            raise FieldError(f"{at}.attributes: expected a mapping of name to a string, number or bool")
        if not isinstance(capacity, dict):
            raise FieldError(f"{at}.capacity: expected a mapping of name to a quantity")
        for name, value in capacity.items():
            checked_amount("memory", value, f"{at}.capacity.{name}")
        out.append(DeviceSpec(_driver(f["driver"], f"{at}.driver"),
                              integer(f["count"], f"{at}.count", 1),
                              tuple(sorted((str(k), v) for k, v in attributes.items())),
                              tuple(sorted((str(k), str(v)) for k, v in capacity.items()))))
    return tuple(out)


def claim_specs(data: Any, where: str) -> tuple[ClaimSpec, ...]:
    """roles.<role>.claims: [{name, driver, count, selector}]."""
    out = []
    for i, entry in enumerate(listed(data, where, "{name, driver, count, selector}")):
        at = f"{where}[{i}]"
        f = fields(entry, at, _CLAIM, ("name", "driver"))
        selector = f.get("selector")
        out.append(ClaimSpec(dns(f["name"], f"{at}.name"), _driver(f["driver"], f"{at}.driver"),
                             integer(f.get("count", 1), f"{at}.count", 1),
                             text(selector, f"{at}.selector") if selector is not None else None))
    unique([c.name for c in out], where, "claim")
    return tuple(out)


def _driver(value: Any, where: str) -> str:
    name = text(value, where)
    if "." not in name or not all(dns(part, where) for part in name.split(".")):
        raise FieldError(f"{where}: a driver is a DNS subdomain, like gpu.nvidia.com: {name!r}")
    return name


# -- the objects ------------------------------------------------------------------------------

def device_classes(pools: Iterable[NodePool], jobs: Iterable[JobSpec]) -> list[Obj]:
    """A DeviceClass per driver a pool publishes or a claim names, selecting its devices."""
    drivers = {d.driver for p in pools for d in p.devices} | {
        c.driver for j in jobs for r in j.roles for c in r.claims}
    return [{"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": driver},
             "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}}
            for driver in sorted(drivers)]


def node_slices(pool: NodePool, node: str) -> list[Obj]:
    """The node's ResourceSlices: one per devices entry of its pool (whole GPUs
    and MIG slices of one driver are two entries, two pools)."""
    out = []
    for k, spec in enumerate(pool.devices):
        attributes = {k: {_kind(v): v} for k, v in spec.attributes}
        capacity = {k: {"value": v} for k, v in spec.capacity}
        devices = [{"name": f"dev-{i}",
                    "attributes": {**attributes, "index": {"int": i}},
                    **({"capacity": capacity} if capacity else {})} for i in range(spec.count)]
        out.append({"apiVersion": API, "kind": "ResourceSlice",
                    "metadata": {"name": f"{node}-{spec.driver}-{k}"},
                    "spec": {"driver": spec.driver, "nodeName": node,
                             "pool": {"name": f"{node}-{k}", "generation": 1, "resourceSliceCount": 1},
                             "devices": devices}})
    return out


def _kind(value: Any) -> str:
    return "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"


def template_name(job: JobSpec, role: RoleSpec, claim: ClaimSpec) -> str:
    return f"{job.name}-{role.name}-{claim.name}"


def claim_templates(job: JobSpec) -> list[Obj]:
    """A ResourceClaimTemplate per claim of each of the job's roles."""
    out = []
    for role in job.roles:
        for claim in role.claims:
            exactly: Obj = {"deviceClassName": claim.driver, "count": claim.count}
            if claim.selector:
                exactly["selectors"] = [{"cel": {"expression": claim.selector}}]
            out.append({"apiVersion": API, "kind": "ResourceClaimTemplate",
                        "metadata": {"name": template_name(job, role, claim),
                                     "namespace": job.namespace},
                        "spec": {"spec": {"devices": {"requests": [
                            {"name": claim.name, "exactly": exactly}]}}}})
    return out


def pod_claims(job: JobSpec, role: RoleSpec) -> list[Obj]:
    """The pod spec's resourceClaims: each from its template."""
    return [{"name": c.name, "resourceClaimTemplateName": template_name(job, role, c)}
            for c in role.claims]
