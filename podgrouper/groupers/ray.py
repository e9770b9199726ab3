"""KubeRay (ray.io/v1): RayCluster, RayJob through its spec.rayClusterSpec, and
RayService through the RayCluster it runs.

The gang is the head plus every worker group's minReplicas (x numOfHosts for
multi-host groups); each worker group is its own subgroup with its own
minimum (pods carry ray.io/node-type head|worker and ray.io/group, the worker
group's name), so a cluster never starts without its GPU group's minimum.
A multi-host worker group (numOfHosts > 1: a TPU slice, a multi-node
replica) is two levels: each replica is a subgroup of numOfHosts pods that
start together (pods labelled ray.io/worker-group-replica-index by KubeRay
1.5+), and the worker group needs minReplicas of its replicas whole. Pods of
an older KubeRay carry no replica index: their group stays one subgroup.
A RayService makes a new RayCluster on an upgrade and keeps the old one
serving until the new one is ready: each cluster is its own gang, named after it.
"""
from __future__ import annotations

from collections.abc import Mapping

import attrs

from kaisched.api.workloadkinds import HEAD, RAY_CLUSTER, WORKER
from podgrouper.groupers.spec import (
    NO_POD,
    GroupSpec,
    Lineage,
    Owner,
    SubGroup,
    a_name,
    an_object,
    base,
    count,
    defaulted,
    dns_part,
    owner_labels,
    owner_spec,
    podgroup_name,
    section,
)

REPLICA_INDEX_LABEL = "ray.io/worker-group-replica-index"


@attrs.frozen(slots=True)
class WorkerGroup:
    name: str
    min_replicas: int
    replicas: int
    hosts: int


def ray_cluster(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    spec, problems = owner_spec(owner)
    return _cluster_gang(owner, spec, "spec", problems, lineage)


def ray_job(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    """A RayJob that names an existing cluster (clusterSelector) only adds its
    submitter pod: the default grouping, not a problem."""
    spec, problems = owner_spec(owner)
    if not problems and spec.get("rayClusterSpec") is None and spec.get("clusterSelector"):
        return base(owner)
    cluster = section(spec, "rayClusterSpec", "spec.rayClusterSpec", problems,
                      required=not problems)
    return _cluster_gang(owner, cluster, "spec.rayClusterSpec", problems, lineage)


def ray_service(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    """The gang of the RayCluster the pod belongs to, named after that cluster;
    without it, the gang spec.rayClusterConfig describes, named after the service."""
    cluster = lineage.nearest(RAY_CLUSTER)
    problems: list[str] = []
    if cluster is not None:
        spec = section(cluster, "spec", "spec", problems, required=True)
        group = _cluster_gang(owner, spec, "RayCluster spec", problems, lineage)
        return attrs.evolve(group, name=podgroup_name(cluster)) if not group.problems else group
    spec = section(owner, "spec", "spec", problems, required=True)
    config = section(spec, "rayClusterConfig", "spec.rayClusterConfig", problems,
                     required=not problems)
    return _cluster_gang(owner, config, "spec.rayClusterConfig", problems, lineage)


def _cluster_gang(owner: Owner, cluster: Mapping[str, object], path: str,
                  problems: list[str], lineage: Lineage) -> GroupSpec:
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
    indexed = any(REPLICA_INDEX_LABEL in owner_labels(pod)
                  for pod in (lineage.pod, *lineage.siblings))
    sizes: dict[str, int] = {HEAD: 1}         # worker groups: named after their groupName
    for group in workers:
        sizes[group.name] = sizes.get(group.name, 0) + group.min_replicas * group.hosts
    tree: list[SubGroup] = []
    for name, size in sizes.items():
        multi = [g for g in workers if g.name == name and g.hosts > 1]
        if not (indexed and len(multi) == 1):
            tree.append(SubGroup(name, size))
            continue
        group = multi[0]
        tree.append(SubGroup(name, min_sub_group=group.min_replicas))
        tree += [SubGroup(f"{name}-{i}", group.hosts, parent=name)
                 for i in range(max(group.replicas, group.min_replicas))]
    labels = lineage.pod_labels()
    role, index = worker_group_of(labels), labels.get(REPLICA_INDEX_LABEL)
    mine = f"{role}-{index}" if role and index is not None and \
        any(sg.parent == role for sg in tree) else None
    return attrs.evolve(base(owner), min_member=sum(sizes.values()), subgroups=tuple(tree),
                        pod_subgroup=mine)


def _worker_group(item: object, path: str, problems: list[str]) -> WorkerGroup:
    group = an_object(item, path, problems)
    if group is None:
        return WorkerGroup("", 0, 0, 1)
    min_replicas = count(group.get("minReplicas"), f"{path}.minReplicas", 0, problems)
    replicas = count(group.get("replicas"), f"{path}.replicas", min_replicas, problems)
    hosts = count(group.get("numOfHosts"), f"{path}.numOfHosts", 1, problems)
    name = a_name(group, "groupName", path, problems)
    if name is None:
        return WorkerGroup("", 0, 0, 1)
    if group.get("suspend") is True:        # a suspended worker group runs no pods
        return WorkerGroup(worker_role(name), 0, 0, hosts)
    return WorkerGroup(worker_role(name), min_replicas, replicas, hosts)


def worker_group_of(labels: Mapping[str, object]) -> str | None:
    """A Ray pod's worker group as a subgroup name (None for the head or a stranger)."""
    naming = RAY_CLUSTER.pods
    group = labels.get(naming.group_label)
    if labels.get(naming.role_label) != WORKER or not isinstance(group, str) or not group:
        return None
    return worker_role(group)


def worker_role(group_name: str) -> str:
    """A worker group's subgroup name (a DNS label; never the head's)."""
    role = dns_part(group_name)
    return f"{role}-workers" if role == HEAD else role
