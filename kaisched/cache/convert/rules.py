"""Where a pod may go: node selectors and affinity, tolerations, and rules over other pods."""
from __future__ import annotations

import functools
from typing import Any

import attrs
import orjson

from kaisched.api.constraints import (
    NO_RULES,
    HostPort,
    LabelSelector,
    Placement,
    PodAffinityTerm,
    PodMatcher,
    PodRules,
    Requirement,
    SelectorTerm,
    SpreadConstraint,
    Toleration,
    WeightedPodTerm,
)
from kaisched.cache.convert.common import Obj, metadata


def _requirements(raw: Any) -> tuple[Requirement, ...]:
    return tuple(Requirement(str(r.get("key", "")), str(r.get("operator", "")),
                             tuple(str(v) for v in r.get("values") or ()))
                 for r in raw or () if isinstance(r, dict))


def placement(spec: Obj, namespace: str = "default", labels: Obj | None = None) -> Placement:
    """Node selector, node affinity, tolerations and the rules over other pods.
    The pods of a job (and of most workloads) place alike: each distinct set
    of rules is read once, and alike pods share one frozen Placement."""
    rules = (spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations"),
             spec.get("topologySpreadConstraints"),
             [_ports(spec.get("containers")), _ports(spec.get("initContainers"))])
    # The pod's namespace and labels matter only to its rules over other pods
    # (their default namespace, matchLabelKeys): without any, alike pods of all
    # namespaces share one Placement, found by identity where tasks are counted.
    ruled = bool(rules[1] or rules[3])
    own = labels if ruled else None
    try:
        key = orjson.dumps((namespace if ruled else "", own, rules))
    except TypeError:
        return _placement(spec, namespace, labels or {})
    return _placement_of(key)


def _ports(containers: Any) -> list[Any]:
    """The containers' ports, as written (most pods: none, and no init containers)."""
    if not containers:
        return []
    return [c.get("ports") for c in containers if isinstance(c, dict) and c.get("ports")]


@functools.lru_cache(maxsize=4096)
def _placement_of(key: bytes) -> Placement:
    namespace, labels, (selector, affinity, tolerations, spread, ports) = orjson.loads(key)
    spec = {"nodeSelector": selector, "affinity": affinity, "tolerations": tolerations,
            "topologySpreadConstraints": spread,
            "containers": [{"ports": p} for p in ports[0]],
            "initContainers": [{"ports": p} for p in ports[1]]}
    return _placement(spec, namespace, labels or {})


def _placement(spec: Obj, namespace: str, labels: Obj) -> Placement:
    selector = spec.get("nodeSelector") or {}
    affinity = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = tuple(SelectorTerm(_requirements(t.get("matchExpressions")),
                               _requirements(t.get("matchFields")))
                  for t in affinity.get("nodeSelectorTerms") or () if isinstance(t, dict))
    tolerations = tuple(Toleration(str(t.get("key") or ""), str(t.get("operator") or "Equal"),
                                   str(t.get("value") or ""), str(t.get("effect") or ""))
                        for t in spec.get("tolerations") or () if isinstance(t, dict))
    return Placement(tuple(sorted((str(k), str(v)) for k, v in selector.items())),
                     terms, tolerations, preferred_node_affinity(spec),
                     pod_rules(spec, namespace, labels))


def _selector(raw: Any, labels: Obj | None = None, match_keys: Any = (),
              mismatch_keys: Any = ()) -> LabelSelector | None:
    """A LabelSelector; matchLabelKeys / mismatchLabelKeys are folded in from
    the pod's own labels, as the API server does."""
    if not isinstance(raw, dict):
        return None
    pairs = {str(k): str(v) for k, v in (raw.get("matchLabels") or {}).items()}
    exprs = list(_requirements(raw.get("matchExpressions")))
    own = labels or {}
    for key in match_keys or ():
        if key in own:
            exprs.append(Requirement(str(key), "In", (str(own[key]),)))
    for key in mismatch_keys or ():
        if key in own:
            exprs.append(Requirement(str(key), "NotIn", (str(own[key]),)))
    return LabelSelector(tuple(sorted(pairs.items())), tuple(exprs))


