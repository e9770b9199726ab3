"""An emulated kubelet for every node at once: a bound pod starts Running at
the next tick; its container exits successfully after the duration its pod
carries (the workload inside; one that carries none, as a GPU reservation
pod, runs until deleted); a pod with spec.activeDeadlineSeconds still
running that long after its status.startTime is ended then, Failed with
reason DeadlineExceeded, as the kubelet's active deadline handler does (the
earlier of the two wins; at the same moment, the container's exit); a pod
being deleted (evicted) stays on its node, Releasing, for its
terminationGracePeriodSeconds, then is gone.

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
# What the kubelet writes on a pod past its deadline (pkg/kubelet/active_deadline.go).
DEADLINE_REASON = "DeadlineExceeded"
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"
_KILLED = 143               # the container's exit code when stopped with SIGTERM

_Timer = tuple[float, PodKey, str]      # when, pod, uid (a pod made again has another)
# How a running pod ends, in the order that wins a tie: its container exits, or its deadline.
_EXITS, _DEADLINE = 0, 1
_End = tuple[float, int, PodKey, str]   # when, how, pod, uid


class Kubelet:
    def __init__(self, cluster: MemoryCluster) -> None:
        self.cluster = cluster
        self._subscription = cluster.subscribe((POD,))
        self._starting: dict[PodKey, str] = {}
        self._ending: list[_End] = []     # exits and deadlines: the earlier ends the pod
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
            _, how, key, uid = heapq.heappop(self._ending)
            # The later timer of a pod finds it ended already (or evicted, or gone).
            pod = self._running(key, uid)
            if pod is not None:
                self.cluster.replace(_succeeded(pod) if how == _EXITS else _past_deadline(pod))
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
                heapq.heappush(self._ending, (now + parse_duration(run_for), _EXITS, key, uid))
            limit = pod["spec"].get("activeDeadlineSeconds")
            if limit is not None:
                heapq.heappush(self._ending, (now + float(limit), _DEADLINE, key, uid))
        self._starting.clear()

    def adopt(self, now: float) -> None:
        """Pods already running at the start (a snapshot's) end after the run
        time they carry, counted from now; pods that carry none never end. A
        deadline counts from the pod's startTime, as the kubelet counts it: one
        passed already ends the pod at the first tick."""
        self._watch()
        seconds: dict[str, float] = {}
        for pod in self.cluster.list(POD):
            meta, status, spec = pod["metadata"], pod.get("status") or {}, pod.get("spec") or {}
            if status.get("phase") != "Running" or meta.get("deletionTimestamp") \
                    or not spec.get("nodeName"):
                continue
            key = pod_key(meta["namespace"], meta["name"])
            run_for = (meta.get("annotations") or {}).get(DURATION_ANNOTATION)
            if run_for is not None:
                if run_for not in seconds:
                    seconds[run_for] = parse_duration(run_for)
                self._ending.append((now + seconds[run_for], _EXITS, key, meta["uid"]))
            started = from_rfc3339(status.get("startTime"))
            limit = spec.get("activeDeadlineSeconds")
            if limit is not None and started is not None:
                self._ending.append((started + float(limit), _DEADLINE, key, meta["uid"]))
        heapq.heapify(self._ending)

    def next_event(self) -> float | None:
        """When the next container exits, pod reaches its deadline, or deleted pod is gone."""
        # Most pods end before their deadline: drop the deadlines of pods no
        # longer running, lest each wake a session that has nothing to do.
        while self._ending and self._ending[0][1] == _DEADLINE \
                and self._running(*self._ending[0][2:]) is None:
            heapq.heappop(self._ending)
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

    def _running(self, key: PodKey, uid: str) -> dict | None:
        """The pod, if it runs and is not being deleted: one a timer may end."""
        pod = self._get(key, uid)
        if pod is None or pod["status"].get("phase") != "Running" \
                or pod["metadata"].get("deletionTimestamp"):
            return None
        return pod

    def _get(self, key: PodKey, uid: str) -> dict | None:
        pod = self.cluster.get(POD, *key.split("/", 1))
        return pod if pod is not None and pod["metadata"].get("uid") == uid else None


def _succeeded(pod: dict) -> dict:
    """Its container exited 0: the pod Succeeded."""
    return {**pod, "status": {**pod["status"], "phase": "Succeeded",
                              "containerStatuses": _terminated(pod, 0, "Completed")}}


def _past_deadline(pod: dict) -> dict:
    """The kubelet's active deadline handler: the pod Failed, its container stopped."""
    return {**pod, "status": {**pod["status"], "phase": "Failed", "reason": DEADLINE_REASON,
                              "message": DEADLINE_MESSAGE,
                              "containerStatuses": _terminated(pod, _KILLED, "Error")}}


def _terminated(pod: dict, code: int, reason: str) -> list[dict]:
    return [{"name": c["name"], "ready": False, "restartCount": 0, "image": c.get("image", ""),
             "imageID": "", "state": {"terminated": {"exitCode": code, "reason": reason}}}
            for c in pod["spec"]["containers"]]
