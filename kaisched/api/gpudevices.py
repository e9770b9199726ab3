"""Each node's GPUs as devices, for GPU sharing.

A whole-GPU pod takes whole devices: the node table counts them like any
resource (which device the kubelet hands it, the scheduler never knows). A
fractional pod takes part of one device -- or of several -- which becomes a
*shared* device: named by its group (KAI's `runai-gpu-group`), held from the
kubelet's view by one reservation pod asking for `nvidia.com/gpu: 1`, and
counted in the node table as one whole GPU, once, however many pods share it
and whether or not its reservation pod exists yet. The sharers count against
their device only: in units, MiB when the node's `nvidia.com/gpu.memory`
label tells the GPU's memory, else thousandths; never more than it holds.

A shared device's GPU is in the table in one of three states, as a pod is:
used (a sharer stays on it, or its reservation pod still holds it), releasing
(every sharer is on its way out, or its reservation pod is left with no
sharer and will be deleted), pipelined (only sharers waiting for room being
released). Every change here returns the states it changed, and the cluster
(kaisched.api.clusterinfo) moves the table with them; undoing a change is
making the opposite one, so a statement's rollback and the cache's rewind
need nothing of their own.

Where a fraction goes on a node, in this order (KAI's gpusharingorder and
gpupack): a shared device with room now, fullest first; an abandoned
reservation's device; a shared device with room once sharers on their way
out are gone (pipelined, rather than open a new GPU); a free GPU; a GPU
that whole-GPU pods or sharers are releasing (pipelined).
"""
from __future__ import annotations

import enum
from typing import Callable, Iterable, Mapping, Protocol

import attrs

from kaisched.api.gpuask import GpuShare, device_units, gpu_memory_label, new_group
from kaisched.api.node import NodeInfo, NodeSpec, NodeTable
from kaisched.api.resource import GPU, Resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import OCCUPYING_STATUSES, NodeName, PodKey, TaskStatus


class Sharer(Protocol):
    """A pod that shares GPUs: kaisched's task, or another scheduler's pod
    (which holds its share all the same: KAI's, or another shard's)."""

    @property
    def key(self) -> PodKey: ...

    @property
    def uid(self) -> str: ...

    @property
    def node_name(self) -> NodeName | None: ...

    @property
    def status(self) -> TaskStatus: ...

    @property
    def gpu(self) -> GpuShare | None: ...

    @property
    def labels(self) -> tuple[tuple[str, str], ...]: ...


NONE = -1           # no such device on the node (a free room of -1 fits nothing)


class WholeGpu(enum.Enum):
    """How a shared device's whole GPU is held, as the node table counts it."""

    USED = "used"
    RELEASING = "releasing"
    PIPELINED = "pipelined"


# A device whose hold changed: (node, before, after).
Change = tuple[NodeName, "WholeGpu | None", "WholeGpu | None"]


@attrs.frozen(slots=True)
class NodeGpus:
    """A node's GPUs: how many, and the memory of each (None: no label)."""

    count: int
    memory: int | None

    @classmethod
    def of(cls, spec: NodeSpec) -> NodeGpus:
        return cls(int(spec.allocatable.get(GPU) + 1e-9), gpu_memory_label(spec.labels))

    @property
    def units(self) -> int:
        return device_units(self.memory)


