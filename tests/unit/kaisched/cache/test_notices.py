"""What the cache says of what it read (kaisched.cache.notices): each warning
once, again only when what is wrong changes, nothing once it is right again;
the nodes' first, each by name."""
from __future__ import annotations

from kaisched.api.types import PodKey
from kaisched.cache.notices import IGNORED_DECLARATION, NODE_NOT_USABLE, Notices


def test_a_nodes_problem_is_told_once_and_again_when_it_changes() -> None:
    notices = Notices()
    notices.node("n1", "no allocatable")
    notices.node("n1", "no allocatable")
    (told,) = notices.take()
    assert (told.kind, told.key, told.type, told.reason) == ("Node", "n1", "Warning", NODE_NOT_USABLE)
    assert told.message == "kaisched places no pod on node n1: no allocatable"
    notices.node("n1", "no allocatable")
    assert notices.take() == []
    notices.node("n1", "unreadable taints")
    assert [t.message for t in notices.take()] == [
        "kaisched places no pod on node n1: unreadable taints"]


def test_a_node_put_right_is_told_of_again_only_when_it_breaks_again() -> None:
    notices = Notices()
    notices.node("n1", "no allocatable")
    notices.node("n1", None)        # right before it was told: nothing to tell
    assert notices.take() == []
    notices.node("n1", "no allocatable")
    assert len(notices.take()) == 1


def test_a_pods_ignored_declarations_are_told_once_and_forgotten_when_gone() -> None:
    notices = Notices()
    pod = PodKey("team/p-0")
    assert not notices.warned(pod)
    notices.pod(pod, ("mode 'Loose' is not Strict or NonStrict", "waitTime 'x' is not a duration"))
    assert notices.warned(pod)
    (told,) = notices.take()
    assert (told.kind, told.key, told.reason) == ("Pod", pod, IGNORED_DECLARATION)
    assert told.message == "mode 'Loose' is not Strict or NonStrict; waitTime 'x' is not a duration"
    notices.pod(pod, ("mode 'Loose' is not Strict or NonStrict", "waitTime 'x' is not a duration"))
    assert notices.take() == []
    notices.pod(pod, ())
    assert not notices.warned(pod) and notices.take() == []


def test_nodes_are_told_before_pods_each_by_name() -> None:
    notices = Notices()
    notices.pod(PodKey("b/p"), ("x",))
    notices.pod(PodKey("a/p"), ("y",))
    notices.node("n2", "bad")
    notices.node("n1", "bad")
    assert [t.key for t in notices.take()] == ["n1", "n2", "a/p", "b/p"]
