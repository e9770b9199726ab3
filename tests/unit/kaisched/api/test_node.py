"""NodeTable.copy: a table of its own amounts, sharing what never changes
once laid out (its columns, rows and the vectors memoised per request)."""
from __future__ import annotations

from kaisched.api.node import NodeSpec, NodeTable, resource_dims
from kaisched.api.resource import Resource
from kaisched.api.types import NodeName

ASK = Resource.of(cpu=1000, pods=1)


def test_a_copy_has_its_own_amounts_and_shares_its_memos() -> None:
    specs = [NodeSpec(NodeName(n), Resource.of(cpu=4000, pods=10)) for n in ("n1", "n2")]
    table = NodeTable(specs, resource_dims(["cpu", "pods"]))
    table.add_used(0, table.vector(ASK))
    other = table.copy()
    assert other.vector(ASK) is table.vector(ASK)
    assert other.names is table.names and other.version == table.version
    assert other.log == [] and other.log_start == table.log_end()
    logged = table.log_end()
    other.add_used(1, other.vector(ASK))
    assert other.used[1].tolist() != table.used[1].tolist()
    assert other.used[0].tolist() == table.used[0].tolist()
    assert table.log_end() == logged                        # the copy's touches are its own
    assert other.touched_since(other.log_start) == [1]
