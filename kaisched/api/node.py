"""NodeInfo and the NodeTable that holds every node's accounting as arrays.

The table is the single source of truth for used / releasing / pipelined
amounts; NodeInfo reads its row. Vectorised fits over the table are what make
a session over 5,000 nodes fast.
"""
from __future__ import annotations

import copy
from typing import Mapping, Sequence

import attrs
import numpy as np

from kaisched.api.constraints import Taint
from kaisched.api.resource import CPU, MEMORY, PODS, WELL_KNOWN, Resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import NodeName, PodKey

EPSILON = 1e-6
_WHOLE_UNITS = frozenset({CPU, MEMORY, PODS})


@attrs.frozen(slots=True, eq=False)
class NodeSpec:
    name: NodeName
    allocatable: Resource
    labels: Mapping[str, str] = attrs.field(factory=dict)
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False
    created: str = ""               # its creationTimestamp, as written (read when asked)


def resource_dims(names: Sequence[str]) -> tuple[str, ...]:
    """Well-known resources first, then the rest by name; pods always present."""
    rest = sorted(set(names) - set(WELL_KNOWN))
    return WELL_KNOWN + tuple(rest)


class NodeTable:
    """Accounting of all nodes, one row a node (sorted by name), one column a resource."""

    def __init__(self, specs: Sequence[NodeSpec], dims: tuple[str, ...]) -> None:
        self.dims = dims
        self.dim_index = {d: i for i, d in enumerate(dims)}
        self.names: list[NodeName] = [s.name for s in specs]
        self.index: dict[NodeName, int] = {n: i for i, n in enumerate(self.names)}
        # cpu is already in millicores, memory and pods whole; everything else
        # (fractional GPUs) is held in milli-units, so sums and their undo are
        # exact integer arithmetic in float64.
        self.scale = np.array([1.0 if d in _WHOLE_UNITS else 1000.0 for d in dims])
        self.alloc = np.array([[s.allocatable.get(d) for d in dims] for s in specs],
                              dtype=np.float64).reshape(len(specs), len(dims)) * self.scale
        self.used = np.zeros_like(self.alloc)
        self.releasing = np.zeros_like(self.alloc)
        self.pipelined = np.zeros_like(self.alloc)
        self.idle = self.alloc.copy()
        self.future = self.alloc.copy()      # idle + releasing - pipelined
        self._vectors: dict[Resource, np.ndarray] = {}
        self._fit_terms: dict[Resource, tuple[np.ndarray | None, np.ndarray]] = {}
        self._row_terms: dict[Resource, list[tuple[int, float]]] = {}
        # Which rows changed when: caches of per-node answers refresh only those.
        self.version = 0
        self.row_version = np.zeros(len(specs), dtype=np.int64)
        # And in what order: the rows touched, one entry a touch, so that a cache
        # catching up reads the few rows changed since it last looked, not a
        # version per node. Bounded (see _touch): log_start counts what was cut.
        self.log: list[int] = []
        self.log_start = 0

    def __len__(self) -> int:
        return len(self.names)

    def copy(self) -> NodeTable:
        """A table of its own amounts; what never changes once laid out (the
        columns, the rows' names, the vectors and fit terms memoised per
        request) is shared."""
        other = copy.copy(self)
        other.log, other.log_start = [], self.log_end()
        for name in ("alloc", "used", "releasing", "pipelined", "idle", "future", "row_version"):
            setattr(other, name, getattr(self, name).copy())
        return other

    def vector(self, res: Resource) -> np.ndarray:
        """The request as a row; a resource no node offers makes it fit nowhere."""
        vec = self._vectors.get(res)
        if vec is None:
            vec = np.zeros(len(self.dims))
            for name, value in res.items:
                idx = self.dim_index.get(name)
                if idx is None:
                    vec[self.dim_index[PODS]] = np.inf
                else:
                    vec[idx] = round(value * self.scale[idx], 6)
            self._vectors[res] = vec
        return vec

    def known_vector(self, res: Resource) -> np.ndarray | None:
        """The request as a row, or None when a column for one of its resources
        is missing (the table must be laid out again to count it)."""
        vec = self._vectors.get(res)
        if vec is not None:
            return vec
        if any(name not in self.dim_index for name, _ in res.items):
            return None
        return self.vector(res)

    def resource(self, row: np.ndarray) -> Resource:
        return Resource.of({d: float(v / k) for d, v, k in zip(self.dims, row, self.scale, strict=True)
                            if abs(v) > EPSILON})

    def amount(self, dim: int, value: float) -> float:
        """A table value of one resource in the resource's own unit."""
        return float(value / self.scale[dim])

    def _touch(self, i: int) -> None:
        self.version += 1
        self.row_version[i] = self.version
        self.log.append(i)
        if len(self.log) > self._log_limit():
            self.trim_log()

    def _log_limit(self) -> int:
        return max(4 * len(self.names), 4096)

    def log_end(self) -> int:
        """The position after the last touch logged (counting the ones cut)."""
        return self.log_start + len(self.log)

    def touched_since(self, pos: int) -> list[int] | None:
        """The rows touched since log position pos (repeats included), or None
        when the log no longer reaches back that far."""
        if pos < self.log_start:
            return None
        return self.log[pos - self.log_start:]

    def trim_log(self) -> None:
        """Forget the touches logged so far: a reader from before them falls back
        to comparing row versions."""
        self.log_start += len(self.log)
        self.log = []

    def row_of(self, allocatable: Resource) -> np.ndarray:
        """What a node offers, as its alloc row (laid out as __init__ does)."""
        return np.array([allocatable.get(d) for d in self.dims], dtype=np.float64) * self.scale

    def set_alloc(self, i: int, vec: np.ndarray) -> None:
        """The node offers something else now: idle and future follow."""
        self._touch(i)
        self.alloc[i] = vec
        self.idle[i] = vec - self.used[i]
        self.future[i] = self.idle[i] + self.releasing[i] - self.pipelined[i]

    # The three kinds of accounting change; each keeps idle and future in step.
    # A sign of 1 adds vec itself (x * 1.0 is x): one array call fewer a placement.
    # Each row is changed through its view (row = a[i]; row += delta): the
    # same sums as a[i] += delta, without writing the row back over itself.
    def add_used(self, i: int, vec: np.ndarray, sign: float = 1.0) -> None:
        self._touch(i)
        delta = vec if sign == 1.0 else vec * sign
        row = self.used[i]
        row += delta
        row = self.idle[i]
        row -= delta
        row = self.future[i]
        row -= delta

    def add_releasing(self, i: int, vec: np.ndarray, sign: float = 1.0) -> None:
        self._touch(i)
        delta = vec if sign == 1.0 else vec * sign
        row = self.releasing[i]
        row += delta
        row = self.future[i]
        row += delta

    def add_pipelined(self, i: int, vec: np.ndarray, sign: float = 1.0) -> None:
        self._touch(i)
        delta = vec if sign == 1.0 else vec * sign
        row = self.pipelined[i]
        row += delta
        row = self.future[i]
        row -= delta

    def add_many(self, rows: np.ndarray, vecs: np.ndarray, releasing: np.ndarray) -> None:
        """Occupy rows with vecs in one go (building a snapshot); releasing
        marks the tasks whose room is on its way back."""
        used = np.zeros_like(self.used)
        np.add.at(used, rows, vecs)
        back = np.zeros_like(self.used)
        if releasing.any():
            np.add.at(back, rows[releasing], vecs[releasing])
        self.used += used
        self.idle -= used
        self.releasing += back
        self.future += back - used
        self._touch_many(np.unique(rows))

    def _touch_many(self, rows: np.ndarray) -> None:
        self.version += 1
        self.row_version[rows] = self.version
        if len(self.log) + len(rows) > self._log_limit():
            self.log_start += len(self.log) + 1     # past this touch too: not logged
            self.log = []
        else:
            self.log.extend(rows.tolist())

    def add_sums(self, used: np.ndarray, releasing: np.ndarray, pipelined: np.ndarray,
                 rows: np.ndarray) -> None:
        """Whole-table deltas of each kind at once (rows: those they touch)."""
        self.used += used
        self.idle -= used
        self.releasing += releasing
        self.pipelined += pipelined
        self.future += releasing - used - pipelined
        self._touch_many(rows)

    def request_fits(self, res: Resource, room: np.ndarray) -> np.ndarray:
        """fits(vector(res), room), with the columns the request names and
        their bounds worked out once per request: it is asked per placement."""
        terms = self._fit_terms.get(res)
        if terms is None:
            vec = self.vector(res)
            named = np.flatnonzero(vec)
            if len(named) == len(self.dims):
                terms = self._fit_terms[res] = (None, vec - EPSILON)
            else:
                terms = self._fit_terms[res] = (named, vec[named] - EPSILON)
        cols, bound = terms
        if cols is None:
            return np.asarray((room >= bound).all(axis=1))
        return np.asarray((room[:, cols] >= bound).all(axis=1))

    def request_fits_row(self, res: Resource, room: np.ndarray, row: int) -> bool:
        """request_fits for one row of room, in plain Python (the same float
        comparisons): a refresh of one row pays numpy's per-call cost for
        nothing."""
        terms = self._row_terms.get(res)
        if terms is None:
            vec = self.vector(res)
            terms = self._row_terms[res] = [(int(c), float(vec[c] - EPSILON))
                                            for c in range(len(self.dims)) if vec[c]]
        values = room[row].tolist()
        for col, bound in terms:
            if not values[col] >= bound:
                return False
        return True

    def weights(self) -> np.ndarray:
        """Per resource, the most a node has of it (1 where none has any): what
        packing divides room by, to weigh the resources against each other."""
        return np.where(self.alloc > 0, self.alloc, 1.0).max(axis=0)

    def fits(self, vec: np.ndarray, room: np.ndarray) -> np.ndarray:
        """Mask of nodes whose room holds vec in every requested resource."""
        cols = np.flatnonzero(vec)
        if len(cols) == len(self.dims):
            return np.asarray((room >= vec - EPSILON).all(axis=1))
        return np.asarray((room[:, cols] >= vec[cols] - EPSILON).all(axis=1))


