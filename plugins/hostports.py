"""hostports: no two pods on a node with the same hostPort, protocol and
host IP (an empty or 0.0.0.0 address takes the port on every address).

Ports are indexed by (protocol, port) -> node row -> the pods' HostPorts,
kept as tasks are placed and undone; the filter is a POD_PREDICATE, asked
afresh (only pods asking for ports do any work).
"""
from __future__ import annotations

import numpy as np

from kaisched.api.constraints import HostPort
from kaisched.api.podindex import PRESENT, present
from kaisched.api.task import TaskInfo
from kaisched.api.types import PodKey
from kaisched.framework import Hook, PluginBase, Session

_Used = dict[tuple[str, int], dict[int, list[tuple[PodKey, HostPort]]]]


class HostPortsPlugin(PluginBase):
    name = "hostports"

    def on_session_open(self, ssn: Session) -> None:
        cluster = ssn.cluster
        if not cluster.rules_in_play().host_ports:
            return
        self.cluster = cluster
        self.used: _Used = {}
        self.held: dict[PodKey, tuple[int, tuple[HostPort, ...]]] = {}
        index = cluster.table.index
        for job in cluster.jobs.values():
            for task in job.tasks.values():
                if task.placement.rules.host_ports and task.node_name in index \
                        and task.status in PRESENT:
                    self._take(task.key, index[task.node_name], task.placement.rules.host_ports)
        for pod in cluster.foreign:
            if pod.rules.host_ports and pod.node_name in index:
                self._take(pod.key, index[pod.node_name], pod.rules.host_ports)
        ssn.register(Hook.POD_PREDICATE, self.free, "node(s) didn't have free ports for the pod")
        ssn.register(Hook.ON_ALLOCATE, self._allocated)
        ssn.register(Hook.ON_DEALLOCATE, self._deallocated)

    def free(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        wanted = task.placement.rules.host_ports
        if not wanted:
            return None             # the session skips it
        out = np.ones(len(rows), dtype=bool)
        taken = np.zeros(len(self.cluster.table), dtype=bool)
        for port in wanted:
            for row, holders in self.used.get((port.protocol, port.port), {}).items():
                if any(h.conflicts(port) for key, h in holders if key != task.key):
                    taken[row] = True
        return out & ~taken[rows]

    def _take(self, key: PodKey, row: int, ports: tuple[HostPort, ...]) -> None:
        self.held[key] = (row, ports)
        for port in ports:
            self.used.setdefault((port.protocol, port.port), {}).setdefault(row, []).append((key, port))

    def _allocated(self, task: TaskInfo) -> None:
        ports = task.placement.rules.host_ports
        # An undone eviction of a pod on a node the table does not hold (another
        # pool's): its ports there were never counted, nor are they now.
        row = self.cluster.table.index.get(task.node_name) if task.node_name is not None else None
        if ports and task.key not in self.held and row is not None:
            self._take(task.key, row, ports)

    def _deallocated(self, task: TaskInfo) -> None:
        if task.key not in self.held or present(self.cluster, task):
            return
        row, ports = self.held.pop(task.key)
        for port in ports:
            holders = self.used[(port.protocol, port.port)]
            holders[row] = [(k, p) for k, p in holders[row] if k != task.key]
            if not holders[row]:
                del holders[row]
