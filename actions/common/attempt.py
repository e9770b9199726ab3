"""An attempt at placing a job's tasks: place_tasks puts them on nodes in task
order under a statement, until the job is ready, and the Attempt says what it
came to. The bottom of placing: topology.py tries it domain by domain, and
placement.py commits, keeps or undoes what it placed."""
from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from kaisched.api.job import JobInfo
from kaisched.api.task import TaskInfo
from kaisched.api.types import Blocker
from kaisched.framework import Session, Statement


@attrs.define
class Attempt:
    """What placing one job's tasks under a statement came to."""

    placed: int = 0
    failure: str | None = None
    blocker: Blocker | None = None      # the class of the failure


def place_tasks(ssn: Session, stmt: Statement, job: JobInfo, tasks: list[TaskInfo],
                idle_only: bool = False, within: np.ndarray | None = None) -> Attempt:
    """Place tasks in task order until the job is ready; skip what fits nowhere.
    within (a node mask) keeps them inside a topology domain."""
    attempt = Attempt()
    # An admitted gang passed the minResources check when it was enqueued.
    gated = ssn.admitted is not None
    refused = None if ssn.job_ready(job) or gated else ssn.enqueue_refusal(job)
    if refused:
        attempt.failure, attempt.blocker = refused
        return attempt
    failed_classes: set[tuple[Any, ...]] = set()
    for task in ssn.ordered_tasks(job, tasks):
        if ssn.class_key(task) in failed_classes:
            continue     # its twin found no node: neither will it
        refusal = ssn.allocatable(job, task)
        choice = None if refusal else ssn.select_node(task, idle_only, within)
        if choice is None:
            failed_classes.add(ssn.class_key(task))
            if attempt.failure is None:
                attempt.failure = refusal or f"pod {task.key}: {ssn.explain_task(task)}"
                attempt.blocker = Blocker.QUOTA if refusal else ssn.blocker_of(task)
            continue
        if choice.pipelined:
            stmt.pipeline(task, choice.node)
        else:
            stmt.allocate(task, choice.node)
        attempt.placed += 1
        if ssn.job_ready(job):
            break
    return attempt
