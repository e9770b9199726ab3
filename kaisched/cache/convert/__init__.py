"""Raw Kubernetes objects (plain dicts) -> model values. The only place that
knows field paths; everything past it is typed. Bad fields become problems
(strings for the user), never exceptions."""
from __future__ import annotations

# The cache reads timestamps through this package (convert.from_rfc3339).
from kaisched.api.clock import from_rfc3339
from kaisched.cache.convert.common import Obj, label
from kaisched.cache.convert.groups import (
    KAI_TOPOLOGY_PREFERRED,
    KAI_TOPOLOGY_REQUIRED,
    annotated_gang,
    koord_podgroup,
    podgroup,
    podgroup_status,
    status_dict,
    topology_rule,
    xk8s_podgroup,
)
from kaisched.cache.convert.kai import kai_podgroup, kai_queue
from kaisched.cache.convert.nodes import DEFAULT_MAX_PODS, node_spec, node_spec_and_problem
from kaisched.cache.convert.pods import (
    GANG_OWNER_GROUPS,
    GangRef,
    PodFacts,
    broken_pod,
    echoed,
    gang_job,
    gang_ref,
    pod_facts,
    pod_request,
    priority_class,
    source_digest,
    task_status,
    upstream_gang_ref,
)
from kaisched.cache.convert.queues import (
    quantity_text,
    queue,
    queue_status,
    queue_status_dict,
    usage_record,
    usage_status_dict,
)
from kaisched.cache.convert.rules import namespace_labels, placement, pod_rules, preferred_node_affinity
from kaisched.cache.convert.workloads import (
    Workload,
    podgroup_v1alpha2,
    podgroup_v1beta1,
    upstream_status_dict,
    workload_v1alpha1,
)

__all__ = [
    "DEFAULT_MAX_PODS", "GANG_OWNER_GROUPS", "KAI_TOPOLOGY_PREFERRED", "KAI_TOPOLOGY_REQUIRED",
    "GangRef", "Obj", "PodFacts", "Workload", "annotated_gang", "broken_pod", "echoed",
    "from_rfc3339", "gang_job", "gang_ref", "kai_podgroup", "kai_queue", "koord_podgroup",
    "label", "namespace_labels", "node_spec", "node_spec_and_problem", "placement", "pod_facts",
    "pod_request", "pod_rules", "podgroup", "podgroup_status", "podgroup_v1alpha2",
    "podgroup_v1beta1", "preferred_node_affinity", "priority_class", "quantity_text", "queue",
    "queue_status", "queue_status_dict", "source_digest", "status_dict", "task_status",
    "topology_rule", "upstream_gang_ref", "upstream_status_dict", "usage_record",
    "usage_status_dict", "workload_v1alpha1", "xk8s_podgroup",
]
