"""How long pods run: the limits something enforces, and the estimates
nothing does.

Limits (reservation backfill counts on them): a pod's own
spec.activeDeadlineSeconds, which its kubelet enforces from its start, and
its batch Job's spec.activeDeadlineSeconds, which the Job controller
enforces from the Job's status.startTime; each with the pod's termination
grace period after it.

Estimates (for ordering and for saying when a reservation likely starts,
never for what is lent): kaisched.io/expected-runtime (a duration) on a pod
or PodGroup, and Kueue's maximum execution time
(kueue.x-k8s.io/max-exec-time-seconds, which only Kueue enforces) on a pod
or its Job.
"""
from __future__ import annotations

from typing import Any

import attrs

from kaisched.api import labels as L
from kaisched.api.clock import from_rfc3339
from kaisched.api.job import GangSpec
from kaisched.api.quantity import parse_duration
from kaisched.api.task import Runtime
from kaisched.cache.convert.common import Obj, metadata

DEFAULT_GRACE = 30      # terminationGracePeriodSeconds when a pod sets none


@attrs.frozen(slots=True)
class JobOwner:
    """The batch Job that controls a pod, and the pod's grace period (what
    its end takes after the Job's deadline)."""

    uid: str
    grace: float


@attrs.frozen(slots=True)
class PodRuntime:
    """What a pod says of how long it runs, and what its Job does (the cache
    reads the Job: deadline and job_expected are its)."""

    limit: float | None = None         # enforced: activeDeadlineSeconds + its grace period
    job: JobOwner | None = None        # the batch Job that controls it
    # When it is sure to be gone by its Job's deadline: the Job's start +
    # activeDeadlineSeconds + the pod's grace period.
    deadline: float | None = None
    expected: float | None = None      # its estimated run time, by its own labels
    job_expected: float | None = None  # ... by its Job's

    def task_runtime(self) -> Runtime | None:
        """As its task keeps it; None when it says nothing."""
        expected = self.expected if self.expected is not None else self.job_expected
        if self.limit is None and self.deadline is None and expected is None:
            return None
        return Runtime(self.limit, self.deadline, expected)


def pod_runtime(meta: Obj, spec: Obj, expected: float | None) -> PodRuntime | None:
    """The pod's runtime facts; None when it has no limit, Job or estimate."""
    limit = runtime_limit(spec) if "activeDeadlineSeconds" in spec else None
    job = job_owner(meta, spec) if meta.get("ownerReferences") else None
    if limit is None and job is None and expected is None:
        return None
    return PodRuntime(limit, job, expected=expected)


@attrs.frozen(slots=True)
class BatchJob:
    """What a batch Job says of its pods' run time."""

    deadline: float | None      # its start + activeDeadlineSeconds; None: no limit, or not started
    estimate: float | None      # Kueue's maximum execution time, in seconds


def batch_job(obj: Obj) -> BatchJob | None:
    """A Job's limit and estimate; None when it has neither (most Jobs)."""
    meta, spec, status = metadata(obj), obj.get("spec") or {}, obj.get("status") or {}
    seconds = _positive_int(spec.get("activeDeadlineSeconds"))
    start = from_rfc3339(status.get("startTime"))
    # A Job not started yet (or suspended: resuming starts it again) has no deadline yet.
    deadline = start + seconds if seconds is not None and start is not None else None
    estimate = kueue_estimate(meta.get("labels") or {})
    return None if deadline is None and estimate is None else BatchJob(deadline, estimate)


def job_owner(meta: Obj, spec: Obj) -> JobOwner | None:
    """The pod's controlling batch Job, if a Job controls it."""
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") is True and ref.get("kind") == "Job" \
                and ref.get("apiVersion") == "batch/v1" and ref.get("uid"):
            return JobOwner(str(ref["uid"]), float(grace_period(spec)))
    return None


def runtime_limit(spec: Obj) -> float | None:
    """How long the pod may run at most, from its start to its end: its
    spec.activeDeadlineSeconds (the kubelet ends it then) and the termination
    grace period it then gets. None when nothing enforces an end."""
    deadline = _positive_int(spec.get("activeDeadlineSeconds"))
    return None if deadline is None else float(deadline + grace_period(spec))


def grace_period(spec: Obj) -> int:
    grace = spec.get("terminationGracePeriodSeconds")
    if not isinstance(grace, int) or isinstance(grace, bool) or grace < 0:
        return DEFAULT_GRACE
    return grace


def estimate(annotations: Obj, labels: Obj) -> tuple[float | None, str | None]:
    """A pod's or PodGroup's estimated run time: kaisched's annotation, else
    Kueue's label; and what is wrong with one that does not parse."""
    raw = annotations.get(L.EXPECTED_RUNTIME)
    if raw is not None:
        try:
            value = parse_duration(raw)
        except ValueError as exc:
            return None, f"{L.EXPECTED_RUNTIME}: {exc}"
        if value > 0:
            return value, None
        return None, f"{L.EXPECTED_RUNTIME} must be longer than 0s, not {raw!r}"
    seconds = kueue_estimate(labels)
    if seconds is None and labels.get(L.KUEUE_MAX_EXEC_TIME) is not None:
        return None, (f"{L.KUEUE_MAX_EXEC_TIME} must be a whole number of seconds, "
                      f"not {labels[L.KUEUE_MAX_EXEC_TIME]!r}")
    return seconds, None


def with_estimate(gang: GangSpec, obj: Obj, problem: str | None) -> tuple[GangSpec, str | None]:
    """A PodGroup's gang (any kind's) with the estimate its annotation or
    label gives; one that does not parse is the PodGroup's problem."""
    meta = metadata(obj)
    annotations, labels = meta.get("annotations") or {}, meta.get("labels") or {}
    if L.EXPECTED_RUNTIME not in annotations and L.KUEUE_MAX_EXEC_TIME not in labels:
        return gang, problem
    expected, wrong = estimate(annotations, labels)
    if wrong:
        return gang, f"{problem}; {wrong}" if problem else wrong
    return attrs.evolve(gang, expected_runtime=expected), problem


def kueue_estimate(labels: Obj) -> float | None:
    raw: Any = labels.get(L.KUEUE_MAX_EXEC_TIME)
    if isinstance(raw, str) and raw.isdigit() and int(raw) > 0:
        return float(raw)
    return None


def _positive_int(value: object) -> int | None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return None
    return value
