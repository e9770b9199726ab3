"""stalegangeviction: a running gang whose alive tasks
(Succeeded count as alive) stay below minMember for longer than the grace
period is evicted whole: a partial gang holds room and does no work.

The timer lives in the PodGroup status (staleSince), so a restart keeps it.
"""
from __future__ import annotations

from kaisched.api.clock import from_rfc3339, to_rfc3339
from kaisched.api.types import EVICTABLE_STATUSES as EVICTABLE
from kaisched.api.types import READY_STATUSES
from kaisched.framework import Session
from kaisched.framework.effects import Cause


class StaleGangEvictionAction:
    name = "stalegangeviction"

    def execute(self, ssn: Session) -> None:
        for job in ssn.cluster.active_jobs():   # a settled gang is whole
            if job.min_member <= 1 and not job.spec.subgroups and not job.status.stale_since:
                continue    # a gang of one is never partly alive
            on_nodes = [t for t in job.tasks.values() if t.status in EVICTABLE and not t.critical]
            alive = job.count(READY_STATUSES)
            if not on_nodes or ssn.job_ready(job):
                if job.status.stale_since:
                    ssn.stale_since[job.key] = None
                continue
            since = from_rfc3339(job.status.stale_since) or ssn.now
            ssn.stale_since[job.key] = to_rfc3339(since)
            grace = job.spec.stale_grace if job.spec.stale_grace is not None \
                else ssn.config.stale_gang_grace_period
            if ssn.now - since < grace:
                continue
            short = f"{alive}/{job.min_member} pods alive"
            have = job.leaf_counts(READY_STATUSES)
            if job.spec.subgroups and not job.tree.met(have):
                short += f" ({job.tree.shortfall(have)})"
            message = (f"gang {job.key} has had {short} for "
                       f"{ssn.now - since:.0f}s, past its grace period of {grace:.0f}s")
            stmt = ssn.statement()
            for task in on_nodes:
                stmt.evict(task, Cause.STALE_GANG, detail=message)
            stmt.commit()
            ssn.stale_since[job.key] = None
