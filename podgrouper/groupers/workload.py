"""Owners whose pods do not form a gang: one PodGroup per top owner, minMember 1.

Deployments, StatefulSets, ReplicaSets, bare pods, unknown kinds, and batch
Jobs and CronJobs (a Job's pods run independently; its parallelism is not a
gang unless the kaisched.io/min-member annotation says so).
"""
from __future__ import annotations

from podgrouper.groupers.spec import NO_POD, GroupSpec, Lineage, Owner, base


def default_grouper(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    return base(owner)


def job(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    """batch/v1 Job: one PodGroup per Job (per run, for a CronJob's Jobs)."""
    return base(owner)


def cron_job(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    """batch/v1 CronJob, reached only when a pod names one as its controller."""
    return base(owner)
