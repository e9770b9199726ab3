"""HookRegistry: one registry keyed by typed hook keys, and the combinators
that merge the plugins' answers (kaisched.framework.hooks)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from kaisched.api.types import Blocker
from kaisched.framework.hooks import Hook, HookKey, HookRegistry


def registry(*tiers: list[Callable[..., object]], hook: HookKey[Any] = Hook.JOB_ORDER) -> HookRegistry:
    """A registry with one tier per argument, each callback under hook."""
    reg = HookRegistry()
    for t, fns in enumerate(tiers):
        reg.begin_tier()
        for i, fn in enumerate(fns):
            reg.register(hook, fn, f"plugin-{t}-{i}")
    return reg


# -- order keys: a tuple in tier order, i.e. the first non-zero comparison wins --------

def test_order_key_is_the_tuple_of_every_callback_in_tier_order() -> None:
    reg = registry([lambda j: j["prio"], lambda j: j["ready"]], [lambda j: j["share"]])
    key = reg.order_key(Hook.JOB_ORDER)
    assert key({"prio": -5, "ready": 1, "share": 0.5}) == (-5, 1, 0.5)


@pytest.mark.parametrize(("items", "expected"), [
    # the first callback decides where it differs
    ([("a", -1, 1), ("b", -9, 0)], ["b", "a"]),
    # a tie on the first goes to the second
    ([("a", -1, 1), ("b", -1, 0)], ["b", "a"]),
    # a tie everywhere keeps the input order (stable sort)
    ([("a", 0, 0), ("b", 0, 0)], ["a", "b"]),
])
def test_order_key_sorts_lexicographically(items: list, expected: list[str]) -> None:
    reg = registry([lambda x: x[1]], [lambda x: x[2]])
    assert [x[0] for x in sorted(items, key=reg.order_key(Hook.JOB_ORDER))] == expected


def test_order_key_with_no_callbacks_is_empty() -> None:
    assert HookRegistry().order_key(Hook.QUEUE_ORDER)("anything") == ()


def test_register_before_begin_tier_opens_one() -> None:
    reg = HookRegistry()
    ready = lambda j: True  # noqa: E731
    reg.register(Hook.JOB_READY, ready, "gang")
    assert reg.callbacks(Hook.JOB_ORDER) == []
    assert reg.callbacks(Hook.JOB_READY) == [ready]
    assert [r.label for r in reg.registrations(Hook.JOB_READY)] == ["gang"]
    assert reg.registered() == ["job_ready"]


def test_callbacks_are_listed_in_tier_then_registration_order() -> None:
    reg = registry([lambda: 0, lambda: 0], [lambda: 0])
    assert [r.label for r in reg.registrations(Hook.JOB_ORDER)] == ["plugin-0-0", "plugin-0-1", "plugin-1-0"]


def test_what_a_plugin_declares_travels_with_its_registration() -> None:
    reg = HookRegistry()
    claims = lambda task: True  # noqa: E731
    reg.register(Hook.POD_PREDICATE, lambda task, rows: None, "volumes", Blocker.VOLUMES, claims)
    reg.register(Hook.POD_PREDICATE, lambda task, rows: None, "ports")
    first, second = reg.registrations(Hook.POD_PREDICATE)
    assert (first.label, first.blocker, first.when) == ("volumes", Blocker.VOLUMES, claims)
    assert (second.label, second.blocker, second.when) == ("ports", Blocker.PLACEMENT, None)


def test_registering_again_is_seen_by_the_next_question() -> None:
    reg = registry([lambda j: 1])
    assert reg.order_key(Hook.JOB_ORDER)("j") == (1,)
    reg.register(Hook.JOB_ORDER, lambda j: 2, "late")
    assert reg.order_key(Hook.JOB_ORDER)("j") == (1, 2)
    assert [r.label for r in reg.registrations(Hook.JOB_ORDER)] == ["plugin-0-0", "late"]


def test_an_order_key_passes_every_argument_through() -> None:
    reg = registry([lambda queue, need: (queue, need)], [lambda queue, need: need],
                   hook=Hook.QUEUE_HEAD_ORDER)
    assert reg.order_key(Hook.QUEUE_HEAD_ORDER)("q", 3) == (("q", 3), 3)


# -- all_true (readiness, pipelined) ----------------------------------------------------

@pytest.mark.parametrize(("answers", "expected"), [
    ([], True),
    ([[True]], True),
    ([[True, True], [True]], True),
    ([[True, False]], False),
    ([[True], [False]], False),
    ([[False], [True]], False),
])
def test_all_true(answers: list[list[bool]], expected: bool) -> None:
    reg = registry(*[[(lambda a: lambda job: a)(a) for a in tier] for tier in answers],
                   hook=Hook.JOB_READY)
    assert reg.all_true(Hook.JOB_READY, "job") is expected


# -- first_reason (validity, queue room) -----------------------------------------------

@pytest.mark.parametrize(("answers", "expected"), [
    ([], None),
    ([[None, None], [None]], None),
    ([[None, "too big"]], "too big"),
    ([["first"], ["second"]], "first"),
    ([[None], ["", "third"]], "third"),       # an empty reason is no objection
])
def test_first_reason(answers: list[list[str | None]], expected: str | None) -> None:
    reg = registry(*[[(lambda a: lambda job: a)(a) for a in tier] for tier in answers],
                   hook=Hook.JOB_VALID)
    assert reg.first_reason(Hook.JOB_VALID, "job") == expected


def test_first_reason_stops_at_the_first_objection() -> None:
    calls: list[str] = []

    def objects(job: str) -> str:
        calls.append("objects")
        return "no"

    def never(job: str) -> None:
        calls.append("never")

    reg = registry([objects], [never], hook=Hook.JOB_VALID)
    assert reg.first_reason(Hook.JOB_VALID, "job") == "no"
    assert calls == ["objects"]


# -- masks are ANDed, scores are summed -------------------------------------------------

ROWS = np.arange(4)


@pytest.mark.parametrize(("masks", "expected"), [
    ([], [True, True, True, True]),
    ([[True, False, True, True]], [True, False, True, True]),
    ([[True, False, True, True], [True, True, False, True]], [True, False, False, True]),
    ([[False] * 4, [True] * 4], [False] * 4),
])
def test_mask_is_anded(masks: list[list[bool]], expected: list[bool]) -> None:
    reg = registry([(lambda m: lambda task, rows: np.array(m)[rows])(m) for m in masks],
                   hook=Hook.PREDICATE)
    assert reg.mask(Hook.PREDICATE, "task", ROWS).tolist() == expected


def test_mask_reads_only_the_rows_asked() -> None:
    reg = registry([lambda task, rows: np.array([True, False, True, False])[rows]],
                   hook=Hook.PREDICATE)
    assert reg.mask(Hook.PREDICATE, "task", np.array([1, 2])).tolist() == [False, True]


@pytest.mark.parametrize(("scores", "expected"), [
    ([], [0, 0, 0, 0]),
    ([[1, 2, 3, 4]], [1, 2, 3, 4]),
    ([[1, 2, 3, 4], [10, 0, 10, 0]], [11, 2, 13, 4]),
    ([[1, 2, 3, 4], [-1, -2, -3, -4]], [0, 0, 0, 0]),
])
def test_score_is_summed_across_tiers(scores: list[list[float]], expected: list[float]) -> None:
    reg = registry(*[[(lambda s: lambda task, rows: np.array(s, dtype=float)[rows])(s)]
                     for s in scores], hook=Hook.NODE_ORDER)
    assert reg.score(Hook.NODE_ORDER, "task", ROWS).tolist() == expected


# -- victims: intersect within a tier, the first tier with an answer wins ---------------

class Task:
    """Victims are compared by identity, as tasks are."""

    def __init__(self, name: str) -> None:
        self.name = name


A, B, C, D = (Task(n) for n in "abcd")
CANDIDATES = [A, B, C, D]


def keep(*names: str) -> Callable[[Any, list[Task]], list[Task]]:
    return lambda preemptor, candidates: [c for c in candidates if c.name in names]


@pytest.mark.parametrize(("tiers", "expected"), [
    ([], "abcd"),                                           # nobody objects
    ([[keep("a", "b", "c")]], "abc"),
    ([[keep("a", "b", "c"), keep("b", "c", "d")]], "bc"),   # intersected within a tier
    ([[keep("a")], [keep("b")]], "a"),                      # first tier with an answer wins
    ([[], [keep("c", "d")]], "cd"),                         # a tier without callbacks is skipped
    ([[keep()], [keep("a")]], ""),                          # "nobody" is an answer too
    ([[keep("a", "b"), keep("c")], [keep("c")]], ""),       # empty intersection is final
])
def test_victims(tiers: list[list[Callable]], expected: str) -> None:
    reg = registry(*tiers, hook=Hook.PREEMPTABLE)
    got = reg.victims(Hook.PREEMPTABLE, "preemptor", CANDIDATES)
    assert "".join(v.name for v in got) == expected


def test_victims_keep_candidate_order() -> None:
    reverse = lambda preemptor, candidates: list(reversed(candidates))  # noqa: E731
    reg = registry([reverse], hook=Hook.PREEMPTABLE)
    assert reg.victims(Hook.PREEMPTABLE, "p", CANDIDATES) == CANDIDATES


def test_victims_of_different_hooks_do_not_mix() -> None:
    reg = registry([keep("a")], hook=Hook.RECLAIMABLE)
    assert reg.victims(Hook.PREEMPTABLE, "p", CANDIDATES) == CANDIDATES
    assert reg.victims(Hook.RECLAIMABLE, "p", CANDIDATES) == [A]


# -- union (eviction groups) and notify ------------------------------------------------

def test_union_gives_every_answer_once_in_first_given_order() -> None:
    reg = registry([lambda v: [B, A]], [lambda v: [A, C]], hook=Hook.EVICTION_GROUP)
    assert reg.union(Hook.EVICTION_GROUP, A) == [B, A, C]


def test_notify_calls_every_callback_in_order() -> None:
    seen: list[tuple[str, str]] = []
    reg = registry([lambda t: seen.append(("first", t))], [lambda t: seen.append(("second", t))],
                   hook=Hook.ON_ALLOCATE)
    reg.notify(Hook.ON_ALLOCATE, "task")
    reg.notify(Hook.ON_DEALLOCATE, "ignored")
    assert seen == [("first", "task"), ("second", "task")]


def test_every_gives_every_answer_of_every_callback_in_order() -> None:
    reg = registry([lambda t: [A, B]], [lambda t: []], [lambda t: [A]], hook=Hook.PREBIND)
    assert reg.every(Hook.PREBIND, "task") == [A, B, A]


def test_reasons_gives_every_objection_in_order() -> None:
    reg = registry([lambda t: "one", lambda t: None], [lambda t: "", lambda t: "two"],
                   hook=Hook.EXPLAIN)
    assert reg.reasons(Hook.EXPLAIN, "task") == ["one", "two"]
