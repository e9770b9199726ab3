"""What the API server would refuse of a job: its operator's objects and the
pods it would make, checked by the same rules replay applies to its input.

An emulated operator makes nothing of a refused job, as on a cluster its
create calls would fail; the job is reported as failed with the reason.
"""
from __future__ import annotations

from typing import Mapping

from kaisched.sim.operators import blueprint, pod_object
from kaisched.sim.scenario import JobSpec
from kaisched.validation import partition, summarize


def refusals(spec: JobSpec, scheduler_name: str, priorities: Mapping[str, int]) -> list[str]:
    """One line per object of the job a cluster would refuse (none: it may be made)."""
    plan = blueprint(spec, scheduler_name)
    made = [{**obj, "metadata": {**obj["metadata"], "uid": f"00000000-0000-4000-8000-{i:012d}"}}
            for i, obj in enumerate(plan.objects)]
    pods = [pod_object(pod, plan.templates[pod.role], spec.namespace,
                       made[pod.parent] if pod.parent is not None else None, priorities)
            for pod in plan.pods]
    _, problems = partition([*made, *pods])
    return summarize(problems)
