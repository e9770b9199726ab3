"""KubeRay (ray.io/v1): RayCluster, RayJob through its spec.rayClusterSpec, and
RayService through the RayCluster it runs.

The gang is the head plus every worker group's minReplicas (x numOfHosts for
multi-host groups); each worker group is its own subgroup with its own
minimum (pods carry ray.io/node-type head|worker and ray.io/group, the worker
group's name), so a cluster never starts without its GPU group's minimum.
A RayService makes a new RayCluster on an upgrade and keeps the old one
serving until the new one is ready: each cluster is its own gang, named after it.
"""
from __future__ import annotations

from collections.abc import Mapping

import attrs

from kaisched.api.workloadkinds import HEAD, RAY_CLUSTER
from podgrouper.groupers.spec import (
    NO_POD,
    GroupSpec,
    Lineage,
    Owner,
    SubGroup,
    base,
    count,
    defaulted,
    dns_part,
    podgroup_name,
    section,
)


def ray_cluster(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    problems: list[str] = []
    spec = section(owner, "spec", "spec", problems, required=True)
    return _cluster_gang(owner, spec, "spec", problems)


def ray_job(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    """A RayJob that names an existing cluster (clusterSelector) only adds its
    submitter pod: the default grouping, not a problem."""
    problems: list[str] = []
    spec = section(owner, "spec", "spec", problems, required=True)
    if not problems and spec.get("rayClusterSpec") is None and spec.get("clusterSelector"):
        return base(owner)
    cluster = section(spec, "rayClusterSpec", "spec.rayClusterSpec", problems,
                      required=not problems)
    return _cluster_gang(owner, cluster, "spec.rayClusterSpec", problems)


def ray_service(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    """The gang of the RayCluster the pod belongs to, named after that cluster;
    without it, the gang spec.rayClusterConfig describes, named after the service."""
    cluster = lineage.nearest(RAY_CLUSTER)
    problems: list[str] = []
    if cluster is not None:
        spec = section(cluster, "spec", "spec", problems, required=True)
        group = _cluster_gang(owner, spec, "RayCluster spec", problems)
        return attrs.evolve(group, name=podgroup_name(cluster)) if not group.problems else group
    spec = section(owner, "spec", "spec", problems, required=True)
    config = section(spec, "rayClusterConfig", "spec.rayClusterConfig", problems,
                     required=not problems)
    return _cluster_gang(owner, config, "spec.rayClusterConfig", problems)


def _cluster_gang(owner: Owner, cluster: Mapping[str, object], path: str,
                  problems: list[str]) -> GroupSpec:
    if not problems:
        section(cluster, "headGroupSpec", f"{path}.headGroupSpec", problems, required=True)
    groups = cluster.get("workerGroupSpecs") or []
    if not isinstance(groups, list):
        problems.append(f"{path}.workerGroupSpecs must be a list")
        groups = []
    workers = [_worker_group(group, f"{path}.workerGroupSpecs[{i}]", problems)
               for i, group in enumerate(groups)]
    if problems:
        return defaulted(owner, problems)
    subgroups: dict[str, int] = {HEAD: 1}         # worker groups: named after their groupName
    for name, size in workers:
        subgroups[name] = subgroups.get(name, 0) + size
    return attrs.evolve(base(owner), min_member=sum(subgroups.values()),
                        subgroups=tuple(SubGroup(n, m) for n, m in subgroups.items()))


def _worker_group(group: object, path: str, problems: list[str]) -> tuple[str, int]:
    if not isinstance(group, Mapping):
        problems.append(f"{path} must be an object")
        return ("", 0)
    min_replicas = count(group.get("minReplicas"), f"{path}.minReplicas", 0, problems)
    hosts = count(group.get("numOfHosts"), f"{path}.numOfHosts", 1, problems)
    name = group.get("groupName")
    if not isinstance(name, str) or not name:
        problems.append(f"{path}.groupName is missing")
        return ("", 0)
    # A suspended worker group runs no pods.
    return (worker_role(name), 0 if group.get("suspend") is True else min_replicas * hosts)


def worker_role(group_name: str) -> str:
    """A worker group's subgroup name (a DNS label; never the head's)."""
    role = dns_part(group_name)
    return f"{role}-workers" if role == HEAD else role