def label_selector(raw: Any) -> LabelSelector | None:
    """A metav1.LabelSelector as written (None when it is not a mapping)."""
    return _selector(raw)


def _pod_term(raw: Obj, namespace: str, labels: Obj) -> PodAffinityTerm:
    ns_sel = raw.get("namespaceSelector")
    namespaces = tuple(sorted(str(n) for n in raw.get("namespaces") or ()))
    if not namespaces and ns_sel is None:
        namespaces = (namespace,)      # neither given: the pod's own namespace
    matcher = PodMatcher(_selector(raw.get("labelSelector"), labels, raw.get("matchLabelKeys"),
                                   raw.get("mismatchLabelKeys")),
                         namespaces, _selector(ns_sel))
    return PodAffinityTerm(matcher, str(raw.get("topologyKey") or ""))


def _pod_terms(raw: Any, namespace: str, labels: Obj) -> tuple[PodAffinityTerm, ...]:
    return tuple(_pod_term(t, namespace, labels) for t in raw or () if isinstance(t, dict))


def _weighted(raw: Any, namespace: str, labels: Obj) -> tuple[WeightedPodTerm, ...]:
    return tuple(WeightedPodTerm(int(w.get("weight") or 0),
                                 _pod_term(w.get("podAffinityTerm") or {}, namespace, labels))
                 for w in raw or () if isinstance(w, dict))


def pod_rules(spec: Obj, namespace: str, labels: Obj) -> PodRules:
    """podAffinity, podAntiAffinity, topologySpreadConstraints and host ports."""
    affinity = spec.get("affinity") or {}
    aff, anti = affinity.get("podAffinity") or {}, affinity.get("podAntiAffinity") or {}
    spread = []
    for c in spec.get("topologySpreadConstraints") or ():
        if not isinstance(c, dict):
            continue
        matcher = PodMatcher(_selector(c.get("labelSelector"), labels, c.get("matchLabelKeys")),
                             (namespace,))
        spread.append(SpreadConstraint(
            max_skew=max(int(c.get("maxSkew") or 1), 1), topology_key=str(c.get("topologyKey") or ""),
            matcher=matcher, hard=c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule",
            min_domains=max(int(c.get("minDomains") or 1), 1),
            honor_node_affinity=c.get("nodeAffinityPolicy", "Honor") != "Ignore",
            honor_taints=c.get("nodeTaintsPolicy", "Ignore") == "Honor"))
    ports = []
    for c in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        for p in (c.get("ports") or ()) if isinstance(c, dict) else ():
            if isinstance(p, dict) and p.get("hostPort"):
                ports.append(HostPort(int(p["hostPort"]), str(p.get("protocol") or "TCP"),
                                      str(p.get("hostIP") or "")))
    if not (aff or anti or spread or ports):
        return NO_RULES
    return PodRules(
        affinity=_pod_terms(aff.get("requiredDuringSchedulingIgnoredDuringExecution"), namespace, labels),
        anti_affinity=_pod_terms(anti.get("requiredDuringSchedulingIgnoredDuringExecution"),
                                 namespace, labels),
        preferred_affinity=_weighted(aff.get("preferredDuringSchedulingIgnoredDuringExecution"),
                                     namespace, labels),
        preferred_anti_affinity=_weighted(anti.get("preferredDuringSchedulingIgnoredDuringExecution"),
                                          namespace, labels),
        spread=tuple(spread), host_ports=tuple(sorted(set(ports), key=attrs.astuple)))


def preferred_node_affinity(spec: Obj) -> tuple[tuple[int, SelectorTerm], ...]:
    node_aff = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    return tuple((int(p.get("weight") or 0),
                  SelectorTerm(_requirements((p.get("preference") or {}).get("matchExpressions")),
                               _requirements((p.get("preference") or {}).get("matchFields"))))
                 for p in node_aff.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
                 if isinstance(p, dict))


def namespace_labels(obj: Obj) -> dict[str, str]:
    """A Namespace's labels: what pod rules' namespaceSelectors match."""
    return {str(k): str(v) for k, v in (metadata(obj).get("labels") or {}).items()}
