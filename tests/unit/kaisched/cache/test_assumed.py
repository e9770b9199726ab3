"""Binds sent and not echoed (kaisched.cache.assumed): the pod shows as
bound where its bind names until a version of it with a node arrives, and
only the binds a session left allocated from pending are kept as it left them."""
from __future__ import annotations

from kaisched.api.task import TaskInfo
from kaisched.api.types import NodeName, PodKey, TaskStatus
from kaisched.cache import convert
from kaisched.cache.assumed import Assumed
from kaisched.cache.convert import PodFacts
from kaisched.cache.jobs import Priorities, make_task
from tests.builders.objects import build_pod

A, B = PodKey("default/a"), PodKey("default/b")
N1 = NodeName("n1")


def facts(name: str, node: str | None = None, scheduler: str = "kaisched") -> PodFacts:
    return convert.pod_facts(build_pod(name, node=node, scheduler=scheduler))


def mine(pod: PodFacts) -> bool:
    return pod.scheduler_name == "kaisched"


def task(name: str) -> TaskInfo:
    pod = facts(name)
    return make_task(pod, Priorities(), pod.placement)


def assumed(binds: dict[PodKey, NodeName]) -> Assumed:
    """Binds of a session that left each task allocated where it bound it."""
    book = Assumed()
    book.keep(binds)
    tasks = {key: task(key.split("/")[1]) for key in binds}
    journal = [(t, t.evolve(status=TaskStatus.ALLOCATED, node_name=binds[k]))
               for k, t in tasks.items()]
    book.kept(journal, tasks)
    return book


def test_a_pending_pod_shows_as_bound_until_its_echo() -> None:
    book = assumed({A: N1})
    assert dict(book) == {A: N1}
    shown = book.seen(A, facts("a"), mine)
    assert shown is not None
    assert (shown.status, shown.node_name) == (TaskStatus.BOUND, N1)
    assert A in book                            # no node yet: still waiting
    echo = facts("a", node="n1")
    assert book.seen(A, echo, mine) is echo
    assert A not in book and not book


def test_a_pod_gone_or_another_s_is_no_longer_assumed() -> None:
    book = assumed({A: N1, B: N1})
    assert book.seen(A, None, mine) is None
    theirs = facts("b", scheduler="other")
    assert book.seen(B, theirs, mine) is theirs
    assert len(book) == 0


def test_only_binds_left_allocated_from_pending_on_their_node_are_kept() -> None:
    book = Assumed()
    book.keep({A: N1, B: N1})
    tasks = {A: task("a"), B: task("b")}
    journal = [(tasks[A], tasks[A].evolve(status=TaskStatus.ALLOCATED, node_name=N1)),
               (tasks[B], tasks[B].evolve(status=TaskStatus.ALLOCATED, node_name=NodeName("n2")))]
    kept = book.kept(journal, tasks)
    assert list(kept) == [A] and dict(book) == {A: N1}
    assert book.settling() == kept
    assert book.settling() == {}                # handed out once
    assert book.kept(journal, tasks) == {}      # the binds were taken with the session


def test_forget() -> None:
    book = assumed({A: N1})
    assert book.forget(A)
    assert not book.forget(A)
    shown = book.seen(A, facts("a"), mine)
    assert shown is not None and shown.status is TaskStatus.PENDING