@attrs.define(eq=False, slots=True)
class NodeInfo:
    spec: NodeSpec
    index: int
    table: NodeTable
    tasks: dict[PodKey, TaskInfo] = attrs.field(factory=dict)

    @property
    def name(self) -> NodeName:
        return self.spec.name

    @property
    def allocatable(self) -> Resource:
        return self.spec.allocatable

    @property
    def used(self) -> Resource:
        return self.table.resource(self.table.used[self.index])

    @property
    def idle(self) -> Resource:
        return self.table.resource(self.table.idle[self.index])

    @property
    def releasing(self) -> Resource:
        return self.table.resource(self.table.releasing[self.index])

    @property
    def pipelined(self) -> Resource:
        return self.table.resource(self.table.pipelined[self.index])

    @property
    def future_idle(self) -> Resource:
        return self.table.resource(self.table.future[self.index])


def tightest(room: np.ndarray, vec: np.ndarray, weights: np.ndarray) -> int | None:
    """Of the rows of room (rows x resources), the one vec fits on with the
    least room left (each resource divided by its weight), the first of
    equals; None when it fits on none. Best fit, as packing asks it."""
    fits = np.flatnonzero((room >= vec - EPSILON).all(axis=1))
    if not len(fits):
        return None
    return int(fits[int(np.argmin(((room[fits] - vec) / weights).sum(axis=1)))])

