"""KubeRay (ray.io/v1): RayCluster, and RayJob through its spec.rayClusterSpec.

The gang is the head plus every worker group's minReplicas (x numOfHosts for
multi-host groups); pods carry ray.io/node-type head|worker.
"""
from __future__ import annotations

from collections.abc import Mapping

import attrs

from podgrouper.groupers.spec import (
    GroupSpec, Owner, SubGroup, base, count, defaulted, section,
)


def ray_cluster(owner: Owner) -> GroupSpec:
    problems: list[str] = []
    spec = section(owner, "spec", "spec", problems, required=True)
    return _cluster_gang(owner, spec, "spec", problems)


def ray_job(owner: Owner) -> GroupSpec:
    """A RayJob that names an existing cluster (clusterSelector) only adds its
    submitter pod: the default grouping, not a problem."""
    problems: list[str] = []
    spec = section(owner, "spec", "spec", problems, required=True)
    if not problems and spec.get("rayClusterSpec") is None and spec.get("clusterSelector"):
        return base(owner)
    cluster = section(spec, "rayClusterSpec", "spec.rayClusterSpec", problems,
                      required=not problems)
    return _cluster_gang(owner, cluster, "spec.rayClusterSpec", problems)


def _cluster_gang(owner: Owner, cluster: Mapping[str, object], path: str,
                  problems: list[str]) -> GroupSpec:
    if not problems:
        section(cluster, "headGroupSpec", f"{path}.headGroupSpec", problems, required=True)
    groups = cluster.get("workerGroupSpecs") or []
    if not isinstance(groups, list):
        problems.append(f"{path}.workerGroupSpecs must be a list")
        groups = []
    workers = sum(_worker_min(group, f"{path}.workerGroupSpecs[{i}]", problems)
                  for i, group in enumerate(groups))
    if problems:
        return defaulted(owner, problems)
    subgroups = (SubGroup("head", 1),) + ((SubGroup("worker", workers),) if groups else ())
    return attrs.evolve(base(owner), min_member=1 + workers, subgroups=subgroups)


def _worker_min(group: object, path: str, problems: list[str]) -> int:
    if not isinstance(group, Mapping):
        problems.append(f"{path} must be an object")
        return 0
    min_replicas = count(group.get("minReplicas"), f"{path}.minReplicas", 0, problems)
    hosts = count(group.get("numOfHosts"), f"{path}.numOfHosts", 1, problems)
    # A suspended worker group runs no pods.
    return 0 if group.get("suspend") is True else min_replicas * hosts
