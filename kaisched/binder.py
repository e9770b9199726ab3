"""The binder applies a session's effects through a ClusterClient.

Binds go through a bounded worker pool (or inline, for replays that must be
deterministic); transient failures are retried with backoff; every failure is
reported, never swallowed.
"""
from __future__ import annotations

import concurrent.futures
import time
from typing import Callable, Sequence

import attrs

from kaisched.api.types import Reason
from kaisched.cache.convert import queue_status_dict, status_dict
from kaisched.cluster.client import ClusterClient
from kaisched.cluster.events import event_object
from kaisched.cluster.kinds import POD, PODGROUP, QUEUE
from kaisched.errors import ApiError, TransientApiError
from kaisched.framework.effects import (
    Bind, Effect, Evict, RecordEvent, SetPodCondition, SetPodGroupStatus, SetQueueStatus,
)

COMPONENT = "kaisched"


@attrs.frozen
class Failure:
    effect: Effect
    error: str


@attrs.define
class BindReport:
    applied: list[Effect] = attrs.field(factory=list)
    failed: list[Failure] = attrs.field(factory=list)


class Binder:
    def __init__(self, client: ClusterClient, now: Callable[[], float], workers: int = 0,
                 retries: int = 3, backoff: float = 0.2,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.client = client
        self.now = now
        self.workers = workers
        self.retries = retries
        self.backoff = backoff
        self.sleep = sleep

    def apply(self, effects: Sequence[Effect]) -> BindReport:
        report = BindReport()
        binds = [e for e in effects if isinstance(e, Bind)]
        rest = [e for e in effects if not isinstance(e, Bind)]
        if self.workers > 1 and len(binds) > 1:
            with concurrent.futures.ThreadPoolExecutor(self.workers) as pool:
                outcomes = list(pool.map(self._apply_one, binds))
        else:
            outcomes = [self._apply_one(b) for b in binds]
        outcomes += [self._apply_one(e) for e in rest]
        for effect, error in outcomes:
            if error is None:
                report.applied.append(effect)
            else:
                report.failed.append(Failure(effect, error))
        return report

    def _apply_one(self, effect: Effect) -> tuple[Effect, str | None]:
        delay = self.backoff
        for attempt in range(self.retries + 1):
            try:
                self._call(effect)
                return effect, None
            except TransientApiError as exc:
                if attempt == self.retries:
                    return effect, str(exc)
                self.sleep(delay)
                delay *= 2
            except ApiError as exc:
                return effect, str(exc)
        return effect, "not applied"   # pragma: no cover - the loop always returns

    def _call(self, effect: Effect) -> None:
        if isinstance(effect, Bind):
            ns, name = effect.pod.split("/", 1)
            self.client.bind(ns, name, effect.uid, effect.node)
            self._event("Pod", effect.pod, "Normal", Reason.SCHEDULED.value,
                        f"Successfully assigned {effect.pod} to {effect.node}")
        elif isinstance(effect, Evict):
            ns, name = effect.pod.split("/", 1)
            self.client.evict(ns, name)
            self._event("Pod", effect.pod, "Warning", effect.reason, effect.message)
        elif isinstance(effect, SetPodGroupStatus):
            ns, name = effect.job.split("/", 1)
            self.client.patch_status(PODGROUP, ns, name, status_dict(effect.status))
        elif isinstance(effect, SetQueueStatus):
            self.client.patch_status(QUEUE, "", effect.queue,
                                     queue_status_dict(effect.status, effect.previous))
        elif isinstance(effect, SetPodCondition):
            ns, name = effect.pod.split("/", 1)
            pod = self.client.get(POD, ns, name)
            if pod is None:
                return      # gone meanwhile: nothing to say about it
            c = effect.condition
            cond = {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
                    "lastTransitionTime": c.last_transition_time}
            status = pod.get("status")
            conditions = status.get("conditions") if isinstance(status, dict) else None
            kept = [x for x in conditions if isinstance(x, dict) and x.get("type") != c.type] \
                if isinstance(conditions, list) else []
            self.client.patch_status(POD, ns, name, {"conditions": kept + [cond]})
        elif isinstance(effect, RecordEvent):
            self._event(effect.kind, effect.key, effect.type, effect.reason, effect.message)

    def _event(self, kind: str, key: str, type_: str, reason: str, message: str) -> None:
        ns, name = key.split("/", 1)
        api = "v1" if kind == "Pod" else PODGROUP.api_version
        ref = {"apiVersion": api, "kind": kind, "name": name, "namespace": ns}
        self.client.create(event_object(ref, type_, reason, message, COMPONENT, self.now()))
