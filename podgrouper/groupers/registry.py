"""Which grouper serves which owner, and the overrides every kind shares."""
from __future__ import annotations

from collections.abc import Mapping

import attrs

from kaisched.api import labels as L
from kaisched.api import workloadkinds as K
from kaisched.api.workloadkinds import GroupKind, WorkloadKind, group_kind
from podgrouper.groupers import argo, grove, jobset, knative, kubeflow, lws, ray, trainer, workload
from podgrouper.groupers.spec import (
    NO_POD,
    Grouper,
    GroupSpec,
    Lineage,
    Owner,
    owner_annotations,
    owner_labels,
    positive_override,
)

# Keyed by (API group, kind): every version of a kind shares its grouper.
Registry = dict[GroupKind, Grouper]

# kaisched's priority class label, then the operators' own (KubeRay's), honoured alike.
_PRIORITY_LABELS = (L.PRIORITY_CLASS_LABEL,
                    *dict.fromkeys(k.priority_label for k in K.KINDS if k.priority_label))


def registry_of(*entries: tuple[WorkloadKind, Grouper]) -> Registry:
    """Groupers registered against the table of workload kinds: a kind the
    table does not have, or one registered twice, is a bug in the caller."""
    out: Registry = {}
    for kind, grouper in entries:
        if K.lookup(*kind.group_kind) != kind:
            raise ValueError(f"no workload kind {kind} in kaisched.api.workloadkinds: "
                             "add it to the table before its grouper")
        if kind.group_kind in out:
            raise ValueError(f"{kind} has two groupers")
        out[kind.group_kind] = grouper
    return out


def builtin_groupers() -> Registry:
    return registry_of(
        (K.TRAIN_JOB, trainer.train_job),
        (K.PYTORCH_JOB, kubeflow.pytorch_job),
        (K.TF_JOB, kubeflow.tf_job),
        (K.XGBOOST_JOB, kubeflow.xgboost_job),
        (K.JAX_JOB, kubeflow.jax_job),
        (K.PADDLE_JOB, kubeflow.paddle_job),
        (K.MPI_JOB, kubeflow.mpi_job),
        (K.JOBSET, jobset.jobset),
        (K.LEADER_WORKER_SET, lws.leader_worker_set),
        (K.RAY_CLUSTER, ray.ray_cluster),
        (K.RAY_JOB, ray.ray_job),
        (K.RAY_SERVICE, ray.ray_service),
        (K.POD_CLIQUE_SET, grove.pod_clique_set),
        (K.POD_CLIQUE, grove.pod_clique_set),
        (K.KNATIVE_SERVICE, knative.knative),
        (K.KNATIVE_CONFIGURATION, knative.knative),
        (K.KNATIVE_REVISION, knative.knative),
        (K.WORKFLOW, argo.workflow),
        (K.CRON_WORKFLOW, argo.workflow),
        (K.JOB, workload.job),
        (K.CRON_JOB, workload.cron_job),
        (K.DEPLOYMENT, workload.default_grouper),
        (K.STATEFUL_SET, workload.default_grouper),
        (K.REPLICA_SET, workload.default_grouper),
        (K.POD, workload.default_grouper),
    )


def pick(registry: Registry, owner: Owner) -> Grouper:
    """The owner's grouper by API group and kind; the default one for unknown kinds."""
    key = group_kind(str(owner.get("apiVersion") or ""), str(owner.get("kind") or ""))
    return registry.get(key, workload.default_grouper)


def group_owner(owner: Owner, grouper: Grouper, lineage: Lineage = NO_POD) -> GroupSpec:
    """Run the grouper, then what every kind shares: the kaisched.io/min-member
    annotation on the top owner overrides minMember; the queue and priority
    class labels on the pod or any owner, the nearest first, override the
    grouper's; the pod's own priorityClassName comes after the labels."""
    spec = grouper(owner, lineage)
    warnings: list[str] = []
    override = positive_override(owner_annotations(owner).get(L.MIN_MEMBER_ANNOTATION),
                                 f"annotation {L.MIN_MEMBER_ANNOTATION}", warnings)
    if override is not None:
        spec = spec.with_min_member(override)
    queue = nearest_label(lineage, L.QUEUE_LABELS)     # kaisched's, else KAI's
    pod_spec = lineage.pod.get("spec")
    own_class = pod_spec.get("priorityClassName") if isinstance(pod_spec, Mapping) else None
    priority = nearest_label(lineage, _PRIORITY_LABELS) or own_class
    spec = attrs.evolve(spec, queue=queue or spec.queue,
                        priority_class_name=str(priority) if priority else spec.priority_class_name)
    return spec.warn(*warnings)


def nearest_label(lineage: Lineage, keys: tuple[str, ...]) -> str | None:
    """The first of `keys` set on the pod, else on its owners, the nearest first."""
    for obj in (lineage.pod, *lineage.owners):
        labels = owner_labels(obj)
        for key in keys:
            value = labels.get(key)
            if isinstance(value, str) and value:
                return value
    return None
