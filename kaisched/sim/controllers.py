"""Emulated operators: they submit each job at its arrival, keep its pods alive
as the real controllers do (an evicted pod is made again: under the same name
by the training and MPI operators, under a new one by the Job controller and
KubeRay; a bare pod is not), see the job succeed when its leading pods have
(master, chief, launcher, head; every pod for JobSet, Job and a plain gang),
and then remove it whole, as ttlSecondsAfterFinished: 0 and the garbage
collector would, so a long run does not pile up finished pods.

A pod that fails (the kubelet ends it at its activeDeadlineSeconds) fails
its job, which is removed the same way and not started again: its pods would
only run past their limit again (a Job's backoffLimit retries are not emulated).

They learn what happened to their pods from a watch, like the real ones.
"""
from __future__ import annotations

import enum
from typing import Mapping

import attrs

from kaisched.api.types import PodKey, pod_key
from kaisched.cluster.kinds import POD, PODGROUP, kind_of
from kaisched.cluster.memory import MemoryCluster
from kaisched.sim.admission import refusals
from kaisched.sim.operators import Blueprint, PodPlan, blueprint, gang_name, owner_reference, pod_object
from kaisched.sim.scenario import JobKind, JobSpec
from podgrouper.groupers.spec import podgroup_name

Obj = dict
# What a pod's failure means for its job, by the reason the kubelet gives.
_FAILURES = {"DeadlineExceeded": "ran past its runtimeLimit"}


class JobState(str, enum.Enum):
    WAITING = "waiting"          # not arrived yet
    SUBMITTED = "submitted"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@attrs.define(eq=False)
class JobRun:
    """One job of the scenario, as its operator and the report see it."""

    spec: JobSpec
    plan: Blueprint | None = None
    objects: list[Obj] = attrs.field(factory=list)           # as created, owner first
    current: dict[int, str | None] = attrs.field(factory=dict)  # pod plan -> pod name alive
    done: set[int] = attrs.field(factory=set)                 # pod plans that succeeded
    running: set[int] = attrs.field(factory=set)              # pod plans whose pod runs
    stage: int = 0                                            # the last stage made
    state: JobState = JobState.WAITING
    pod_group: str = ""
    submitted: float | None = None
    started: float | None = None
    finished: float | None = None
    first_bound: int = 0          # pods bound in the session that started it
    min_member: int | None = None
    evictions: int = 0            # times it lost pods to evictions (one per session)
    pods_evicted: int = 0
    restarts: int = 0             # pods made again after an eviction
    # What happened to it, in order: (moment, waiting | running | evicted | done).
    history: list[tuple[float, str]] = attrs.field(factory=list)
    # Its size while it runs, at each change: (moment, pods running, GPUs running).
    sizes: list[tuple[float, int, float]] = attrs.field(factory=list)
    gpu_hours_lost: float = 0.0   # GPU time run and thrown away by its evictions
    never_fits: str | None = None
    failure: str | None = None
    # When its first reservation (room the starvation guard held for it) said its room would
    # be sure to be free, in virtual seconds; None when it had none with a known start.
    reserved_start: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.spec.namespace, self.spec.name)

    @property
    def active(self) -> bool:
        return self.state is JobState.SUBMITTED


