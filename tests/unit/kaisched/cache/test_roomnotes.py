"""The room noted per event (kaisched.cache.roomnotes): summed into the node
table in one go, or dropped when the table is laid out again anyway."""
from __future__ import annotations

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.node import NodeSpec
from kaisched.api.resource import Resource
from kaisched.api.types import NodeName
from kaisched.cache.roomnotes import RoomNotes

N1 = NodeName("n1")


def laid_out() -> RoomNotes:
    cluster = ClusterInfo.assemble([NodeSpec(N1, Resource.of(cpu=4000, pods=10))], (), ())
    notes = RoomNotes(cluster)
    notes.relayout = False          # as after the first snapshot's layout
    return notes


def test_notes_are_summed_into_the_table_once() -> None:
    notes = laid_out()
    node = notes.cluster.nodes[N1]
    notes.note(N1, Resource.of(cpu=3000, pods=1), False, 1.0)
    notes.note(N1, Resource.of(cpu=1000, pods=1), True, 1.0)
    notes.note(N1, Resource.of(cpu=3000, pods=1), False, -1.0)
    assert node.used.get("cpu") == 0            # nothing until summed
    notes.sum_into_table()
    assert node.used.get("cpu") == 1000
    assert node.releasing.get("cpu") == 1000
    notes.sum_into_table()                      # summed once only
    assert node.used.get("cpu") == 1000


def test_a_node_not_in_the_table_is_left_to_its_layout() -> None:
    notes = laid_out()
    notes.note(NodeName("n2"), Resource.of(cpu=1000), False, 1.0)
    notes.sum_into_table()
    assert not notes.relayout
    assert notes.cluster.nodes[N1].used.get("cpu") == 0


def test_a_resource_no_column_holds_lays_the_table_out_again() -> None:
    notes = laid_out()
    notes.note(N1, Resource.of(cpu=1000), False, 1.0)
    notes.note(N1, Resource.of({"example.com/fpga": 1}), False, 1.0)
    assert notes.relayout
    notes.sum_into_table()          # the layout counts every pod: nothing summed
    assert notes.cluster.nodes[N1].used.get("cpu") == 0
