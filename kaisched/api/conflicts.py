"""Which running pod stands in the way of a pod's required placement rules on
a node: what evicting it could clear (preemption for placement rules)."""
from __future__ import annotations

from typing import Callable, Mapping

from kaisched.api.task import TaskInfo

# Do two nodes (the victim's, the one the pod would take) share a domain of this key?
SameDomain = Callable[[str], bool]


def stands_in_way(task: TaskInfo, victim: TaskInfo, same_domain: SameDomain,
                  namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
    """The victim, where it runs, breaks one of the task's required rules on
    the node: the task's anti-affinity selects it, its own anti-affinity
    selects the task, or the task's hard spread constraint counts it."""
    rules = task.placement.rules
    theirs = dict(victim.labels)
    for term in rules.anti_affinity:
        if same_domain(term.topology_key) \
                and term.matcher.matches(theirs, victim.namespace, namespace_labels):
            return True
    for c in rules.spread:
        if c.hard and same_domain(c.topology_key) \
                and c.matcher.matches(theirs, victim.namespace, namespace_labels):
            return True
    if victim.placement.rules.anti_affinity:
        mine = dict(task.labels)
        return any(same_domain(term.topology_key)
                   and term.matcher.matches(mine, task.namespace, namespace_labels)
                   for term in victim.placement.rules.anti_affinity)
    return False
