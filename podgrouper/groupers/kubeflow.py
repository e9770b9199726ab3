"""Kubeflow training jobs: PyTorchJob, TFJob, XGBoostJob, JAXJob and PaddleJob
(kubeflow.org/v1, training operator) and MPIJob (kubeflow.org/v2beta1, MPI
operator).

The gang is every replica of every role; `runPolicy.schedulingPolicy` (the
field the training operator hands to gang schedulers) may override its size,
queue and priority class.
"""
from __future__ import annotations

from collections.abc import Mapping

import attrs

from kaisched.api import workloadkinds as K
from kaisched.api.workloadkinds import LAUNCHER, MASTER, WORKER
from podgrouper.groupers.spec import (
    LEADING_ROLES,
    NO_POD,
    GroupSpec,
    Lineage,
    Owner,
    SubGroup,
    an_object,
    base,
    count,
    defaulted,
    in_role_order,
    metadata,
    owner_labels,
    owner_spec,
    positive_override,
    section,
    start_order,
)


def pytorch_job(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    """Master + Workers; with elasticPolicy.minReplicas the gang is minReplicas
    pods in all, the master among them (master 1, workers minReplicas - 1)."""
    return _elastic_job(owner, K.PYTORCH_JOB.replica_specs)


def paddle_job(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    """Master + Workers, elastic as PyTorchJob (elasticPolicy.minReplicas)."""
    return _elastic_job(owner, K.PADDLE_JOB.replica_specs)


def xgboost_job(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    """Master + Workers (Rabit tracker on the master): every replica."""
    return _plain_job(owner, K.XGBOOST_JOB.replica_specs)


def jax_job(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    """Workers (process 0 coordinates): every replica."""
    return _plain_job(owner, K.JAX_JOB.replica_specs)


def _plain_job(owner: Owner, field: str, rank: tuple[str, ...] = LEADING_ROLES) -> GroupSpec:
    spec, problems = owner_spec(owner)
    roles = _replica_roles(spec, field, {}, 1, problems, rank)
    if problems:
        return defaulted(owner, problems)
    return _overridden(_gang(owner, spec, roles), spec, [])


def _elastic_job(owner: Owner, field: str) -> GroupSpec:
    spec, problems = owner_spec(owner)
    roles = _replica_roles(spec, field, {}, 1, problems)
    if problems:
        return defaulted(owner, problems)
    group = _gang(owner, spec, roles)
    replicas = {sg.name: sg.min_member for sg in roles}
    warnings: list[str] = []
    elastic = section(spec, "elasticPolicy", "spec.elasticPolicy", warnings)
    min_replicas = _non_negative(elastic.get("minReplicas"), "spec.elasticPolicy.minReplicas",
                                 warnings)
    if min_replicas is not None:
        # minReplicas counts the whole gang, master included (the training
        # operator's rendezvous and KAI read it so).
        masters = sum(sg.min_member for sg in group.subgroups if sg.name == MASTER)
        group = attrs.evolve(group, min_member=max(1, min_replicas, masters))
    group = _overridden(group, spec, warnings)
    # The master's subgroup is its replicas; the workers make up the rest of the
    # minimum (minReplicas, or minAvailable over it), as KAI builds them.
    masters = sum(sg.min_member for sg in group.subgroups if sg.name == MASTER)
    return attrs.evolve(group, subgroups=tuple(
        attrs.evolve(sg, min_member=min(max(group.min_member - masters, 0), replicas[sg.name]))
        if sg.name == WORKER else sg for sg in group.subgroups))


def tf_job(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    """Chief / PS / Worker / Evaluator: every replica of every role."""
    # In start order: the chief (or legacy master) coordinates, ps serve the workers.
    return _plain_job(owner, K.TF_JOB.replica_specs, K.TF_JOB.roles)


def mpi_job(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    """Launcher + Workers (the operator defaults Launcher to 1 replica, Worker to 0).

    With launcherCreationPolicy WaitForWorkersReady the operator creates the
    launcher only once every worker is ready: until the launcher pod exists
    the gang is the workers (the launcher's subgroup asks for 0), then it is
    launcher + workers, as KAI reads it -- the launcher is part of the gang
    once there is one to place."""
    spec, problems = owner_spec(owner)
    roles = _replica_roles(spec, K.MPI_JOB.replica_specs, {LAUNCHER.capitalize(): 1}, 0,
                           problems)
    policy = start_order(spec, K.MPI_JOB.start_order, problems)
    if problems:
        return defaulted(owner, problems)
    if policy == K.MPI_JOB.start_order.staged and not _launcher_exists(lineage):
        roles = tuple(attrs.evolve(sg, min_member=0) if sg.name == LAUNCHER else sg
                      for sg in roles)
    return _overridden(_gang(owner, spec, roles), spec, [])


def _launcher_exists(lineage: Lineage) -> bool:
    """The pod being grouped is the launcher, or the job has a launcher pod
    that is not being deleted."""
    label = K.MPI_JOB.pods.role_label
    return any(owner_labels(pod).get(label) == LAUNCHER
               and not metadata(pod).get("deletionTimestamp")
               for pod in (lineage.pod, *lineage.siblings))


def _replica_roles(spec: Mapping[str, object], field: str, defaults: Mapping[str, int],
                   default: int, problems: list[str],
                   rank: tuple[str, ...] = LEADING_ROLES) -> tuple[SubGroup, ...]:
    """One subgroup per replica type (the map key, lower-cased as the operators
    label the pods), its size the replicas, defaulted as the operator does."""
    path = f"spec.{field}"
    specs = section(spec, field, path, problems, required=True)
    if not specs and not problems:
        problems.append(f"{path} has no replica types")
    roles = []
    for role, replica_spec in specs.items():
        where = f"{path}.{role}"
        replica_spec = an_object(replica_spec, where, problems)
        if replica_spec is None:
            continue
        replicas = count(replica_spec.get("replicas"), f"{where}.replicas",
                         defaults.get(str(role), default), problems)
        roles.append(SubGroup(str(role).lower(), replicas))
    return in_role_order(roles, rank)


def _gang(owner: Owner, spec: Mapping[str, object],
          roles: tuple[SubGroup, ...]) -> GroupSpec:
    group = base(owner)
    policy = _scheduling_policy(spec, [])
    queue, priority = policy.get("queue"), policy.get("priorityClass")
    return attrs.evolve(
        group,
        min_member=max(1, sum(sg.min_member for sg in roles)),
        subgroups=roles,
        queue=group.queue or (str(queue) if queue else None),
        priority_class_name=str(priority) if priority else None,
    )


def _overridden(group: GroupSpec, spec: Mapping[str, object], warnings: list[str]) -> GroupSpec:
    available = _available(spec, warnings)
    if available is not None:
        group = group.with_min_member(available)
    return group.warn(*warnings)


def _available(spec: Mapping[str, object], warnings: list[str]) -> int | None:
    policy = _scheduling_policy(spec, warnings)
    return positive_override(policy.get("minAvailable"),
                             "spec.runPolicy.schedulingPolicy.minAvailable", warnings)


def _scheduling_policy(spec: Mapping[str, object], warnings: list[str]) -> Mapping[str, object]:
    run_policy = section(spec, "runPolicy", "spec.runPolicy", warnings)
    return section(run_policy, "schedulingPolicy", "spec.runPolicy.schedulingPolicy", warnings)


def _non_negative(value: object, path: str, warnings: list[str]) -> int | None:
    problems: list[str] = []
    result = count(value, path, -1, problems)
    if problems:
        warnings.extend(f"{p}; ignored" for p in problems)
        return None
    return None if result < 0 else result
