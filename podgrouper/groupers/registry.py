"""Which grouper serves which owner, and the overrides every kind shares."""
from __future__ import annotations

from collections.abc import Mapping

import attrs

from kaisched.api import labels as L
from podgrouper.groupers import argo, jobset, knative, kubeflow, lws, ray, trainer, workload
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

# (API group, kind): the version is left out so that e.g. a kubeflow.org/v1 MPIJob
# (training operator) and a kubeflow.org/v2beta1 one (MPI operator) share a grouper.
GroupKind = tuple[str, str]
Registry = dict[GroupKind, Grouper]

# KubeRay's own priority label, honoured as kaisched's wherever it is set.
RAY_PRIORITY_LABEL = "ray.io/priority-class-name"
_PRIORITY_LABELS = (L.PRIORITY_CLASS_LABEL, RAY_PRIORITY_LABEL)


def builtin_groupers() -> Registry:
    return {
        ("trainer.kubeflow.org", "TrainJob"): trainer.train_job,
        ("kubeflow.org", "PyTorchJob"): kubeflow.pytorch_job,
        ("kubeflow.org", "TFJob"): kubeflow.tf_job,
        ("kubeflow.org", "XGBoostJob"): kubeflow.xgboost_job,
        ("kubeflow.org", "JAXJob"): kubeflow.jax_job,
        ("kubeflow.org", "PaddleJob"): kubeflow.paddle_job,
        ("kubeflow.org", "MPIJob"): kubeflow.mpi_job,
        ("jobset.x-k8s.io", "JobSet"): jobset.jobset,
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): lws.leader_worker_set,
        ("ray.io", "RayCluster"): ray.ray_cluster,
        ("ray.io", "RayJob"): ray.ray_job,
        ("ray.io", "RayService"): ray.ray_service,
        ("serving.knative.dev", "Service"): knative.knative,
        ("serving.knative.dev", "Configuration"): knative.knative,
        ("serving.knative.dev", "Revision"): knative.knative,
        ("argoproj.io", "Workflow"): argo.workflow,
        ("argoproj.io", "CronWorkflow"): argo.workflow,
        ("batch", "Job"): workload.job,
        ("batch", "CronJob"): workload.cron_job,
        ("apps", "Deployment"): workload.default_grouper,
        ("apps", "StatefulSet"): workload.default_grouper,
        ("apps", "ReplicaSet"): workload.default_grouper,
        ("", "Pod"): workload.default_grouper,
    }


def group_kind(api_version: str, kind: str) -> GroupKind:
    return (api_version.rpartition("/")[0], kind)


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
