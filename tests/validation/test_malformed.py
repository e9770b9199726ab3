"""Objects with fields of the wrong shape (which only hand-written files get
past an API server with) never stop a replay: each broken object says what is
wrong and every other job is still scheduled."""
from __future__ import annotations

import pytest

from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD
from kaisched.framework import default_config
from kaisched.tools.replay import replay
from tests.builders.malformed import BROKEN, NODE, pod


@pytest.mark.parametrize("broken", BROKEN, ids=lambda o: f"{o['kind']}-{o['metadata']['name']}")
def test_one_broken_object_does_not_stop_the_rest(broken: dict) -> None:
    registry = register_builtins()
    result = replay([NODE, broken, pod("healthy")], default_config(registry), registry, 2)
    assert result.bindings.get("default/healthy") == "node-a"


def test_a_broken_pod_says_what_is_wrong() -> None:
    registry = register_builtins()
    result = replay([NODE, pod("labels-list", metadata__labels=["a"])],
                    default_config(registry), registry, 1)
    assert result.bindings == {}
    status = result.cluster.get(POD, "default", "labels-list").get("status") or {}
    message = next(c["message"] for c in status["conditions"] if c["type"] == "PodScheduled")
    assert "malformed Pod" in message