@attrs.define(eq=False, slots=True)
class SharedDevice:
    """One shared GPU: who holds how much of it, and its reservation pod."""

    node: NodeName
    group: str
    units: int                                  # what it holds
    live: dict[PodKey, int] = attrs.field(factory=dict)         # sharers that stay
    releasing: dict[PodKey, int] = attrs.field(factory=dict)    # sharers on their way out
    pipelined: dict[PodKey, int] = attrs.field(factory=dict)    # sharers waiting for room
    reservation: PodKey | None = None           # the pod holding it from the kubelet's view
    kai: bool = False                           # that pod is KAI's
    waiting: set[PodKey] = attrs.field(factory=set)     # pending pods labelled with it
    tasks: dict[PodKey, Sharer] = attrs.field(factory=dict)     # every sharer, as it is
    taken_now: int = 0                          # units of every holder
    taken_later: int = 0                        # units of those that stay or wait for it

    def whole_gpu(self) -> WholeGpu | None:
        if self.live or self.releasing or self.reservation is not None:
            if not self.live and not self.pipelined and not self.waiting:
                return WholeGpu.RELEASING
            return WholeGpu.USED
        return WholeGpu.PIPELINED if self.pipelined else None

    @property
    def free_now(self) -> int:
        return self.units - self.taken_now

    @property
    def free_later(self) -> int:
        return self.units - self.taken_later

    @property
    def sharers(self) -> int:
        return len(self.live) + len(self.releasing) + len(self.pipelined)

    def empty(self) -> bool:
        return not (self.sharers or self.reservation is not None or self.waiting)

    def orphaned(self) -> bool:
        """A reservation pod no pod shares, nor is labelled to."""
        return self.reservation is not None and not self.sharers and not self.waiting

    def holders(self) -> list[tuple[PodKey, int, str]]:
        """Every sharer, what it holds and how: live, releasing or pipelined."""
        return sorted([*((k, u, "live") for k, u in self.live.items()),
                       *((k, u, "releasing") for k, u in self.releasing.items()),
                       *((k, u, "pipelined") for k, u in self.pipelined.items())])


@attrs.frozen(slots=True)
class Summary:
    """A node's shared devices, as far as a fit of one device needs: the most
    free units of a used device now and later, and of a releasing one."""

    used_now: int = NONE
    used_later: int = NONE
    releasing_now: int = NONE
    releasing_later: int = NONE


EMPTY = Summary()
# Where a share's device comes from: a kind of option, in preference order.
USED_NOW, ABANDONED_NOW, USED_LATER, FREE_NOW, RELEASED_LATER, FREE_LATER = range(6)
NOW = frozenset({USED_NOW, ABANDONED_NOW, FREE_NOW})
_WHOLE = frozenset({ABANDONED_NOW, FREE_NOW, RELEASED_LATER, FREE_LATER})  # take a whole GPU


def first_option(summary: Summary, units: int, idle: bool, later: bool) -> int | None:
    """Where one device of `units` would come from on a node (idle: a whole
    GPU is free now; later: one is free once pods going away are gone, which
    taking any whole GPU needs, as every fit is against the room to come)."""
    if summary.used_now >= units:
        return USED_NOW
    if later and summary.releasing_now >= units:
        return ABANDONED_NOW
    if summary.used_later >= units:
        return USED_LATER
    if idle and later:
        return FREE_NOW
    if later:
        return RELEASED_LATER if summary.releasing_later >= units else FREE_LATER
    return None


