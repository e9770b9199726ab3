"""Which grouper serves which owner, and the overrides every kind shares."""
from __future__ import annotations

from kaisched.api import labels as L
from podgrouper.groupers import jobset, kubeflow, ray, workload
from podgrouper.groupers.spec import Grouper, GroupSpec, Owner, owner_annotations, positive_override

# (API group, kind): the version is left out so that e.g. a kubeflow.org/v1 MPIJob
# (training operator) and a kubeflow.org/v2beta1 one (MPI operator) share a grouper.
GroupKind = tuple[str, str]
Registry = dict[GroupKind, Grouper]


def builtin_groupers() -> Registry:
    return {
        ("kubeflow.org", "PyTorchJob"): kubeflow.pytorch_job,
        ("kubeflow.org", "TFJob"): kubeflow.tf_job,
        ("kubeflow.org", "MPIJob"): kubeflow.mpi_job,
        ("jobset.x-k8s.io", "JobSet"): jobset.jobset,
        ("ray.io", "RayCluster"): ray.ray_cluster,
        ("ray.io", "RayJob"): ray.ray_job,
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


def group_owner(owner: Owner, grouper: Grouper) -> GroupSpec:
    """Run the grouper, then the kaisched.io/min-member annotation on the owner,
    which overrides minMember for every kind."""
    spec = grouper(owner)
    warnings: list[str] = []
    override = positive_override(owner_annotations(owner).get(L.MIN_MEMBER_ANNOTATION),
                                 f"annotation {L.MIN_MEMBER_ANNOTATION}", warnings)
    if override is not None:
        spec = spec.with_min_member(override)
    return spec.warn(*warnings)
