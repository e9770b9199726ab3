"""The hook contract: one typed key per hook, one registry, and the few ways
answers combine.

Each hook is a key typed by its callbacks (`HookKey[C]`), declared once in
`Hook`; mypy checks every registration against it, and every question the
session asks through a combinator. Plugins register callbacks tier by tier
(Session.register); the session asks through a combinator, never by walking
the tiers itself:
- order keys: the tuple of every callback's key in tier order, which is the
  same as "first non-zero comparison wins" and sorts in C;
- all_true: every callback must agree (readiness, pipelined);
- first_reason: the first callback that objects, with its reason (validity,
  queue room); reasons: every objection (explanations);
- masks: node filters are ANDed; scores: node scores are summed;
- victims: intersected within a tier, the first tier with an answer wins
  (victims_below: the bound that tier puts on its victims' priority);
- union: every answer once (eviction groups); every: every answer (prebinds,
  claims); notify: tell every callback.

PREDICATE, IDLE and NODE_ORDER answers may depend on a task only through its
requests and placement, its pod rules aside (its equivalence class), and on a
node only through its row: the session caches them per class and refreshes
only the rows that changed.
Each of these three may come with a one-row form (`one`: the task and a
row, the answer for that row alone, equal to the array form's bit for bit):
a refresh of a few rows asks those instead, numpy's per-call cost being all
there is on a one-row array. When any callback of the three lacks one, every
refresh asks the array forms.
POD_PREDICATE and POD_ORDER answers read the pods across a node's topology
domain (inter-pod affinity, topology spread, host ports): they change with
every placement nearby, so the session asks them afresh each time, over all
nodes at once, and combines them with the cached answers.
A POD_PREDICATE or POD_ORDER may be registered with the tasks it is about
(`when`); when every one is, a task none is about takes the cached path.
What a plugin says about a callback travels with its registration: its label
(a filter's words in explanations), a filter's blocker class, a pod rule's when,
a filter's forms asked where room could be made (aside, evicting).
"""
from __future__ import annotations

from typing import Any, Callable, Final, Generic, Mapping, ParamSpec, Protocol, Sequence, TypeVar, TypeVarTuple

import attrs
import numpy as np
import numpy.typing as npt

from kaisched.api.dradevices import Claim
from kaisched.api.job import JobInfo
from kaisched.api.queue import QueueInfo
from kaisched.api.resource import Resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import Blocker, QueueName
from kaisched.framework.effects import Cause, Prebind
from kaisched.framework.protection import Protection

C = TypeVar("C")
K = TypeVar("K")
T = TypeVar("T")
U = TypeVar("U")
P = ParamSpec("P")
Ts = TypeVarTuple("Ts")


class Sortable(Protocol):
    """An order key's answer: anything that sorts (a number, a bool, a tuple).
    It is only ever compared with the same callback's answers."""

    def __lt__(self, other: Any, /) -> bool: ...


Rows = npt.NDArray[np.intp]          # rows of the node table asked about
Mask = npt.NDArray[np.bool_]         # one answer per row asked
Scores = npt.NDArray[np.float64]     # one score per row asked
TaskTest = Callable[[TaskInfo], bool]
# A PREDICATE, IDLE or NODE_ORDER callback's answer for one row (a bool, or a score).
OneRow = Callable[[TaskInfo, int], float]

# The shapes several hooks share.
JobCheck = Callable[[JobInfo], str | None]            # None, or why not
JobTest = Callable[[JobInfo], bool]
TaskCheck = Callable[[JobInfo, TaskInfo], str | None]
NodeFilter = Callable[[TaskInfo, Rows], Mask]
NodeScore = Callable[[TaskInfo, Rows], Scores]
PodFilter = Callable[[TaskInfo, Rows], Mask | None]   # None: the rule leaves the task alone
PodScore = Callable[[TaskInfo, Rows], Scores | None]
VictimFilter = Callable[[TaskInfo, Sequence[TaskInfo]], list[TaskInfo]]
TaskEvent = Callable[[TaskInfo], None]
Taken = Sequence[tuple[QueueName, Resource]]            # victims' queues and what they give


class HookKey(Generic[C]):
    """One hook; C is the type of its callbacks. Invariant in C, so a callback
    of another shape does not register, and a combinator that asks other
    arguments does not accept the key. Named by its attribute in Hook."""

    __slots__ = ("name",)

    def __init__(self) -> None:
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name.lower()

    def __repr__(self) -> str:
        return f"Hook.{self.name.upper()}"


