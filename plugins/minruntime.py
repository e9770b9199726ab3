"""minruntime: a job that just started is not evicted for another (KAI's plugin).

A running job is no victim until it has run its min-runtime, counted from its
last start (kaisched.api.job: its pods' start, or KAI's last-start
annotation). Which min-runtime, with KAI's arguments:
- in-queue preemption: the victim's queue's spec.preemptMinRuntime, else its
  parent's, up the tree, else defaultPreemptMinRuntime;
- reclaim by another queue, reclaimResolveMethod lca (the default): the
  reclaimMinRuntime of the victim-side child of the lowest common ancestor
  of the two leaf queues (top-level queues count as siblings), else up from
  there, else defaultReclaimMinRuntime; queue: the victim's own leaf queue's,
  else up from there, else the default.
Queue fields count only where this plugin is configured, as in KAI. A
protected job still gives pods beyond its minimum (the session's victim
filter keeps those): it is never taken below it.
"""
from __future__ import annotations

from typing import Any, Mapping

from kaisched.api.job import JobInfo
from kaisched.api.quantity import parse_duration
from kaisched.api.queue import ROOT
from kaisched.api.types import QueueName
from kaisched.errors import ConfigError
from kaisched.framework import Hook, PluginBase, Session
from kaisched.framework.effects import Cause
from kaisched.framework.protection import Protection
from kaisched.framework.registry import plugin_arguments

_DEFAULTS = {"defaultPreemptMinRuntime": Cause.PREEMPT, "defaultReclaimMinRuntime": Cause.RECLAIM}
_METHODS = ("lca", "queue")


class MinRuntimePlugin(PluginBase):
    name = "minruntime"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        arguments = plugin_arguments(arguments, *_DEFAULTS, "reclaimResolveMethod")
        self.defaults: dict[Cause, float] = {}
        for key, kind in _DEFAULTS.items():
            try:
                self.defaults[kind] = parse_duration(arguments.get(key, "0s"))
            except ValueError as exc:
                raise ConfigError(f"{key}: {exc}") from None
        self.method = arguments.get("reclaimResolveMethod", "lca")
        if self.method not in _METHODS:
            raise ConfigError(f"reclaimResolveMethod: expected lca or queue, not {self.method!r}")

    def on_session_open(self, ssn: Session) -> None:
        cluster = ssn.cluster
        self.queues = cluster.queues
        self.tree = cluster.tree
        self.now = ssn.now
        if not any(self.defaults.values()) and not any(
                q.preempt_min_runtime or q.reclaim_min_runtime for q in self.queues.values()):
            return      # nothing protects anyone: victims are not even asked about
        self._up: dict[QueueName, list[QueueName]] = {}
        ssn.register(Hook.PROTECTION, self.protection)

    def protection(self, job: JobInfo, kind: Cause, by: JobInfo | None) -> Protection | None:
        """The job is younger than its min-runtime for this kind of eviction."""
        if job.queue not in self.queues:
            return None
        started = job.started(self.now)
        if started is None:
            return None     # not running: nothing to protect
        minimum = self.min_runtime(job.queue, kind, by.queue if by is not None else None)
        if minimum <= 0 or started + minimum <= self.now:
            return None
        return Protection(started + minimum, minimum, kind)

    def min_runtime(self, victim: QueueName, kind: Cause, by: QueueName | None = None) -> float:
        """The min-runtime that protects a job of queue victim from this kind
        of eviction by a job of queue by."""
        if kind is Cause.PREEMPT:
            return self._first_set(victim, "preempt_min_runtime", kind)
        start = victim
        if self.method == "lca" and by is not None and by in self.queues:
            start = self._victim_side(victim, by)
        return self._first_set(start, "reclaim_min_runtime", kind)

    def _first_set(self, queue: QueueName, field: str, kind: Cause) -> float:
        for name in self._path_up(queue):
            value: float | None = getattr(self.queues[name], field)
            if value is not None:
                return value
        return self.defaults[kind]

    def _victim_side(self, victim: QueueName, by: QueueName) -> QueueName:
        """The victim's ancestor just below the lowest common ancestor of the
        two queues (its top-level queue when they share none); the victim's
        own queue when they are one."""
        mine, theirs = self._path_up(by)[::-1], self._path_up(victim)[::-1]
        for a, b in zip(mine, theirs, strict=False):
            if a != b:
                return b
        return victim if len(theirs) <= len(mine) else theirs[len(mine)]

    def _path_up(self, queue: QueueName) -> list[QueueName]:
        """The queue, its parent, and so on up to its top-level queue."""
        found = self._up.get(queue)
        if found is None:
            found, name = [], queue
            while name != ROOT and name in self.queues:
                found.append(name)
                name = next(iter(self.tree.predecessors(name)), ROOT)
            self._up[queue] = found
        return found
