"""Label and annotation names: kaisched's own and the other schedulers' (read
so that kaisched is a drop-in replacement)."""
from __future__ import annotations

from typing import Mapping

QUEUE_LABEL = "kaisched.io/queue"
POD_GROUP_ANNOTATION = "kaisched.io/pod-group"
SUBGROUP_LABEL = "kaisched.io/subgroup"
MIN_MEMBER_ANNOTATION = "kaisched.io/min-member"
PRIORITY_CLASS_LABEL = "kaisched.io/priority-class"
# How long a pod, or a PodGroup's pods, likely run: an estimate, never a limit.
EXPECTED_RUNTIME = "kaisched.io/expected-runtime"
# Kueue's maximum execution time, on a Job (or a pod): enforced by Kueue only.
KUEUE_MAX_EXEC_TIME = "kueue.x-k8s.io/max-exec-time-seconds"

# scheduler-plugins Coscheduling
XK8S_POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
# Koordinator
KOORD_NAME = "gang.scheduling.koordinator.sh/name"
KOORD_MIN_AVAILABLE = "gang.scheduling.koordinator.sh/min-available"
KOORD_TOTAL = "gang.scheduling.koordinator.sh/total-number"
KOORD_MODE = "gang.scheduling.koordinator.sh/mode"
KOORD_GROUPS = "gang.scheduling.koordinator.sh/groups"
KOORD_WAITING_TIME = "gang.scheduling.koordinator.sh/waiting-time"
KOORD_POD_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
# Volcano / kube-batch
VOLCANO_GROUP_NAME = "scheduling.k8s.io/group-name"
VOLCANO_GROUP_POD_NUM = "scheduling.k8s.io/group-pod-num"

# KAI: how long a pending job waits before it may evict (on its PodGroup or pods).
KAI_PREEMPTION_DELAY = "kai.scheduler/preemption-delay"

# KAI Scheduler: the PodGroup a pod joins (a bare annotation name), and its queue.
KAI_POD_GROUP_ANNOTATION = "pod-group-name"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
KAI_SUBGROUP_LABEL = "kai.scheduler/subgroup-name"

GANG_ANNOTATIONS = (POD_GROUP_ANNOTATION, KOORD_NAME, VOLCANO_GROUP_NAME, KAI_POD_GROUP_ANNOTATION)
QUEUE_LABELS = (QUEUE_LABEL, KAI_QUEUE_LABEL)     # kaisched's first
GANG_LABELS = (XK8S_POD_GROUP_LABEL, KOORD_POD_GROUP_LABEL)


def queue_label(labels: Mapping[str, str]) -> str | None:
    """The queue a pod (or an owner) names by label: kaisched's, else KAI's."""
    for key in QUEUE_LABELS:
        value = labels.get(key)
        if value:
            return value
    return None


def declares_gang(labels: Mapping[str, str], annotations: Mapping[str, str],
                  spec: Mapping[str, object] | None = None) -> bool:
    """The pod already names its gang, so the PodGrouper leaves it alone
    (spec: the upstream Workload API's schedulingGroup / workloadRef)."""
    spec = spec or {}
    return (any(annotations.get(a) for a in GANG_ANNOTATIONS)
            or any(labels.get(lbl) for lbl in GANG_LABELS)
            or bool(spec.get("schedulingGroup") or spec.get("workloadRef")))
