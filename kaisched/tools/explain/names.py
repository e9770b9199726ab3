"""What NAME stands for: a PodGroup, a pod, or a workload as [NAMESPACE/]KIND/NAME;
a name that matches nothing says which names are close."""
from __future__ import annotations

import difflib

from kaisched.api import labels as L
from kaisched.cache.convert import pod_facts
from kaisched.cluster.kinds import POD, PODGROUP
from kaisched.cluster.memory import MemoryCluster
from kaisched.errors import InputError

# Gangs a pod names in another API than kaisched's PodGroup annotation.
_OTHER_APIS = ("upstream", "workload", "kai", "x-k8s", "koord")


def resolve(cluster: MemoryCluster, name: str, scheduler_name: str) -> str:
    """The PodGroup NAME stands for: `ns/podgroup`, `ns/pod`, or a workload as
    `[ns/]kind/name` (`pytorchjob/bert`, the PodGroup made for that owner)."""
    parts = name.split("/")
    if len(parts) == 2 and cluster.get(PODGROUP, parts[0], parts[1]) is not None:
        return name
    if len(parts) == 2 and any(pod_facts(p).job == name for p in cluster.list(POD, parts[0])):
        return name         # a gang of another API (an upstream or KAI PodGroup, a Workload's)
    if len(parts) == 2:
        pod = cluster.get(POD, parts[0], parts[1])
        if pod is not None:
            facts = pod_facts(pod)
            if facts.gang.source in _OTHER_APIS:
                return facts.job
            group = ((pod["metadata"].get("annotations") or {}).get(L.POD_GROUP_ANNOTATION))
            if not group:
                raise InputError(f"pod {name} belongs to no PodGroup (is it scheduled by "
                                 f"{scheduler_name}?)")
            return f"{parts[0]}/{group}"
    if len(parts) not in (2, 3):
        raise InputError(f"{name}: expected NAMESPACE/NAME (a PodGroup or a pod) or "
                         "[NAMESPACE/]KIND/NAME (a workload)")
    namespace = parts[0] if len(parts) == 3 else None
    kind, owner = parts[-2].lower(), parts[-1]
    found = sorted(f"{pg['metadata']['namespace']}/{pg['metadata']['name']}"
                   for pg in cluster.list(PODGROUP)
                   if namespace in (None, pg["metadata"].get("namespace"))
                   and any(str(ref.get("kind", "")).lower() == kind and ref.get("name") == owner
                           for ref in pg["metadata"].get("ownerReferences") or ()))
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise InputError(f"{name}: a workload of that name in several namespaces "
                         f"({', '.join(found)}); say which as NAMESPACE/{parts[-2]}/{owner}")
    if len(parts) == 3:
        raise InputError(f"no PodGroup made for {parts[-2]} {owner} in namespace {namespace}"
                         f"{_did_you_mean(cluster, name)}")
    raise InputError(f"no PodGroup, pod or workload {name} (a workload is KIND/NAME, "
                     f"e.g. pytorchjob/bert){_did_you_mean(cluster, name)}")


def _did_you_mean(cluster: MemoryCluster, name: str) -> str:
    """The closest PodGroup, pod and workload names: a workload of the very name first
    (`research/big-pretrain` -> `pytorchjob/big-pretrain`), then the most alike."""
    groups = cluster.list(PODGROUP)
    workloads = sorted({f"{str(ref.get('kind', '')).lower()}/{ref.get('name')}"
                        for pg in groups for ref in pg["metadata"].get("ownerReferences") or ()
                        if ref.get("kind") and ref.get("name")})
    names = [*(f"{o['metadata'].get('namespace')}/{o['metadata']['name']}"
               for o in (*groups, *cluster.list(POD))), *workloads]
    same = [w for w in workloads if w.split("/")[-1] == name.split("/")[-1]]
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    picks = list(dict.fromkeys([*same, *close]))[:3]
    return f"; did you mean {' or '.join(picks)}?" if picks else ""