class Controllers:
    def __init__(self, cluster: MemoryCluster, scheduler_name: str,
                 priorities: Mapping[str, int]) -> None:
        self.cluster = cluster
        self.scheduler_name = scheduler_name
        self.priorities = dict(priorities)
        self.by_pod: dict[PodKey, tuple[JobRun, int]] = {}
        self._subscription = cluster.subscribe((POD,))
        self._subscription.drain()
        self._missing: set[JobRun] = set()      # jobs with a pod to make again
        self._finished: list[JobRun] = []       # succeeded or failed, not yet removed
        self._now = 0.0

    def submit(self, run: JobRun, now: float) -> None:
        refused = refusals(run.spec, self.scheduler_name, self.priorities)
        if refused:
            run.state, run.submitted = JobState.FAILED, now
            run.failure = f"the API server refuses it: {refused[0]}"
            self._finished.append(run)
            return
        plan = blueprint(run.spec, self.scheduler_name)
        run.plan = plan
        self._make_stage(run, 0)
        named, part = plan.first_group
        run.pod_group = gang_name(run.spec) if run.spec.kind is JobKind.GANG \
            else podgroup_name(run.objects[named], part)
        run.state, run.submitted = JobState.SUBMITTED, now
        run.history.append((now, "waiting"))

    def adopt(self, run: JobRun, plan: Blueprint, pods: tuple[Obj, ...], pod_group: str) -> None:
        """Take over a job that was there at the start (a snapshot's), its pods
        created already: from now on its operator keeps them as its own."""
        run.plan = plan
        run.objects = list(plan.objects)       # its owner, to name in pods made again
        run.pod_group = pod_group
        run.state, run.submitted = JobState.SUBMITTED, 0.0
        run.history.append((0.0, "waiting"))
        for index, pod in enumerate(pods):
            name = pod["metadata"]["name"]
            run.current[index] = name
            self.by_pod[pod_key(run.spec.namespace, name)] = (run, index)

    def tick(self, now: float) -> list[JobRun]:
        """React to pod events: make evicted pods again, finish jobs whose leaders
        succeeded, remove finished jobs. Returns the jobs that finished."""
        for event in self._subscription.drain():
            meta = event.obj["metadata"]
            key = pod_key(meta["namespace"], meta["name"])
            found = self.by_pod.get(key)
            if found is None:
                continue
            run, index = found
            phase = (event.obj.get("status") or {}).get("phase")
            if event.type == "DELETED":
                del self.by_pod[key]
                if run.current.get(index) == meta["name"]:
                    run.current[index] = None
                    run.running.discard(index)
                    if run.active and index not in run.done:
                        self._missing.add(run)
            elif phase == "Succeeded":
                run.done.add(index)
                self._check_success(run)
            elif phase == "Failed":
                run.running.discard(index)
                self._fail(run, event.obj["status"])
            elif phase == "Running":
                run.running.add(index)
                self._next_stage(run)
        self._now = now
        for run in sorted(self._missing, key=lambda r: r.key):
            self._recreate(run)
        self._missing.clear()
        finished, self._finished = self._finished, []
        for run in finished:
            run.finished = now
            run.history.append((now, "done"))
            self._remove(run)
        return finished

    # -- internals -------------------------------------------------------------------------
    def _make_stage(self, run: JobRun, stage: int) -> None:
        """Create the objects and pods of one stage, owners first."""
        plan = run.plan
        assert plan is not None
        run.stage = stage
        for i, (obj, parent) in enumerate(zip(plan.objects, plan.parents, strict=True)):
            if plan.stage_of(i) != stage:
                continue
            if parent is not None:
                obj = {**obj, "metadata": {**obj["metadata"],
                                           "ownerReferences": [owner_reference(run.objects[parent])]}}
            run.objects.append(self.cluster.create(obj))
        for index, pod in enumerate(plan.pods):
            if pod.stage == stage:
                self._make_pod(run, index)

    def _next_stage(self, run: JobRun) -> None:
        """The operator starts the next stage once every pod made so far runs (or is done)."""
        plan = run.plan
        if plan is None or not run.active or run.stage >= plan.last_stage:
            return
        made = [i for i, p in enumerate(plan.pods) if p.stage <= run.stage]
        if all(i in run.running or i in run.done for i in made):
            self._make_stage(run, run.stage + 1)

    def _make_pod(self, run: JobRun, index: int) -> None:
        assert run.plan is not None         # only planned runs make pods
        plan: PodPlan = run.plan.pods[index]
        owner = run.objects[plan.parent] if plan.parent is not None else None
        template = run.plan.templates[plan.role]
        pod = self.cluster.create(pod_object(plan, template, run.spec.namespace, owner,
                                             self.priorities))
        name = pod["metadata"]["name"]
        run.current[index] = name
        self.by_pod[pod_key(run.spec.namespace, name)] = (run, index)

    def _recreate(self, run: JobRun) -> None:
        if not run.active:
            return
        lost = [i for i, name in sorted(run.current.items()) if name is None and i not in run.done]
        assert run.plan is not None         # only planned runs have pods to lose
        if not run.plan.recreates:
            run.state, run.failure = JobState.FAILED, (
                f"{len(lost)} bare pod(s) evicted; nothing makes them again")
            self._finished.append(run)
            return
        if lost and run.history and run.history[-1][1] == "evicted":
            run.history.append((self._now, "waiting"))       # made again: waiting again
        for index in lost:
            self._make_pod(run, index)
            run.restarts += 1

    def _check_success(self, run: JobRun) -> None:
        plan = run.plan
        if not run.active or plan is None:
            return
        leaders = [i for i, p in enumerate(plan.pods) if p.leader]
        if all(i in run.done for i in leaders):
            run.state = JobState.SUCCEEDED
            self._finished.append(run)

    def _fail(self, run: JobRun, status: Obj) -> None:
        if not run.active:
            return          # another of its pods failed first
        reason = str(status.get("reason") or "Failed")
        run.state = JobState.FAILED
        run.failure = f"{reason}: {_FAILURES.get(reason) or status.get('message') or 'a pod failed'}"
        self._finished.append(run)

    def _remove(self, run: JobRun) -> None:
        """ttlSecondsAfterFinished: 0 and the garbage collector: pods, the
        PodGroup, the objects in between and the owner go."""
        ns = run.spec.namespace
        for index, name in sorted(run.current.items()):
            if name is not None and self.cluster.get(POD, ns, name) is not None:
                self.by_pod.pop(pod_key(ns, name), None)
                self.cluster.delete(POD, ns, name)
            run.current[index] = None
        if run.spec.kind is not JobKind.GANG and run.objects:
            # Every PodGroup the PodGrouper made for the job (one per stage or group).
            top = run.objects[0]["metadata"]["uid"]
            for group in self.cluster.list(PODGROUP, ns):
                refs = group["metadata"].get("ownerReferences") or ()
                if any(ref.get("uid") == top for ref in refs):
                    self.cluster.delete(PODGROUP, ns, group["metadata"]["name"])
        for obj in reversed(run.objects):
            meta = obj["metadata"]
            kind = kind_of(obj)
            if self.cluster.get(kind, meta.get("namespace", ""), meta["name"]) is not None:
                self.cluster.delete(kind, meta.get("namespace", ""), meta["name"])
