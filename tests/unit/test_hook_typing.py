"""The hook contract bites: mypy, with the project's config, refuses a
callback of the wrong shape, a declaration its hook does not take, and a
question asked with the wrong arguments, and passes the right ones.

One mypy run over one small module: each line marked `# wrong` must be
reported, and no other line."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = '''
import numpy as np

from kaisched.api.job import JobInfo
from kaisched.api.resource import Resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import Blocker
from kaisched.framework import Hook, Session
from kaisched.framework.hooks import HookRegistry, Mask, Rows


def for_a_task(task: TaskInfo) -> str | None:
    return None


def node_filter(task: TaskInfo, rows: Rows) -> Mask:
    return np.ones(len(rows), dtype=bool)


def pod_filter(task: TaskInfo, rows: Rows) -> Mask | None:
    return None


def plugin(ssn: Session) -> None:
    ssn.register(Hook.JOB_VALID, lambda job: job.problem)
    ssn.register(Hook.QUEUE_HEAD_ORDER, lambda queue, need: (queue.priority, need.get("cpu")))
    ssn.register(Hook.PREDICATE, node_filter, "node(s) out of luck", blocker=Blocker.VOLUMES)
    ssn.register(Hook.POD_PREDICATE, pod_filter, "words", blocker=Blocker.RESOURCES,
                 when=lambda task: bool(task.pvcs))
    ssn.register(Hook.JOB_VALID, for_a_task)  # wrong: a job's check takes a JobInfo
    ssn.register(Hook.JOB_READY, lambda job: job.no_such_field)  # wrong: no such field
    ssn.register(Hook.NODE_ORDER, lambda task: 0.0)  # wrong: a score takes the rows too
    ssn.register(Hook.JOB_ORDER, lambda job: object())  # wrong: an order key must sort
    ssn.register(Hook.JOB_VALID, lambda job: None, blocker=Blocker.VOLUMES)  # wrong: not a filter
    ssn.register(Hook.PREDICATE, node_filter, when=lambda task: True)  # wrong: cached, no when
    ssn.register(Hook.PREDICATE, node_filter, aside=node_filter, evicting=node_filter)
    ssn.register(Hook.POD_PREDICATE, pod_filter, evicting=pod_filter)
    ssn.register(Hook.PREDICATE, node_filter, aside=for_a_task)  # wrong: a form has the filter's shape
    ssn.register(Hook.JOB_VALID, lambda job: None, evicting=lambda job: None)  # wrong: not a filter


def framework(hooks: HookRegistry, job: JobInfo, task: TaskInfo, rows: Rows, need: Resource) -> None:
    hooks.first_reason(Hook.JOB_VALID, job)
    hooks.mask(Hook.PREDICATE, task, rows)
    hooks.victims(Hook.PREEMPTABLE, task, [task])
    head = hooks.order_key(Hook.QUEUE_HEAD_ORDER)
    hooks.first_reason(Hook.JOB_VALID, task)  # wrong: a task for a job
    hooks.first_reason(Hook.ALLOCATABLE, job)  # wrong: the task is missing
    hooks.all_true(Hook.JOB_VALID, job)  # wrong: reasons are not answers of all_true
    hooks.mask(Hook.NODE_ORDER, task, rows)  # wrong: scores are not masks
    hooks.notify(Hook.ON_ALLOCATE, job)  # wrong: a task took room, not a job
    hooks.victims(Hook.PREEMPTABLE, job, [task])  # wrong: the preemptor is a task
    head(need)  # wrong: the queue is missing
'''


def test_mypy_reports_every_wrong_line_and_no_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "hook_snippet.py"
    source.write_text(SNIPPET)
    monkeypatch.setenv("MYPYPATH", str(ROOT))
    out, err, _ = api.run([str(source), "--config-file", str(ROOT / "setup.cfg"),
                           "--cache-dir", str(tmp_path / "mypy-cache"), "--no-error-summary"])
    lines = SNIPPET.splitlines()
    wrong = {i + 1 for i, line in enumerate(lines) if "# wrong" in line}
    assert len(wrong) == 15
    reported = {int(m.group(1)) for m in re.finditer(r"hook_snippet\.py:(\d+): error", out)}
    assert not err
    assert reported == wrong, f"{sorted(wrong - reported)} not reported, " \
        f"{sorted(reported - wrong)} reported wrongly:\n{out}"
