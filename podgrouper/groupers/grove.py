"""Grove (grove.io, NVIDIA Dynamo's): a PodCliqueSet makes PodCliques, which
make the pods; the gang the operator asks for is a PodGang
(scheduler.grove.io/v1alpha1), which each pod names by its label
grove.io/podgang.

A PodGang lists its podgroups, each with the pods it references (a
PodClique's pods, or part of them) and `minReplicas`, the fewest of them that
must run. As KAI reads it: one PodGroup per PodGang, named after it, whose
minimum is the sum of its podgroups' minReplicas, with one subgroup per
podgroup (its minReplicas); a pod belongs to the podgroup that references it
(else the one named like its PodClique). spec.priorityClassName gives the
priority. The PodGang is read by the controller and handed in as
`lineage.gang`; until it exists the pod is not grouped.
"""
from __future__ import annotations

from collections.abc import Mapping

import attrs

from kaisched.api.workloadkinds import POD_CLIQUE_SET
from podgrouper.groupers.spec import (
    NO_POD,
    GroupSpec,
    Lineage,
    Owner,
    SubGroup,
    base,
    defaulted,
    dns_part,
    metadata,
    named_object,
    podgroup_name,
    section,
)

GANG_LABEL = POD_CLIQUE_SET.pods.gang_label
CLIQUE_LABEL = POD_CLIQUE_SET.pods.role_label


def pod_clique_set(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    gang = lineage.gang
    if gang is None:
        return defaulted(owner, [f"the pod has no label {GANG_LABEL} naming its PodGang"])
    problems: list[str] = []
    spec = section(gang, "spec", "PodGang spec", problems, required=True)
    groups = spec.get("podgroups")
    if not isinstance(groups, list) or not groups:
        problems.append("PodGang spec.podgroups must be a non-empty list")
        groups = []
    subgroups: list[SubGroup] = []
    members: dict[str, str] = {}            # pod name -> its subgroup
    for i, group in enumerate(groups):
        found = _podgroup(group, f"PodGang spec.podgroups[{i}]", str(metadata(gang).get(
            "namespace") or ""), problems)
        if found is None:
            continue
        sg, pods = found
        subgroups.append(sg)
        members.update(dict.fromkeys(pods, sg.name))
    if problems:
        return defaulted(owner, problems)
    pod = metadata(lineage.pod)
    clique = lineage.pod_labels().get(CLIQUE_LABEL)
    mine = members.get(str(pod.get("name") or "")) or (dns_part(str(clique)) if clique else None)
    priority = spec.get("priorityClassName")
    return attrs.evolve(base(owner), name=podgroup_name(gang),
                        min_member=max(1, sum(sg.min_member for sg in subgroups)),
                        subgroups=tuple(subgroups), pod_subgroup=mine,
                        priority_class_name=str(priority) if priority else None)


def _podgroup(group: object, path: str, namespace: str,
              problems: list[str]) -> tuple[SubGroup, list[str]] | None:
    named = named_object(group, path, problems)
    if named is None:
        return None
    group, name = named
    minimum = group.get("minReplicas")
    if isinstance(minimum, bool) or not isinstance(minimum, int) or minimum < 1:
        problems.append(f"{path}.minReplicas must be an integer >= 1, got {minimum!r}")
        return None
    pods = []
    for j, ref in enumerate(group.get("podReferences") or ()):
        if not isinstance(ref, Mapping) or not ref.get("name"):
            problems.append(f"{path}.podReferences[{j}] needs a name")
            continue
        if ref.get("namespace") not in (None, "", namespace):
            # As KAI: a PodGang may not claim pods of another namespace.
            problems.append(f"{path}.podReferences[{j}]: pod {ref.get('namespace')}/"
                            f"{ref['name']} is not in the PodGang's namespace")
            continue
        pods.append(str(ref["name"]))
    return SubGroup(dns_part(name), minimum), pods
