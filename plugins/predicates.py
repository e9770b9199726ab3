"""predicates: which nodes may take a task.

Static filters (node condition, unschedulable, nodeSelector, required node
affinity, taints) depend only on the pod's Placement, so they are answered
once per placement and group of alike nodes, and kept between sessions
(kaisched.api.nodeshapes); the resource fit (max pods included, as the pods
resource) is computed against future idle room on the rows asked for.
"""
from __future__ import annotations

import numpy as np

from kaisched.api.task import TaskInfo
from kaisched.framework import Hook, PluginBase, Session
from kaisched.framework.selection import RESOURCE_FIT


class PredicatesPlugin(PluginBase):
    name = "predicates"

    def on_session_open(self, ssn: Session) -> None:
        # Kept by the cluster between sessions (node events change them row by
        # row): nothing here walks every node.
        shapes = ssn.cluster.node_shapes()
        table = ssn.cluster.table
        ready, schedulable = shapes.ready, shapes.schedulable
        # Each with its one-row form (a refresh of the row a placement took).
        ssn.register(Hook.PREDICATE, lambda task, rows: ready[rows], "node(s) not Ready",
                     one=lambda task, row: bool(ready[row]))
        ssn.register(Hook.PREDICATE, lambda task, rows: schedulable[rows],
                     "node(s) unschedulable", one=lambda task, row: bool(schedulable[row]))
        ssn.register(Hook.PREDICATE, lambda task, rows: shapes.selected(task.placement)[rows],
                     "node(s) didn't match node selector/affinity",
                     one=lambda task, row: bool(shapes.selected(task.placement)[row]))
        ssn.register(Hook.PREDICATE, lambda task, rows: shapes.tolerated(task.placement)[rows],
                     "node(s) had untolerated taints",
                     one=lambda task, row: bool(shapes.tolerated(task.placement)[row]))

        def resources(task: TaskInfo, rows: np.ndarray) -> np.ndarray:
            return table.request_fits(task.resreq, table.future[rows])

        ssn.register(Hook.PREDICATE, resources, RESOURCE_FIT,
                     one=lambda task, row: table.request_fits_row(task.resreq, table.future, row))