class SharedGpus:
    """The shared devices of every node, kept as tasks move."""

    def __init__(self, nodes: Mapping[NodeName, NodeInfo]) -> None:
        self.nodes = nodes
        self.devices: dict[NodeName, dict[str, SharedDevice]] = {}
        self.summaries: dict[NodeName, Summary] = {}
        # Pending pods labelled with a device (a bind that failed after the
        # label was written), by group, whether or not the device is known yet;
        # a device's `waiting` is its group's set here (kept, never replaced).
        self.labelled: dict[str, set[PodKey]] = {}
        self._gpus: dict[NodeName, tuple[NodeSpec, NodeGpus]] = {}
        # Told of each node whose devices changed (a session's per-row fits follow).
        self.watchers: list[Callable[[NodeName], None]] = []

    def __bool__(self) -> bool:
        return bool(self.devices)

    def copy(self, nodes: Mapping[NodeName, NodeInfo]) -> SharedGpus:
        other = SharedGpus(nodes)
        other.labelled = {g: set(keys) for g, keys in self.labelled.items()}
        for name, devices in self.devices.items():
            other.devices[name] = {g: attrs.evolve(
                d, live=dict(d.live), releasing=dict(d.releasing), pipelined=dict(d.pipelined),
                waiting=other.labelled.setdefault(g, set()), tasks=dict(d.tasks))
                for g, d in devices.items()}
        other.summaries = dict(self.summaries)
        return other

    def gpus(self, node: NodeName) -> NodeGpus | None:
        """The node's GPUs, read off its spec once (again when the spec changes)."""
        info = self.nodes.get(node)
        if info is None:
            return None
        known = self._gpus.get(node)
        if known is None or known[0] is not info.spec:
            known = self._gpus[node] = (info.spec, NodeGpus.of(info.spec))
        return known[1]

    def on(self, node: NodeName) -> dict[str, SharedDevice]:
        return self.devices.get(node, {})

    def summary(self, node: NodeName) -> Summary:
        return self.summaries.get(node, EMPTY)

    def orphans(self) -> list[SharedDevice]:
        return [d for node in sorted(self.devices) for _, d in sorted(self.devices[node].items())
                if d.orphaned()]

    # -- changes ------------------------------------------------------------------------
    def move(self, old: Sharer | None, new: Sharer | None) -> list[Change]:
        """A sharer changed (placed, evicted, undone, gone): the devices follow."""
        gone, came = _unplaced(old), _unplaced(new)
        if gone and came:
            return []           # a pending pod that names no device: nothing here to move
        # An unplaced side holds nothing and is labelled for nothing: no
        # device to leave or take (the pending pod a placement takes, mostly).
        before: dict[SharedDevice, WholeGpu | None] = {}
        if not gone:
            assert old is not None
            self._leave(old, before)
        if not came:
            assert new is not None
            self._take(new, before)
        return self._settle(before)

    def reserve(self, node: NodeName, group: str, pod: PodKey, kai: bool,
                present: bool) -> list[Change]:
        """A reservation pod for a device appeared (present) or went away."""
        if node not in self.nodes:
            return []
        before: dict[SharedDevice, WholeGpu | None] = {}
        device = self._device(node, group, before)
        if present:
            device.reservation, device.kai = pod, kai
        elif device.reservation == pod:
            device.reservation, device.kai = None, False
        return self._settle(before)

    def place(self, task: TaskInfo, node: NodeName, idle: float, later: float,
              groups: tuple[str, ...] | None = None, pipelined: bool = False) -> GpuShare:
        """The task's share as placed on the node: the devices it takes (given,
        or chosen in preference order: with room now unless pipelined) and its
        portion of each. idle and later: whole GPUs free on the node now, and
        once pods going away are gone."""
        share = task.gpu
        assert share is not None
        gpus = self.gpus(node)
        assert gpus is not None, f"{task.key}: placed on unknown node {node}"
        if groups is None:
            found = self.plan(share, node, idle, later, own=share.groups, pod=(task.key, task.uid),
                              now_only=not pipelined)
            assert found is not None, f"{task.key}: no GPU of {node} takes {share.describe()}"
            groups = tuple(g for g, _ in found)
        # Made directly: attrs.evolve's per-field lookups cost more, once a placement.
        return GpuShare(share.fraction, share.memory, share.devices, groups,
                        share.portion_on(gpus.memory))

    def plan(self, share: GpuShare, node: NodeName, idle: float, later: float,
             own: tuple[str, ...] = (), pod: tuple[str, str] = ("", ""),
             now_only: bool = False) -> list[tuple[str, int]] | None:
        """The devices a share would take on the node, each with the kind of
        option it is (NOW ones fit now), or None when it does not fit
        (now_only: only devices with room now, for a pod placed, not pipelined)."""
        gpus = self.gpus(node)
        if gpus is None:
            return None
        units = share.units(gpus.memory)
        if units is None:
            return None
        whole_now, whole_later = int(idle + 1e-6), int(later + 1e-6)
        devices = self.on(node)
        out: list[tuple[str, int]] = []
        taken: set[str] = set()
        for index in range(share.devices):
            # The least (kind, not its own, free units, name): the preference order.
            best: tuple[int, bool, int, str] | None = None
            for group, device in devices.items():
                if group in taken:
                    continue
                kind = self._option(device, units, whole_later)
                if kind is None or (now_only and kind not in NOW):
                    continue
                free = device.units - (device.taken_now if kind in NOW else device.taken_later)
                option = (kind, group not in own, free, group)
                if best is None or option < best:
                    best = option
            if best is None or best[0] > FREE_NOW:
                if whole_now >= 1 and whole_later >= 1:
                    best = (FREE_NOW, True, gpus.units, "")
                elif best is None and whole_later >= 1 and not now_only:
                    best = (FREE_LATER, True, gpus.units, "")
            if best is None:
                return None
            kind, _, _, group = best
            if kind in _WHOLE:
                whole_later -= 1
            if kind == FREE_NOW:
                whole_now -= 1
            if not group:
                group = new_group(node, pod[1], pod[0], index)
            taken.add(group)
            out.append((group, kind))
        return out

    @staticmethod
    def _option(device: SharedDevice, units: int, whole_later: int) -> int | None:
        # hold() is RELEASING and the free units, inlined: asked of every
        # device of the node a share lands on.
        free_now = device.units - device.taken_now
        if not device.live and not device.pipelined and not device.waiting \
                and (device.releasing or device.reservation is not None):
            if whole_later < 1:
                return None
            if free_now >= units:
                return ABANDONED_NOW
            return RELEASED_LATER if device.units - device.taken_later >= units else None
        if free_now >= units:
            return USED_NOW
        return USED_LATER if device.units - device.taken_later >= units else None

    # -- internals --------------------------------------------------------------------
    def _groups(self, task: Sharer) -> tuple[str, ...]:
        """The devices a placed sharer holds: those its labels name, or, when
        they do not name one per device (placed by someone who did not say),
        devices of its own, so that it is counted all the same."""
        share = task.gpu
        assert share is not None
        if len(share.groups) == share.devices:
            return share.groups
        node = task.node_name or ""
        return tuple(new_group(node, task.uid, task.key, i) for i in range(share.devices))

    def _kind(self, task: Sharer) -> str | None:
        if task.node_name is None or task.node_name not in self.nodes:
            return None
        if task.status is TaskStatus.PIPELINED:
            return "pipelined"
        if task.status is TaskStatus.RELEASING:
            return "releasing"
        return "live" if task.status in OCCUPYING_STATUSES else None

    def _mark_labelled(self, task: Sharer, share: GpuShare, before: dict[SharedDevice, WholeGpu | None],
                       joins: bool) -> None:
        """A pending pod labelled for GPU groups joins (or leaves) their
        labelled sharers: it holds no share yet, but the devices remember it."""
        if task.status is not TaskStatus.PENDING or not share.groups:
            return
        for device in self._labelled(share.groups):
            before.setdefault(device, device.whole_gpu())
        for group in share.groups:
            if joins:
                self.labelled.setdefault(group, set()).add(task.key)
            else:
                self.labelled.get(group, set()).discard(task.key)

    def _take(self, task: Sharer, before: dict[SharedDevice, WholeGpu | None]) -> None:
        kind = self._kind(task)
        share = task.gpu
        assert share is not None
        if kind is None:
            self._mark_labelled(task, share, before, joins=True)
            return
        node = task.node_name
        assert node is not None
        gpus = self.gpus(node)
        assert gpus is not None
        units = share.units(gpus.memory)
        units = gpus.units if units is None else units      # no longer fits: all of it, say
        for group in self._groups(task):
            device = self._device(node, group, before)
            getattr(device, kind)[task.key] = units
            device.tasks[task.key] = task
            device.taken_now += units
            if kind != "releasing":
                device.taken_later += units

    def _leave(self, task: Sharer, before: dict[SharedDevice, WholeGpu | None]) -> None:
        kind = self._kind(task)
        share = task.gpu
        assert share is not None
        if kind is None:
            self._mark_labelled(task, share, before, joins=False)
            return
        node = task.node_name
        assert node is not None
        for group in self._groups(task):
            device = self.devices[node][group]
            before.setdefault(device, device.whole_gpu())
            units = getattr(device, kind).pop(task.key)
            del device.tasks[task.key]
            device.taken_now -= units
            if kind != "releasing":
                device.taken_later -= units

    def _labelled(self, groups: Iterable[str]) -> list[SharedDevice]:
        """The existing devices of these groups, wherever they are."""
        wanted = set(groups)
        return [d for devices in self.devices.values() for g, d in devices.items() if g in wanted]

    def _device(self, node: NodeName, group: str,
                before: dict[SharedDevice, WholeGpu | None]) -> SharedDevice:
        devices = self.devices.setdefault(node, {})
        device = devices.get(group)
        if device is None:
            gpus = self.gpus(node)
            device = devices[group] = SharedDevice(node, group, gpus.units if gpus else 1,
                                                   waiting=self.labelled.setdefault(group, set()))
        before.setdefault(device, device.whole_gpu())
        return device

    def _settle(self, before: dict[SharedDevice, WholeGpu | None]) -> list[Change]:
        changes: list[Change] = []
        touched: set[NodeName] = set()
        for device, was in before.items():
            now = device.whole_gpu()
            if now is not was:
                changes.append((device.node, was, now))
            touched.add(device.node)
            if device.empty():
                devices = self.devices.get(device.node, {})
                if devices.get(device.group) is device:
                    del devices[device.group]
                    if not devices:
                        self.devices.pop(device.node, None)
        for node in touched:
            self.summaries[node] = _summary(self.on(node).values())
            for watcher in self.watchers:
                watcher(node)
        return changes


