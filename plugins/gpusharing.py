"""gpusharing: pods that ask for part of a GPU (KAI's gpu-fraction and
gpu-memory annotations) go where a GPU has room for their share.

A fraction goes onto a GPU that is shared already before a free one is
opened, and, among nodes, to the one with such a GPU (KAI's gpusharingorder;
nodeorder's binpack then picks the fullest); never over a GPU's whole, nor
over its memory. A node where the share fits only once pods going away are
gone takes it pipelined, as for whole pods. Which GPU of the node it takes is
the model's choice (kaisched.api.gpudevices), made as the statement places it.

Before a sharer's bind its devices are recorded on it, and each device with
no reservation pod gets one (a ShareGpu effect, written ahead of the bind);
when a session closes, reservation pods no pod shares any more are deleted,
and a device whose sharers run without one gets it back.

The filter, the idle test and the sharing order are cached per class of
pods (the share asked is part of the class) and asked again only about the
nodes that changed, like the resource fit: a node's devices change only with
its row of the node table. They read per-node figures the model keeps as
devices change. With no sharer and no shared GPU in the cluster the plugin
registers nothing, and other pods never reach it.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from kaisched.api.gpuask import GPU_GROUP, RESERVATION_NAMESPACE, GpuShare, groups_of, reservation_name
from kaisched.api.gpudevices import NONE, NOW, NodeGpus, SharedDevice
from kaisched.api.resource import GPU
from kaisched.api.task import TaskInfo
from kaisched.api.types import Blocker, NodeName, PodKey, TaskStatus
from kaisched.errors import ConfigError
from kaisched.framework import Hook, PluginBase, Session
from kaisched.framework.effects import Prebind, ReleaseGpu, Reservation, ReserveGpu, ShareGpu
from kaisched.framework.registry import plugin_arguments

NO_ROOM = "node(s) had no GPU with room for the pod's share"
DEFAULT_IMAGE = "registry.k8s.io/pause:3.10"
# A node with a shared GPU the share fits on comes first, whatever its fill
# (nodeorder's scores are 0-100).
SHARING_BONUS = 1000.0
_RUNNING = (TaskStatus.BOUND, TaskStatus.RUNNING)
# need, whole GPUs free now, and later, self.best's columns: per row asked about.
_Rows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class GpuSharingPlugin(PluginBase):
    name = "gpusharing"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        arguments = plugin_arguments(arguments, "reservationImage")
        image = arguments.get("reservationImage", DEFAULT_IMAGE)
        if not isinstance(image, str) or not image.strip():
            raise ConfigError(f"reservationImage: expected an image name, not {image!r}")
        self.image = image

    def on_session_open(self, ssn: Session) -> None:
        cluster = ssn.cluster
        self.ssn = ssn
        cluster.gpus.watchers = []          # an earlier session's, if any
        self.active = cluster.sharing()
        if not self.active:
            return
        self.gpus = cluster.gpus
        self.table = table = cluster.table
        self.col = table.dim_index.get(GPU)
        # A whole GPU in the table's units, less the tolerance _whole allows.
        self._whole_bound = float(table.scale[self.col]) - 1e-6 if self.col is not None else 0.0
        specs = [n.spec for n in cluster.nodes.values()]
        found = [NodeGpus.of(spec) for spec in specs]
        self.count = np.array([g.count for g in found], dtype=np.int64)
        self.units = np.array([g.units for g in found], dtype=np.int64)
        self.memory = np.array([g.memory or 0 for g in found], dtype=np.int64)
        # The GPU memories the nodes tell (0: none), and each row's among them:
        # what a share takes of a device is asked once per memory (see _need_of).
        self._memories, self._memory_of = np.unique(self.memory, return_inverse=True)
        # Per row, the most free units of a shared device: used ones now and
        # later, releasing ones now and later (see gpudevices.Summary).
        self.best = np.full((4, len(table)), NONE, dtype=np.int64)
        # The filter, idle test and order are asked in turn about the same rows
        # (selection's refresh of a class): what they read of those rows is
        # gathered once (see _rows), until the table or a device changes.
        self._epoch = 0
        self._memo: tuple[Any, ...] | None = None
        self._row_memo: tuple[Any, ...] | None = None      # the same for one row (see _row)
        self._reservations: dict[tuple[Any, ...], Reservation] = {}
        for node in list(self.gpus.summaries):
            self._changed(node)
        self.gpus.watchers = [self._changed]
        self._need: dict[GpuShare, np.ndarray] = {}      # per ask, per row (see _needs)
        ssn.register(Hook.PREDICATE, self.fits, NO_ROOM, blocker=Blocker.RESOURCES,
                     one=self.fits_one, aside=self.could_hold)
        ssn.register(Hook.IDLE, self.free_now, one=self.free_now_one)
        ssn.register(Hook.NODE_ORDER, self.sharing_order, one=self.sharing_order_one)
        ssn.register(Hook.PREBIND, self.prebind)
        ssn.register(Hook.EXPLAIN, self.explain)

    def _changed(self, node: NodeName) -> None:
        row = self.table.index.get(node)
        self._epoch += 1
        if row is not None:         # four scalar writes: cheaper than one of a column
            s, best = self.gpus.summary(node), self.best
            best[0, row], best[1, row] = s.used_now, s.used_later
            best[2, row], best[3, row] = s.releasing_now, s.releasing_later

    # -- where a share fits -------------------------------------------------------------
    def _needs(self, share: GpuShare, rows: np.ndarray) -> np.ndarray:
        """Units one device of each row must have free for the share (-1: none
        can)."""
        return self._need_of(share)[rows]

    def _need_of(self, share: GpuShare) -> np.ndarray:
        """_needs over every row: what a node's GPUs are does not change in a
        session, so it is worked out once per ask, by the share's own units
        of a device (GpuShare.units: a fraction rounded up to whole units)
        for each memory the nodes tell."""
        ask = share.ask
        need = self._need.get(ask)
        if need is None:
            per_memory = [share.units(int(m) or None) for m in self._memories]
            need = np.array([-1 if u is None else u for u in per_memory],
                            dtype=np.int64)[self._memory_of]
            self._need[ask] = need
        return need

    def _rows(self, share: GpuShare, rows: np.ndarray) -> _Rows:
        """What the filter, idle test and order read of these rows for a
        single-GPU share: the units it needs of a device, the whole GPUs free
        now and later, and the most free units of a shared device (the rows
        of self.best). Gathered once for the rows asked about in turn."""
        memo, ask = self._memo, share.ask
        if memo is not None and memo[0] is rows and (memo[1] is ask or memo[1] == ask) \
                and memo[2] == self.table.version and memo[3] == self._epoch:
            found: _Rows = memo[4]
            return found
        idle, later = self._whole(rows)
        found = (self._needs(share, rows), idle, later, self.best[:, rows])
        self._memo = (rows, ask, self.table.version, self._epoch, found)
        return found

    def _whole(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows with a whole GPU free now, and once pods going away are gone."""
        if self.col is None:
            none = np.zeros(len(rows), dtype=bool)
            return none, none
        bound = self._whole_bound
        return (self.table.idle[rows, self.col] >= bound,
                self.table.future[rows, self.col] >= bound)

    def _row(self, share: GpuShare, row: int) -> tuple[int, bool, bool, list[int]]:
        """_rows for one row, as Python values (a refresh of the row a
        placement took asks the filter, idle test and order in turn)."""
        memo, ask = self._row_memo, share.ask
        if memo is not None and memo[0] == row and memo[2] == self.table.version \
                and memo[3] == self._epoch and (memo[1] is ask or memo[1] == ask):
            found: tuple[int, bool, bool, list[int]] = memo[4]
            return found
        need = int(self._need_of(share)[row])
        idle = later = False
        col = self.col
        if col is not None:
            bound = self._whole_bound
            idle = bool(self.table.idle[row, col] >= bound)
            later = bool(self.table.future[row, col] >= bound)
        found = (need, idle, later, self.best[:, row].tolist())
        self._row_memo = (row, ask, self.table.version, self._epoch, found)
        return found

    def fits(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """Nodes where the share fits, now or once pods going away are gone
        (resources aside, could_hold is asked instead)."""
        share = task.gpu
        if share is None:
            return np.ones(len(rows), dtype=bool)
        if share.devices > 1:
            return self._several(share, rows, self._needs(share, rows), now=False)
        need, _, later, best = self._rows(share, rows)
        return (need > 0) & ((best[1] >= need) | later)

    def fits_one(self, task: TaskInfo, row: int) -> bool:
        """fits() for one row."""
        share = task.gpu
        if share is None:
            return True
        if share.devices > 1:
            return bool(self.fits(task, np.array([row], dtype=np.intp))[0])
        need, _, later, best = self._row(share, row)
        return need > 0 and (best[1] >= need or later)

    def free_now(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """Of those, the nodes where the share's first choice of device is free
        now (else it is pipelined: a shared GPU whose room is being released
        is preferred to opening a free one, as KAI does)."""
        share = task.gpu
        if share is None:
            return np.ones(len(rows), dtype=bool)
        if share.devices > 1:
            return self._several(share, rows, self._needs(share, rows), now=True)
        need, idle, later, best = self._rows(share, rows)
        return (need > 0) & ((best[0] >= need) | ((best[2] >= need) & later)
                             | ((best[1] < need) & idle & later))

    def free_now_one(self, task: TaskInfo, row: int) -> bool:
        """free_now() for one row."""
        share = task.gpu
        if share is None:
            return True
        if share.devices > 1:
            return bool(self.free_now(task, np.array([row], dtype=np.intp))[0])
        need, idle, later, best = self._row(share, row)
        return need > 0 and (best[0] >= need or (best[2] >= need and later)
                             or (best[1] < need and idle and later))

    def _several(self, share: GpuShare, rows: np.ndarray, need: np.ndarray, now: bool) -> np.ndarray:
        """A share of several GPUs: the model's plan, node by node."""
        out = np.zeros(len(rows), dtype=bool)
        names = self.table.names
        for j in np.flatnonzero((need > 0) & (self.count[rows] >= share.devices)):
            row = int(rows[j])
            idle, later = self.ssn.cluster.whole_gpus(row)
            plan = self.gpus.plan(share, names[row], idle, later)
            out[j] = plan is not None and (not now or all(kind in NOW for _, kind in plan))
        return out

    def sharing_order(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """Nodes with a shared GPU the share fits on first (KAI's gpusharingorder)."""
        share = task.gpu
        if share is None:
            return np.zeros(len(rows))
        if share.devices > 1:
            need, best1 = self._needs(share, rows), self.best[1, rows]
        else:
            need, _, _, best = self._rows(share, rows)
            best1 = best[1]
        return np.where((need > 0) & (best1 >= need), SHARING_BONUS, 0.0)

    def sharing_order_one(self, task: TaskInfo, row: int) -> float:
        """sharing_order() for one row."""
        share = task.gpu
        if share is None:
            return 0.0
        if share.devices > 1:
            return float(self.sharing_order(task, np.array([row], dtype=np.intp))[0])
        need, _, _, best = self._row(share, row)
        return SHARING_BONUS if need > 0 and best[1] >= need else 0.0

    # -- placing a share ----------------------------------------------------------------
    def prebind(self, task: TaskInfo) -> list[Prebind]:
        """Before an allocated sharer's bind: its devices recorded on it, and a
        reservation pod for each that has none yet."""
        share = task.gpu
        if share is None or task.node_name is None:
            return []
        node = task.node_name
        devices = self.gpus.on(node)
        # Plain loops, not generators: once a placement, mostly over one device.
        reserve: tuple[Reservation, ...] = ()
        for g in share.groups:
            if devices[g].reservation is None:
                reserve += (self._reservation(node, g, task),)
        # Groups its labels named that it no longer holds (most pods name none).
        dropped: tuple[str, ...] = ()
        for k, _ in task.labels:
            if k.startswith(GPU_GROUP):
                dropped = tuple(g for g in groups_of(dict(task.labels), share.devices)
                                if g not in share.groups)
                break
        return [Prebind((ShareGpu(task.key, task.job, node, share.groups, dropped, reserve),),
                        task.job)]

    def _reservation(self, node: NodeName, group: str, task: TaskInfo) -> Reservation:
        # The same for every sharer placed while the device has none: made once.
        key = (node, group, task.placement.tolerations)
        found = self._reservations.get(key)
        if found is None:
            name = reservation_name(group)
            found = self._reservations[key] = Reservation(
                PodKey(f"{RESERVATION_NAMESPACE}/{name}"), node, group,
                task.placement.tolerations, self.image)
        return found

    def could_hold(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """fits() with resources aside (where room could be made, by evicting
        pods or not): nodes whose GPUs could hold the share were they empty."""
        share = task.gpu
        if share is None:
            return np.ones(len(rows), dtype=bool)
        return (self._needs(share, rows) > 0) & (self.count[rows] >= share.devices)

    # -- reservation pods, as the session leaves the devices ----------------------------------
    def on_session_close(self, ssn: Session) -> None:
        if not self.active:
            return
        for node in sorted(self.gpus.devices):
            for group, device in sorted(self.gpus.devices[node].items()):
                if device.orphaned():
                    assert device.reservation is not None
                    ssn.report(ReleaseGpu(device.reservation, node, group, device.kai))
                elif device.reservation is None:
                    runs = _running_sharer(device)
                    if runs is not None:
                        ssn.report(ReserveGpu(self._reservation(node, group, runs)))

    # -- why not ----------------------------------------------------------------------------
    def explain(self, task: TaskInfo) -> str | None:
        """The share, and the most any node has for it, in numbers."""
        share = task.gpu
        if share is None:
            return None
        rows = np.arange(len(self.table))
        if share.memory is not None:
            labelled = self.memory > 0
            if not labelled.any():
                return (f"{share.describe()}: no node labels its GPUs' memory "
                        f"(nvidia.com/gpu.memory), so none takes a gpu-memory pod")
            if share.memory > self.memory.max():
                return (f"{share.describe()}: more than any GPU has (the largest has "
                        f"{int(self.memory.max())} MiB)")
        need = self._needs(share, rows)
        fits = need > 0
        _, later = self._whole(rows)
        wholes = int((later & fits).sum())
        free = np.where(fits & (self.best[1] >= 0), self.best[1], 0)
        if share.memory is not None:
            most = f"{int(free.max(initial=0))} MiB"
        else:
            most = f"{float((free / self.units).max(initial=0.0)):.3g}"
        unlabelled = int((self.memory[self.count > 0] == 0).sum()) if share.memory is not None else 0
        extra = (f"; {unlabelled} node(s) with GPUs do not label their memory "
                 f"(nvidia.com/gpu.memory)") if unlabelled else ""
        return (f"{share.describe()}: no node has it free (the most free on a shared GPU is "
                f"{most}; {wholes} node(s) that could take it have a whole GPU free){extra}")


def _running_sharer(device: SharedDevice) -> TaskInfo | None:
    """A sharer of the device that kaisched bound (not just placed) and whose
    labels name it: the device needs a reservation pod. (Another scheduler's
    sharers are its own to hold.)"""
    for key in sorted(device.live):
        task = device.tasks[key]
        if isinstance(task, TaskInfo) and task.status in _RUNNING and task.gpu is not None \
                and device.group in groups_of(dict(task.labels), task.gpu.devices):
            return task
    return None
