"""JobSet (jobset.x-k8s.io/v1alpha2): a gang of replicated Jobs, in the order
the JobSet controller starts them.

Each replicatedJob runs `replicas` Jobs, each with min(parallelism, completions)
pods at once; the replicatedJob name is the role (pod label
jobset.sigs.k8s.io/replicatedjob-name), the Job's index its replica (label
jobset.sigs.k8s.io/job-index). The PodGroup's subgroups have two levels, as
KAI gives them: a subgroup per replicatedJob, holding a subgroup per Job
(`<replicatedJob>-<index>`, the pods of that Job, its own minimum), so every
Job of every replicatedJob starts whole. With startupPolicy InOrder the
controller creates each replicatedJob only once the one before it is ready, and
a replicatedJob with `dependsOn` only once those it names are ready or
complete: a gang counting pods not yet created would wait forever, so each of
those replicatedJobs is a PodGroup of its own (a stage), and the replicatedJobs
started together are one gang.
"""
from __future__ import annotations

from collections.abc import Mapping

import attrs

from kaisched.api.workloadkinds import JOBSET
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
    in_role_order,
    named_object,
    podgroup_name,
    section,
    start_order,
)

# The pod's replicatedJob: the role, and the stage when they start in turn; its Job's index.
REPLICATED_JOB_LABEL = JOBSET.pods.role_label
JOB_INDEX_LABEL = JOBSET.pods.group_label


@attrs.frozen(slots=True)
class Role:
    """One replicatedJob: its Jobs, and the pods each runs at once."""

    name: str
    replicas: int
    per_job: int

    @property
    def min_member(self) -> int:
        return self.replicas * self.per_job


@attrs.frozen(slots=True)
class Stage:
    """ReplicatedJobs the controller starts together. part: "" for the gang of
    those started at once, else the replicatedJob started in turn."""

    part: str
    roles: tuple[Role, ...]


def jobset(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    problems: list[str] = []
    found = stages(owner, problems)
    if problems:
        return defaulted(owner, problems)
    return gang_of(owner, found, lineage)


def stages(obj: Owner, problems: list[str]) -> tuple[Stage, ...]:
    """The JobSet's gangs in start order (problems: its spec cannot be read)."""
    spec = section(obj, "spec", "spec", problems, required=True)
    jobs = spec.get("replicatedJobs")
    if not isinstance(jobs, list) or not jobs:
        if not problems:
            problems.append("spec.replicatedJobs must be a non-empty list")
        jobs = []
    order = start_order(spec, JOBSET.start_order, problems)
    together: list[Role] = []
    in_turn: list[Stage] = []
    for i, job in enumerate(jobs):
        role = _replicated_job(job, i, problems)
        if role is None:
            continue
        waits = isinstance(job, Mapping) and bool(job.get("dependsOn"))
        if order == JOBSET.start_order.staged or waits:
            in_turn.append(Stage(role.name, (role,)))
        else:
            together.append(role)
    first = (Stage("", in_role_order(together)),) if together else ()
    return first + tuple(in_turn)


def gang_of(named_by: Owner, found: tuple[Stage, ...], lineage: Lineage) -> GroupSpec:
    """The PodGroup of the pod's stage, named after `named_by` (the JobSet, or the
    TrainJob above it); one stage is the whole JobSet, named as such."""
    if len(found) == 1 and not found[0].part:
        return _spec(named_by, found[0], "", lineage)
    role = lineage.pod_labels().get(REPLICATED_JOB_LABEL)
    for stage in found:
        if any(sg.name == str(role).lower() for sg in stage.roles):
            return _spec(named_by, stage, dns_part(stage.part) if stage.part else "", lineage)
    return defaulted(named_by, [f"the pod's label {REPLICATED_JOB_LABEL}={role!r} names no "
                                "replicatedJob of the JobSet" if role else
                                f"the pod has no label {REPLICATED_JOB_LABEL}, and the JobSet "
                                "starts its replicatedJobs in turn"])


def _spec(named_by: Owner, stage: Stage, part: str, lineage: Lineage) -> GroupSpec:
    tree: list[SubGroup] = []
    for role in stage.roles:
        tree.append(SubGroup(role.name))
        tree += [SubGroup(job_leaf(role.name, i), role.per_job, parent=role.name)
                 for i in range(role.replicas)]
    labels = lineage.pod_labels()
    role_of_pod, index = labels.get(REPLICATED_JOB_LABEL), labels.get(JOB_INDEX_LABEL)
    leaf = job_leaf(str(role_of_pod).lower(), str(index)) if role_of_pod and index else None
    return attrs.evolve(base(named_by), name=podgroup_name(named_by, part),
                        min_member=max(1, sum(sg.min_member for sg in stage.roles)),
                        subgroups=tuple(sg for sg in tree if sg.parent or any(
                            t.parent == sg.name for t in tree)),
                        pod_subgroup=leaf)


def job_leaf(replicated_job: str, index: int | str) -> str:
    """The subgroup of one Job of a replicatedJob."""
    return dns_part(f"{replicated_job}-{index}")


def _replicated_job(job: object, index: int, problems: list[str]) -> Role | None:
    path = f"spec.replicatedJobs[{index}]"
    named = named_object(job, path, problems)
    if named is None:
        return None
    job, name = named
    replicas = count(job.get("replicas"), f"{path}.replicas", 1, problems)
    template = section(job, "template", f"{path}.template", problems)
    job_spec = section(template, "spec", f"{path}.template.spec", problems)
    parallelism = count(job_spec.get("parallelism"), f"{path}.template.spec.parallelism", 1,
                        problems)
    # Without completions a Job runs `parallelism` pods until one succeeds: no cap.
    completions = count(job_spec.get("completions"), f"{path}.template.spec.completions",
                        parallelism, problems)
    return Role(name.lower(), replicas, min(parallelism, completions))