def _unplaced(task: Sharer | None) -> bool:
    """Nothing of a shared device: no pod, or a pending one whose labels name none."""
    return task is None or task.gpu is None or (task.node_name is None and not task.gpu.groups)


def _summary(devices: Iterable[SharedDevice]) -> Summary:
    # SharedDevice.whole_gpu() and the free units inlined: worked out for the node
    # a sharer lands on, once a placement.
    used_now = used_later = releasing_now = releasing_later = NONE
    for device in devices:
        live = device.live
        if live or device.releasing or device.reservation is not None:
            free_now = device.units - device.taken_now
            free_later = device.units - device.taken_later
            if not live and not device.pipelined and not device.waiting:     # RELEASING
                if free_now > releasing_now:
                    releasing_now = free_now
                if free_later > releasing_later:
                    releasing_later = free_later
                continue
        elif device.pipelined:          # PIPELINED
            free_now = device.units - device.taken_now
            free_later = device.units - device.taken_later
        else:                           # held by nothing
            continue
        if free_now > used_now:
            used_now = free_now
        if free_later > used_later:
            used_later = free_later
    return Summary(used_now, used_later, releasing_now, releasing_later)


ONE_GPU = Resource.of({GPU: 1})
# How a shared device's GPU counts in the table: like a pod in that state.
HOLD_KINDS: dict[WholeGpu | None, tuple[str, ...]] = {
    WholeGpu.USED: ("used",), WholeGpu.RELEASING: ("used", "releasing"), WholeGpu.PIPELINED: ("pipelined",)}


def apply_holds(table: NodeTable, changes: list[Change]) -> None:
    """Shared devices whose whole GPU changed how it is held: the table counts
    it once, as a pod holding one GPU in that state would be counted."""
    if not changes:
        return
    vec = table.known_vector(ONE_GPU)
    if vec is None:
        return          # no GPU column: no node has GPUs to share
    for node, was, now in changes:
        row = table.index.get(node)
        if row is None:
            continue
        for hold, sign in ((was, -1.0), (now, 1.0)):
            kinds = HOLD_KINDS.get(hold, ())
            if "used" in kinds:
                table.add_used(row, vec, sign)
            if "releasing" in kinds:
                table.add_releasing(row, vec, sign)
            if "pipelined" in kinds:
                table.add_pipelined(row, vec, sign)
