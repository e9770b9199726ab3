"""Knative Serving (serving.knative.dev/v1): a Service makes a Configuration,
which makes a Revision per change of its template; each Revision runs its
pods through a Deployment.

Each Revision is its own gang, PodGroup pg-<revision>-<uid>: its
`autoscaling.knative.dev/min-scale` pods (the minimum the autoscaler keeps;
1 when unset or 0, as a revision scaled from zero starts one pod). The
annotation is read from the Revision above the pod, else from the template of
the Service or Configuration.
"""
from __future__ import annotations

import attrs

from kaisched.api.workloadkinds import KNATIVE_REVISION
from podgrouper.groupers.spec import (
    NO_POD,
    GroupSpec,
    Lineage,
    Owner,
    base,
    defaulted,
    owner_annotations,
    podgroup_name,
    section,
)

MIN_SCALE = "autoscaling.knative.dev/min-scale"
_OLD_MIN_SCALE = "autoscaling.knative.dev/minScale"      # the spelling before Knative 0.19


def knative(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    problems: list[str] = []
    revision = lineage.nearest(KNATIVE_REVISION)
    if revision is None and str(owner.get("kind")) == KNATIVE_REVISION.kind:
        revision = owner
    if revision is not None:
        annotations, where, named = owner_annotations(revision), "Revision annotation", revision
    else:
        spec = section(owner, "spec", "spec", problems, required=True)
        template = section(spec, "template", "spec.template", problems)
        meta = section(template, "metadata", "spec.template.metadata", problems)
        annotations = section(meta, "annotations", "spec.template.metadata.annotations", problems)
        where, named = "spec.template annotation", owner
    raw = annotations.get(MIN_SCALE, annotations.get(_OLD_MIN_SCALE))
    scale = 0
    if raw is not None:
        text = str(raw).strip()
        if not text.isdecimal():
            problems.append(f"{where} {MIN_SCALE} must be a non-negative integer, got {raw!r}")
        else:
            scale = int(text)
    if problems:
        return defaulted(owner, problems)
    return attrs.evolve(base(owner), name=podgroup_name(named), min_member=max(1, scale))
