"""An emulated kubelet for every node at once: a bound pod starts Running at
the next tick; its container exits successfully after the duration its pod
carries (the workload inside; one that carries none, as a GPU reservation
pod, runs until deleted); a pod being deleted (evicted) stays on its node,
Releasing, for its terminationGracePeriodSeconds, then is gone.

It learns of bound and evicted pods from a watch, and keeps its timers in
heaps, so a tick costs only what changed.
"""
from __future__ import annotations

import heapq

from kaisched.api.clock import from_rfc3339, to_rfc3339
from kaisched.api.quantity import parse_duration
from kaisched.api.types import PodKey, pod_key
from kaisched.cluster.kinds import POD
from kaisched.cluster.memory import MemoryCluster
from kaisched.sim.operators import DURATION_ANNOTATION

DEFAULT_GRACE = 30.0       # Kubernetes' default terminationGracePeriodSeconds

_Timer = tuple[float, PodKey, str]      # when, pod, uid (a pod made again has another)


class Kubelet:
    def __init__(self, cluster: MemoryCluster) -> None:
        self.cluster = cluster
        self._subscription = cluster.subscribe((POD,))
        self._starting: dict[PodKey, str] = {}
        self._ending: list[_Timer] = []
        self._deleting: list[_Timer] = []
        self._being_deleted: set[PodKey] = set()
        self.started: list[PodKey] = []       # pods started by the last tick

    def tick(self, now: float) -> None:
        self._watch()
        while self._deleting and self._deleting[0][0] <= now:
            _, key, uid = heapq.heappop(self._deleting)
            self._being_deleted.discard(key)
            pod = self._get(key, uid)
            if pod is not None:
                self.cluster.delete(POD, *key.split("/", 1))
        while self._ending and self._ending[0][0] <= now:
            _, key, uid = heapq.heappop(self._ending)
            pod = self._get(key, uid)
            if pod is not None and pod["status"].get("phase") == "Running" \
                    and not pod["metadata"].get("deletionTimestamp"):
                self.cluster.replace({**pod, "status": {
                    **pod["status"], "phase": "Succeeded",
                    "containerStatuses": [{"name": c["name"], "ready": False, "restartCount": 0,
                                           "image": c.get("image", ""), "imageID": "",
                                           "state": {"terminated": {"exitCode": 0,
                                                                    "reason": "Completed"}}}
                                          for c in pod["spec"]["containers"]]}})
        self.started = []
        for key, uid in sorted(self._starting.items()):
            pod = self._get(key, uid)
            if pod is None or pod["metadata"].get("deletionTimestamp") \
                    or pod["status"].get("phase", "Pending") != "Pending":
                continue
            self.cluster.replace({**pod, "status": {
                **pod["status"], "phase": "Running", "startTime": to_rfc3339(now),
                "containerStatuses": [{"name": c["name"], "ready": True, "restartCount": 0,
                                       "image": c.get("image", ""), "imageID": "",
                                       "state": {"running": {"startedAt": to_rfc3339(now)}}}
                                      for c in pod["spec"]["containers"]]}})
            self.started.append(key)
            run_for = (pod["metadata"].get("annotations") or {}).get(DURATION_ANNOTATION)
            if run_for is not None:     # none (a GPU reservation pod): it runs until deleted
                heapq.heappush(self._ending, (now + parse_duration(run_for), key, uid))
        self._starting.clear()

    def adopt(self, now: float) -> None:
        """Pods already running at the start (a snapshot's) end after the run
        time they carry, counted from now; pods that carry none never end."""
        self._watch()
        seconds: dict[str, float] = {}
        for pod in self.cluster.list(POD):
            meta, status = pod["metadata"], pod.get("status") or {}
            run_for = (meta.get("annotations") or {}).get(DURATION_ANNOTATION)
            if run_for is None or status.get("phase") != "Running" or meta.get("deletionTimestamp") \
                    or not (pod.get("spec") or {}).get("nodeName"):
                continue
            if run_for not in seconds:
                seconds[run_for] = parse_duration(run_for)
            key = pod_key(meta["namespace"], meta["name"])
            self._ending.append((now + seconds[run_for], key, meta["uid"]))
        heapq.heapify(self._ending)

    def next_event(self) -> float | None:
        """When the next container exits or deleted pod is gone."""
        heads = [h[0][0] for h in (self._ending, self._deleting) if h]
        return min(heads) if heads else None

    def busy(self) -> bool:
        """Pods to start, or pods Releasing: a session may act on either."""
        self._watch()
        return bool(self._starting or self._being_deleted)

    def _watch(self) -> None:
        for event in self._subscription.drain():
            pod = event.obj
            meta, spec = pod["metadata"], pod.get("spec") or {}
            key = pod_key(meta["namespace"], meta["name"])
            if event.type == "DELETED":
                self._starting.pop(key, None)
                continue
            if not spec.get("nodeName"):
                continue
            if meta.get("deletionTimestamp"):
                self._starting.pop(key, None)
                if key not in self._being_deleted:
                    self._being_deleted.add(key)
                    grace = spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE)
                    since = from_rfc3339(meta["deletionTimestamp"]) or 0.0
                    heapq.heappush(self._deleting, (since + float(grace), key, meta["uid"]))
            elif (pod.get("status") or {}).get("phase", "Pending") == "Pending":
                self._starting[key] = meta["uid"]

    def _get(self, key: PodKey, uid: str) -> dict | None:
        pod = self.cluster.get(POD, *key.split("/", 1))
        return pod if pod is not None and pod["metadata"].get("uid") == uid else None
