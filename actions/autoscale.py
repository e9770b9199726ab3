"""autoscale: ask a cluster autoscaler, in one ProvisioningRequest, for the
capacity a waiting gang lacks, and act on its answer. It runs last in each
session, and only when autoscaling is configured.

A gang is asked for when all of these hold, after the other actions:
- it still waits: pods pending, not placed or pipelined this session, valid
  (not waiting for the PodGrouper);
- its queue asks: the config's queues, or the Queue's spec.autoscaling;
- it has a PodGroup object, which owns the request (and its PodTemplates,
  so garbage collection removes them with it);
- it has waited `after` since it was pending;
- its queue's limits, and every ancestor's, leave room for what it lacks
  (quota does not matter: over-quota work may still get capacity);
- today's free room cannot hold it without evicting anyone: the pods no
  packing of it finds a node for (actions/common/shortfall.py) are what is
  asked for, one pod set per pod shape;
- fewer than maxPending requests wait for an answer.

Its request is then followed up each session:
- answered Provisioned: kept, until the gang is placed (then deleted);
- waiting, but the gang now fits otherwise (room freed by jobs ending or by
  eviction), or no longer waits: deleted;
- waiting, but what the gang lacks changed: the spec is immutable, so it is
  deleted and a new one made;
- Failed, BookingExpired or CapacityRevoked: asked again after a backoff
  (retry.initial, doubled each try), given up once the next wait would pass
  retry.max; the condition says which. Once given up, it is asked again
  (from the first try) only when it lacks fewer pods.
The gang's condition says where it stands, in numbers.
"""
from __future__ import annotations

import hashlib
from typing import Sequence

from actions.common.shortfall import Shortfall
from kaisched.api.clock import from_rfc3339
from kaisched.api.job import JobInfo
from kaisched.api.provisioning import MAX_POD_SETS, CapacityRequest, CapacityState
from kaisched.api.resource import GPU, Resource, format_amount, sum_resources
from kaisched.api.task import TaskInfo
from kaisched.api.types import Blocker, TaskStatus
from kaisched.framework import Session
from kaisched.framework.autoscalingconfig import AutoscalingConfig
from kaisched.framework.effects import AskCapacity, AskedPodSet, RecordEvent, WithdrawCapacity

_WAITING = (CapacityState.WAITING, CapacityState.ACCEPTED)


class AutoscaleAction:
    name = "autoscale"

    def execute(self, ssn: Session) -> None:
        config = ssn.config.autoscaling
        if config is None:
            return
        requests = ssn.cluster.capacity_requests
        pending = sum(1 for r in requests.values() if r.state in _WAITING)
        for key, request in sorted(requests.items()):
            job = ssn.cluster.jobs.get(key)
            if job is None or not _waiting(ssn, job):
                _withdraw(ssn, request)         # gone, or placed: the request has done its part
        shortfall = Shortfall(ssn)      # the free room, read once: this action places nothing
        for job in sorted(ssn.cluster.jobs.values(), key=lambda j: j.key):
            if not _waiting(ssn, job):
                continue
            asked = ssn.guard(job, _follow, ssn, config, shortfall, job, requests.get(job.key),
                              pending)
            pending += bool(asked)


def _waiting(ssn: Session, job: JobInfo) -> bool:
    return bool(job.count_of(TaskStatus.PENDING)) and not ssn.job_ready(job) \
        and not ssn.job_pipelined(job)


def _follow(ssn: Session, config: AutoscalingConfig, shortfall: Shortfall, job: JobInfo,
            request: CapacityRequest | None, pending: int) -> bool:
    """Ask, keep, renew or withdraw the job's request; True if one was made."""
    why_not = _not_asked(ssn, config, job)
    if why_not is not None:
        if request is not None and request.state is not CapacityState.PROVISIONED:
            _withdraw(ssn, request)
        return False
    needed = ssn.minimum_tasks(job, ssn.pending(job))
    missing = shortfall.unplaceable(needed)
    if not missing:
        if request is not None and request.state is not CapacityState.PROVISIONED:
            _withdraw(ssn, request)         # it fits without new nodes now
        return False
    # The whole unplaced minimum must fit under the limits, not only what is asked for.
    if ssn.limit_refusal(job, sum_resources(t.resreq for t in needed)) is not None:
        if request is not None:
            _withdraw(ssn, request)
        return False
    if request is None:
        return _ask(ssn, config, job, missing, 1, pending)
    if request.state is CapacityState.PROVISIONED:
        _waits(ssn, job, f"capacity provisioned for {_amount(request.pods, missing)} "
                         f"(ProvisioningRequest {request.key}); placing it as it comes up")
        return False
    if request.state in _WAITING:
        if _asks_other(ssn, job, missing, request):
            _withdraw(ssn, request)         # what it lacks changed; the spec is immutable
            return _ask(ssn, config, job, missing, request.attempt, pending - 1)
        _waits(ssn, job, f"asked the autoscaler for {_amount(request.pods, missing)} "
                         f"(ProvisioningRequest {request.key}, class {request.class_name}); "
                         f"{ssn.now - request.creation:.0f} s so far")
        return False
    # Failed, BookingExpired or CapacityRevoked
    answer = f"the autoscaler answered {request.state.value}" + \
        (f": {request.message}" if request.message else "")
    if config.gives_up(request.attempt):
        if len(missing) < request.pods:
            _withdraw(ssn, request)         # it lacks less now: a new question
            return _ask(ssn, config, job, missing, 1, pending)
        ssn.note_unschedulable(job, f"{answer}; gave up after {request.attempt} request(s)")
        return False
    wait = config.backoff(request.attempt) - (ssn.now - request.since)
    if wait > 0:
        _waits(ssn, job, f"{answer}; asking again in {wait:.0f} s (request {request.attempt + 1})")
        return False
    _withdraw(ssn, request)
    return _ask(ssn, config, job, missing, request.attempt + 1, pending)


