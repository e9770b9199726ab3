"""Protection: why a running job may not be a victim now, and until when.

A job younger than its min-runtime is not evicted for another job (the
minruntime plugin answers, per kind of eviction: in-queue preemption or a
reclaim by another queue). Preempt and reclaim ask it through the session's
victim filter; an action that moves jobs (consolidation) asks it for both
kinds. Protection comes from the plugin, so it holds only where the plugin
is configured.
"""
from __future__ import annotations

import attrs

from kaisched.api.clock import clock_text
from kaisched.api.quantity import format_duration
from kaisched.framework.effects import Cause


@attrs.frozen(slots=True)
class Protection:
    until: float        # a victim again from this moment
    minimum: float      # the min-runtime that protects it, in seconds
    kind: Cause         # the eviction it is protected from (preempt or reclaim)

    def describe(self, now: float) -> str:
        """ "protected until 10:42 (min-runtime 10m)" """
        return f"protected until {clock_text(self.until, now)} (min-runtime {format_duration(self.minimum)})"
