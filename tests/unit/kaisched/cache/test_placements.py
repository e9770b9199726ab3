"""The cache's interned placements (kaisched.cache.placements): equal ones are
one object, counted by the tasks holding them; the rules in play are worked
out again only when the set of placements changes."""
from __future__ import annotations

from kaisched.api.clusterinfo import ForeignPod
from kaisched.api.constraints import HostPort, Placement, PodRules
from kaisched.api.resource import Resource
from kaisched.api.types import NodeName
from kaisched.cache.placements import Placements

PORTS = PodRules(host_ports=(HostPort(8080),))


def test_equal_placements_are_one_object_while_any_task_holds_one() -> None:
    book = Placements()
    first = book.keep(Placement(node_selector=(("zone", "a"),)))
    second = book.keep(Placement(node_selector=(("zone", "a"),)))
    assert second is first
    book.drop(second)
    assert book.keep(Placement(node_selector=(("zone", "a"),))) is first    # still held once
    book.drop(first)
    book.drop(first)
    again = Placement(node_selector=(("zone", "a"),))
    assert book.keep(again) is again        # none held it: a new one stands for them


def test_rules_in_play_follow_the_placements_held() -> None:
    book = Placements()
    plain = book.keep(Placement())
    assert not book.rules_in_play(()).host_ports
    rules = book.rules_in_play(())
    assert book.rules_in_play(()) is rules          # nothing changed: not worked out again
    ported = book.keep(Placement(rules=PORTS))
    assert book.rules_in_play(()).host_ports
    book.drop(ported)
    assert not book.rules_in_play(()).host_ports
    book.drop(plain)


def test_rules_in_play_count_other_schedulers_pods() -> None:
    book = Placements()
    book.keep(Placement())
    theirs = ForeignPod(NodeName("n1"), Resource(), rules=PORTS)
    assert book.rules_in_play((theirs,)).host_ports
    assert not book.rules_in_play(()).host_ports