class FilterKey(HookKey[C]):
    """A node filter: registered with its label (its words in explanations)
    and the blocker class of a gang it keeps off every node."""

    __slots__ = ()


class CheckKey(HookKey[C]):
    """A check of a job: registered with the blocker class of a job it
    refuses (what that job waits for: its queue's room, or the cluster's)."""

    __slots__ = ()


class PodRuleKey(HookKey[C]):
    """A rule over the pods around a node, asked afresh at every placement:
    registered with the tasks it is about (when), others skip it."""

    __slots__ = ()


class PodFilterKey(FilterKey[C], PodRuleKey[C]):
    __slots__ = ()


class Hook:
    """Every hook, declared once with its callbacks' type (who asks each, and
    how answers combine: docs/architecture.md, "Hooks, for plugin authors")."""

    # -- orders: sorted by the tuple of every callback's key -------------------------
    QUEUE_ORDER: Final[HookKey[Callable[[QueueInfo], Sortable]]] = HookKey()
    # A queue, given what its head job needs.
    QUEUE_HEAD_ORDER: Final[HookKey[Callable[[QueueInfo, Resource], Sortable]]] = HookKey()
    JOB_ORDER: Final[HookKey[Callable[[JobInfo], Sortable]]] = HookKey()
    TASK_ORDER: Final[HookKey[Callable[[TaskInfo], Sortable]]] = HookKey()
    # A victim queue, what was taken from it so far, the reclaimer's need: the least gives first.
    VICTIM_QUEUE_ORDER: Final[HookKey[Callable[[QueueName, Mapping[str, float], Resource], Sortable]]] = \
        HookKey()

    # -- jobs: None or why not (the first objection); tests every callback passes ----
    JOB_VALID: Final[HookKey[JobCheck]] = HookKey()
    ENQUEUEABLE: Final[CheckKey[JobCheck]] = CheckKey()     # may a not-ready job start now
    JOB_READY: Final[HookKey[JobTest]] = HookKey()
    JOB_PIPELINED: Final[HookKey[JobTest]] = HookKey()
    ALLOCATABLE: Final[HookKey[TaskCheck]] = HookKey()      # room for the task in the job's queue
    OVERUSED: Final[HookKey[TaskCheck]] = HookKey()         # ... to take by reclaiming
    # May the job reclaim what it needs from other queues; ... from these victims.
    RECLAIM_GATE: Final[HookKey[Callable[[JobInfo, Resource], str | None]]] = HookKey()
    # Whether the limits of the job's queue and its ancestors leave room for
    # need (quota aside): None, or why not.
    LIMIT_ROOM: Final[HookKey[Callable[[JobInfo, Resource], str | None]]] = HookKey()
    # Whether need, alone, fits in the fair share of the job's queue: None, or why not.
    SHARE_ROOM: Final[HookKey[Callable[[JobInfo, Resource], str | None]]] = HookKey()
    RECLAIM_FAIR: Final[HookKey[Callable[[JobInfo, Resource, Taken], str | None]]] = HookKey()

    # -- nodes: a task and the rows asked about, an answer per row --------------------
    PREDICATE: Final[FilterKey[NodeFilter]] = FilterKey()            # cached per class
    NODE_ORDER: Final[HookKey[NodeScore]] = HookKey()                # cached per class
    POD_PREDICATE: Final[PodFilterKey[PodFilter]] = PodFilterKey()   # asked afresh
    POD_ORDER: Final[PodRuleKey[PodScore]] = PodRuleKey()            # asked afresh
    # Where what the task needs beyond resources is free now (else it is pipelined).
    POD_IDLE: Final[HookKey[PodFilter]] = HookKey()
    # The same, cached per class like PREDICATE (a share of a GPU: the node's devices).
    IDLE: Final[HookKey[NodeFilter]] = HookKey()
    # More on why no node takes the task.
    EXPLAIN: Final[HookKey[Callable[[TaskInfo], str | None]]] = HookKey()

    # -- victims: (preemptor or reclaimer, candidates) -> the ones it may evict ------
    PREEMPTABLE: Final[HookKey[VictimFilter]] = HookKey()
    RECLAIMABLE: Final[HookKey[VictimFilter]] = HookKey()
    # A preemptor's bound: its victims' jobs have a lower priority than this
    # (None: no bound). Registered beside a PREEMPTABLE filter that refuses the
    # rest, in the same tier; preempt then looks only at jobs below it.
    PREEMPT_BELOW: Final[HookKey[Callable[[TaskInfo], int | None]]] = HookKey()
    # The tasks that must be evicted with a victim.
    EVICTION_GROUP: Final[HookKey[Callable[[TaskInfo], list[TaskInfo]]]] = HookKey()
    # A running job, a kind of eviction, the job it would be for: until when it
    # is no victim of that kind (min-runtime); the latest answer counts.
    PROTECTION: Final[HookKey[Callable[[JobInfo, Cause, JobInfo | None], Protection | None]]] = \
        HookKey()

    # -- what placing does ------------------------------------------------------------
    ON_ALLOCATE: Final[HookKey[TaskEvent]] = HookKey()      # a task took room
    ON_DEALLOCATE: Final[HookKey[TaskEvent]] = HookKey()    # ... gave it back
    # Done before an allocated task's bind.
    PREBIND: Final[HookKey[Callable[[TaskInfo], list[Prebind]]]] = HookKey()
    # A placed task's ResourceClaims allocated and reserved on its node: (old, new).
    CLAIMS: Final[HookKey[Callable[[TaskInfo], list[tuple[Claim, Claim]]]]] = HookKey()