def _asks_other(ssn: Session, job: JobInfo, missing: list[TaskInfo],
                request: CapacityRequest) -> bool:
    """What the gang lacks is not what the request asked for."""
    return _pod_sets(job, _shapes(ssn, missing), request.attempt) != \
        tuple((s.template, s.count) for s in request.pod_sets)


def _not_asked(ssn: Session, config: AutoscalingConfig, job: JobInfo) -> str | None:
    """Why the job gets no request, if it does not."""
    queue = ssn.cluster.queues.get(job.queue)
    chosen = config.queues is None or job.queue in config.queues
    if queue is not None and queue.autoscaling is not None:
        chosen = queue.autoscaling
    if not chosen:
        return "its queue does not ask"
    if not job.spec.declared:
        return "no PodGroup to own the request"
    if ssn.awaits_grouping(job) or ssn.job_invalid(job):
        return "not valid"
    since = from_rfc3339(job.status.pending_since) or job.creation
    if ssn.now - since < config.after:
        return "not waited long enough"
    return None


def _ask(ssn: Session, config: AutoscalingConfig, job: JobInfo, missing: list[TaskInfo],
         attempt: int, pending: int) -> bool:
    if pending >= config.max_pending:
        ssn.note_unschedulable(job, f"waiting to ask the autoscaler: {pending} request(s) "
                                    f"wait for an answer, at most {config.max_pending}")
        return False
    shapes = _shapes(ssn, missing)
    if len(shapes) > MAX_POD_SETS:
        ssn.note_unschedulable(job, f"not asked of the autoscaler: {len(shapes)} pod shapes, "
                                    f"a ProvisioningRequest takes at most {MAX_POD_SETS}")
        return False
    sets = _pod_sets(job, shapes, attempt)
    name = _request_name(job, attempt, sets)
    ask = AskCapacity(
        job=job.key, name=name, class_name=config.provisioning_class, attempt=attempt,
        pod_sets=tuple(AskedPodSet(template, count, pods[0].key)
                       for (template, count), pods in zip(sets, shapes, strict=True)),
        pods=tuple(sorted(t.key for t in job.tasks.values() if t.status is TaskStatus.PENDING)))
    ssn.report(ask)
    what = _amount(len(missing), missing)
    ssn.report(RecordEvent("PodGroup", job.key, "Normal", "ProvisioningRequested",
                           f"asked the autoscaler for {what} (ProvisioningRequest "
                           f"{job.namespace}/{name}, class {config.provisioning_class})"))
    _waits(ssn, job, f"asked the autoscaler for {what} (ProvisioningRequest {job.namespace}/{name}, "
                     f"class {config.provisioning_class}); 0 s so far")
    return True


def _waits(ssn: Session, job: JobInfo, note: str) -> None:
    """The gang waits for capacity asked of the autoscaler: its condition says
    so (reason WaitingForCapacity), after why no node holds it now."""
    said = ssn.unschedulable.get(job.key)
    if said is not None:
        ssn.record_unschedulable(job, f"{said}; {note}", Blocker.CAPACITY)


def _withdraw(ssn: Session, request: CapacityRequest) -> None:
    ssn.report(WithdrawCapacity(request.key, tuple(s.template for s in request.pod_sets)))


def _shapes(ssn: Session, tasks: Sequence[TaskInfo]) -> list[list[TaskInfo]]:
    """The tasks by shape (what the filters and the table see alike), in order."""
    groups: dict[object, list[TaskInfo]] = {}
    for task in tasks:
        groups.setdefault(ssn.class_key(task), []).append(task)
    return list(groups.values())


def _pod_sets(job: JobInfo, shapes: list[list[TaskInfo]],
              attempt: int) -> tuple[tuple[str, int], ...]:
    """(PodTemplate name, count) per shape: the names follow from the gang,
    the try and the shapes, so a restarted scheduler names them alike."""
    digest = _digest(job, attempt, [(pods[0].key, len(pods)) for pods in shapes])
    return tuple((f"{job.name}-{digest}-{i}", len(pods)) for i, pods in enumerate(shapes))


def _request_name(job: JobInfo, attempt: int, sets: tuple[tuple[str, int], ...]) -> str:
    return f"{job.name}-{_digest(job, attempt, list(sets))}"


def _digest(job: JobInfo, attempt: int, parts: list[tuple[str, int]]) -> str:
    text = f"{job.key}|{attempt}|" + "|".join(f"{a}:{b}" for a, b in parts)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _amount(count: int, tasks: Sequence[TaskInfo]) -> str:
    """'4 pods x 8 GPUs' for pods alike; else the pods and what they ask in all."""
    if not tasks:
        return f"{count} pod(s)"
    first = tasks[0].resreq
    alike = all(t.resreq == first for t in tasks)
    per = first if alike else sum_resources(t.resreq for t in tasks)
    what = _resources(per)
    return f"{count} pods x {what}" if alike else f"{count} pods ({what} in all)"


def _resources(res: Resource) -> str:
    gpus = res.get(GPU)
    if gpus:
        return f"{gpus:g} GPU{'s' if gpus != 1 else ''}"
    return ", ".join(f"{format_amount(n, v)} {n}" for n, v in res.items if n in ("cpu", "memory"))
