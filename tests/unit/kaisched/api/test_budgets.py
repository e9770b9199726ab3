"""PodDisruptionBudgets as the session reads them: converted once by the
cache, their allowance counted as the disruption controller counts it.

Under the budgets' model (kaisched/api/budgets.py); their conversion is checked with it.
What a session may evict under them: tests/unit/kaisched/framework/parts/test_disruptions.py."""
from __future__ import annotations

from typing import Any

import pytest

from kaisched.api.budgets import Amount, DisruptionBudget
from kaisched.api.constraints import LabelSelector
from kaisched.cache.convert.budgets import disruption_budget


def pdb(spec: dict[str, Any], status: dict[str, Any] | None = None, namespace: str = "default") -> dict:
    obj: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                           "metadata": {"name": "budget", "namespace": namespace}, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


APP = {"matchLabels": {"app": "web"}}


@pytest.mark.parametrize(("spec", "healthy", "expected", "allowed"), [
    ({"minAvailable": 2, "selector": APP}, 3, 3, 1),
    ({"minAvailable": 3, "selector": APP}, 3, 3, 0),
    ({"minAvailable": "50%", "selector": APP}, 3, 3, 1),       # 50% of 3, rounded up: 2
    ({"minAvailable": "100%", "selector": APP}, 4, 4, 0),
    ({"maxUnavailable": 1, "selector": APP}, 4, 4, 1),
    ({"maxUnavailable": 1, "selector": APP}, 3, 4, 0),         # one is down already
    ({"maxUnavailable": "25%", "selector": APP}, 8, 8, 2),
    ({"maxUnavailable": "10%", "selector": APP}, 5, 5, 1),     # 0.5 rounded up
    ({"selector": APP}, 3, 3, 0),                              # neither: nothing known safe
])
def test_allowance_as_the_disruption_controller_counts_it(spec: dict, healthy: int, expected: int,
                                                           allowed: int) -> None:
    assert disruption_budget(pdb(spec)).allowed(healthy, expected) == allowed


def test_the_status_allowance_caps_the_count() -> None:
    budget = disruption_budget(pdb({"maxUnavailable": 2, "selector": APP}, {"disruptionsAllowed": 1}))
    assert budget.status_allowed == 1
    assert budget.allowed(4, 4) == 1


@pytest.mark.parametrize("bad", [{"minAvailable": "half"}, {"maxUnavailable": -1},
                                 {"minAvailable": 1.5}, {"maxUnavailable": True}])
def test_a_budget_that_cannot_be_read_protects_its_namespace(bad: dict) -> None:
    """Which pods a broken budget meant is unknown: none of its namespace moves."""
    budget = disruption_budget(pdb({**bad, "selector": APP}))
    assert budget.problem is not None and list(bad)[0] in budget.problem
    assert budget.selects("default", {"app": "other"}) and not budget.selects("elsewhere", {})
    assert budget.allowed(10, 10) == 0


def test_selectors_empty_selects_all_and_absent_none() -> None:
    every = disruption_budget(pdb({"minAvailable": 1, "selector": {}}))
    none = disruption_budget(pdb({"minAvailable": 1}))
    assert every.selects("default", {"any": "thing"}) and not every.selects("other", {})
    assert not none.selects("default", {"app": "web"})
    web = disruption_budget(pdb({"minAvailable": 1, "selector": {
        "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}}))
    assert web.selects("default", {"app": "web"}) and not web.selects("default", {"app": "db"})


def test_amounts() -> None:
    assert Amount(3).of(10) == 3 and Amount(30, percent=True).of(10) == 3
    assert Amount(1, percent=True).of(10) == 1          # 0.1 rounded up


def test_budget_model_selects_by_namespace() -> None:
    budget = DisruptionBudget("ns/b", "ns", LabelSelector((("app", "web"),)), Amount(1))
    assert budget.selects("ns", {"app": "web"}) and not budget.selects("other", {"app": "web"})