@attrs.frozen(slots=True)
class Registration(Generic[C]):
    """A callback and what its plugin said about it."""

    fn: C
    label: str                              # the plugin's name, unless it gave words
    blocker: Blocker = Blocker.PLACEMENT    # filters, checks: what a gang they refuse waits for
    when: TaskTest | None = None            # pod rules: the tasks they are about (None: every task)
    one: OneRow | None = None               # node filters and scores: the one-row form, if any
    aside: C | None = None                  # filters: the form asked with resources aside
    evicting: C | None = None               # ... and while an eviction is planned

    def room_form(self, evicting: bool) -> C:
        """The form asked where room could be made (evicting: by evicting
        pods), which may be its own (see Session.register)."""
        if evicting and self.evicting is not None:
            return self.evicting
        return self.aside if self.aside is not None else self.fn


class HookRegistry:
    """A session's callbacks, tier by tier; the framework asks them only
    through the combinators below."""

    def __init__(self) -> None:
        # Per tier, per hook, its registrations; the key's C is each list's
        # type, which a dict cannot say, hence Any.
        self._tiers: list[dict[HookKey[Any], list[Registration[Any]]]] = []
        self._flat: dict[HookKey[Any], list[Registration[Any]]] = {}
        self._fns: dict[HookKey[Any], list[Any]] = {}     # asked per placement: kept
        self._ones: dict[HookKey[Any], list[OneRow] | None] = {}

    def begin_tier(self) -> None:
        self._tiers.append({})

    def register(self, key: HookKey[Callable[[*Ts], K]], fn: Callable[[*Ts], K], label: str,
                 blocker: Blocker = Blocker.PLACEMENT, when: TaskTest | None = None,
                 one: OneRow | None = None, aside: Callable[[*Ts], K] | None = None,
                 evicting: Callable[[*Ts], K] | None = None) -> None:
        """Session.register is the plugins' way in: it says which keys take a
        blocker, a when, a one-row form or the forms asked for room."""
        if not self._tiers:
            self.begin_tier()
        self._tiers[-1].setdefault(key, []).append(
            Registration(fn, label, blocker, when, one, aside, evicting))
        self._flat.pop(key, None)
        self._fns.pop(key, None)
        self._ones.pop(key, None)

    def registrations(self, key: HookKey[C]) -> list[Registration[C]]:
        flat = self._flat.get(key)
        if flat is None:
            flat = self._flat[key] = [r for tier in self._tiers for r in tier.get(key, ())]
        return flat

    def callbacks(self, key: HookKey[C]) -> list[C]:
        fns = self._fns.get(key)
        if fns is None:
            fns = self._fns[key] = [r.fn for r in self.registrations(key)]
        return fns

    def ones(self, key: HookKey[C]) -> list[OneRow] | None:
        """The one-row form of every callback, in order; None when one has none."""
        if key in self._ones:
            return self._ones[key]
        found = [r.one for r in self.registrations(key)]
        ones = self._ones[key] = [one for one in found if one is not None] \
            if all(one is not None for one in found) else None
        return ones

    def registered(self) -> list[str]:
        """The names of the hooks some plugin registered a callback for."""
        return sorted({key.name for tier in self._tiers for key, regs in tier.items() if regs})

    # -- combinators -------------------------------------------------------------
    def order_key(self, key: HookKey[Callable[[*Ts], K]]) -> Callable[[*Ts], tuple[K, ...]]:
        fns = self.callbacks(key)

        def order(*args: *Ts) -> tuple[K, ...]:
            return tuple(fn(*args) for fn in fns)
        return order

    def all_true(self, key: HookKey[Callable[P, bool]], *args: P.args, **kwargs: P.kwargs) -> bool:
        for fn in self.callbacks(key):      # a loop: asked per job, per session
            if not fn(*args, **kwargs):
                return False
        return True

    def first_reason(self, key: HookKey[Callable[P, str | None]],
                     *args: P.args, **kwargs: P.kwargs) -> str | None:
        for fn in self.callbacks(key):
            reason = fn(*args, **kwargs)
            if reason:
                return reason
        return None

    def first_objection(self, key: CheckKey[Callable[P, str | None]],
                        *args: P.args, **kwargs: P.kwargs) -> tuple[str, Blocker] | None:
        """The first callback's objection, with what its plugin said a refused
        job waits for."""
        for r in self.registrations(key):
            reason = r.fn(*args, **kwargs)
            if reason:
                return reason, r.blocker
        return None

    def reasons(self, key: HookKey[Callable[P, str | None]],
                *args: P.args, **kwargs: P.kwargs) -> list[str]:
        """Every callback's objection, in order (an empty one is none)."""
        return [found for fn in self.callbacks(key) if (found := fn(*args, **kwargs))]

    def notify(self, key: HookKey[Callable[P, None]], *args: P.args, **kwargs: P.kwargs) -> None:
        for fn in self.callbacks(key):
            fn(*args, **kwargs)

    def every(self, key: HookKey[Callable[P, list[U]]], *args: P.args, **kwargs: P.kwargs) -> list[U]:
        """Every answer of every callback, in order."""
        return [x for fn in self.callbacks(key) for x in fn(*args, **kwargs)]

    def mask(self, key: HookKey[Callable[[T, Rows], Mask]], task: T, rows: Rows) -> Mask:
        # Asked per placement: the first answer, copied, is the start (not a
        # mask of ones and one more pass).
        fns = self.callbacks(key)
        if not fns:
            return np.ones(len(rows), dtype=bool)
        out = np.array(fns[0](task, rows), dtype=bool)
        if out.ndim == 0:                   # one answer for every row
            out = np.full(len(rows), bool(out))
        for fn in fns[1:]:
            out &= fn(task, rows)
        return out

    def score(self, key: HookKey[Callable[[T, Rows], Scores]], task: T, rows: Rows) -> Scores:
        fns = self.callbacks(key)
        if not fns:
            return np.zeros(len(rows))
        out = np.array(fns[0](task, rows), dtype=np.float64)
        if out.ndim == 0:                   # one score for every row
            out = np.full(len(rows), float(out))
        for fn in fns[1:]:
            out += fn(task, rows)
        return out

    def victims(self, key: HookKey[Callable[[T, Sequence[T]], list[T]]], preemptor: T,
                candidates: Sequence[T]) -> list[T]:
        for tier in self._tiers:
            answers = [set(map(id, r.fn(preemptor, candidates))) for r in tier.get(key, ())]
            if answers:
                keep = set.intersection(*answers)
                return [c for c in candidates if id(c) in keep]
        return list(candidates)

    def victims_below(self, key: HookKey[Callable[[T, Sequence[T]], list[T]]],
                      bound: HookKey[Callable[[T], int | None]], preemptor: T) -> int | None:
        """The least bound the tier that decides the victims (the first with a
        filter for key) gives; None when it gives none."""
        for tier in self._tiers:
            if tier.get(key):
                found = [b for r in tier.get(bound, ()) if (b := r.fn(preemptor)) is not None]
                return min(found) if found else None
        return None

    def union(self, key: HookKey[Callable[[T], list[U]]], item: T) -> list[U]:
        """Every answer of every callback, once each, in the order first given."""
        seen: dict[int, U] = {}
        for fn in self.callbacks(key):
            for x in fn(item):
                seen.setdefault(id(x), x)
        return list(seen.values())
