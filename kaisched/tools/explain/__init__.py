"""kaisched explain: why a PodGroup is pending, per task and per node, with
its queue's quota, fair share and usage and the gang's shortfall.

It runs one cycle of the production Scheduler on a copy of the cluster in
the memory backend (the real cluster is only read) and reports what that
cycle decided and wrote: the PodGroup's condition, the Queue's status, the
binds; per node it asks the cycle's own session, which is what it saw.

A module per concern: report (the cycle, and the explanation as a whole),
names (what NAME stands for), fields (what a tool reads), lines (the text of
a queue, the protected jobs, the nodes and their GPUs), gang (a gang that
does not fit as a whole, as allocate tries it).
"""
from kaisched.tools.explain.fields import MAX_NODES
from kaisched.tools.explain.lines import gpu_lines
from kaisched.tools.explain.names import resolve
from kaisched.tools.explain.report import (
    SCHEMA,
    Explained,
    explain,
    explain_data,
    explain_report,
    text_lines,
)

__all__ = ["MAX_NODES", "SCHEMA", "Explained", "explain", "explain_data", "explain_report",
           "gpu_lines", "resolve", "text_lines"]
