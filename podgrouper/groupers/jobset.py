"""JobSet (jobset.x-k8s.io/v1alpha2): a gang of replicated Jobs.

Each replicatedJob runs `replicas` Jobs, each with min(parallelism, completions)
pods at once; the replicatedJob name is the role (pod label
jobset.sigs.k8s.io/replicatedjob-name).
"""
from __future__ import annotations

from collections.abc import Mapping

import attrs

from podgrouper.groupers.spec import (
    GroupSpec, Owner, SubGroup, base, count, defaulted, in_role_order, section,
)


def jobset(owner: Owner) -> GroupSpec:
    problems: list[str] = []
    spec = section(owner, "spec", "spec", problems, required=True)
    jobs = spec.get("replicatedJobs")
    if not isinstance(jobs, list) or not jobs:
        if not problems:
            problems.append("spec.replicatedJobs must be a non-empty list")
        jobs = []
    roles = [_replicated_job(job, i, problems) for i, job in enumerate(jobs)]
    if problems:
        return defaulted(owner, problems)
    subgroups = in_role_order(sg for sg in roles if sg is not None)
    return attrs.evolve(base(owner), min_member=max(1, sum(sg.min_member for sg in subgroups)),
                        subgroups=subgroups)


def _replicated_job(job: object, index: int, problems: list[str]) -> SubGroup | None:
    path = f"spec.replicatedJobs[{index}]"
    if not isinstance(job, Mapping):
        problems.append(f"{path} must be an object")
        return None
    name = job.get("name")
    if not isinstance(name, str) or not name:
        problems.append(f"{path}.name is missing")
        return None
    replicas = count(job.get("replicas"), f"{path}.replicas", 1, problems)
    template = section(job, "template", f"{path}.template", problems)
    job_spec = section(template, "spec", f"{path}.template.spec", problems)
    parallelism = count(job_spec.get("parallelism"), f"{path}.template.spec.parallelism", 1,
                        problems)
    # Without completions a Job runs `parallelism` pods until one succeeds: no cap.
    completions = count(job_spec.get("completions"), f"{path}.template.spec.completions",
                        parallelism, problems)
    return SubGroup(name.lower(), replicas * min(parallelism, completions))
