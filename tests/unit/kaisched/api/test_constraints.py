"""Placement: nodeSelector, required node affinity, taints and tolerations
(kaisched.api.constraints), as kube-scheduler decides them."""
from __future__ import annotations

import pytest

from kaisched.api.constraints import Placement, Requirement, SelectorTerm, Taint, Toleration
from kaisched.cache.convert import placement as placement_from_spec

LABELS = {"zone": "a", "gpu-type": "a100", "cores": "64"}


def req(key: str, op: str, *values: str) -> Requirement:
    return Requirement(key, op, tuple(values))


def term(*expressions: Requirement, fields: tuple[Requirement, ...] = ()) -> SelectorTerm:
    return SelectorTerm(tuple(expressions), fields)


# -- nodeSelector ----------------------------------------------------------------------

@pytest.mark.parametrize(("selector", "matches"), [
    ({}, True),
    ({"zone": "a"}, True),
    ({"zone": "b"}, False),
    ({"zone": "a", "gpu-type": "a100"}, True),
    ({"zone": "a", "gpu-type": "h100"}, False),
    ({"missing": "x"}, False),
    ({"zone": ""}, False),
])
def test_node_selector(selector: dict, matches: bool) -> None:
    placement = Placement(node_selector=tuple(sorted(selector.items())))
    assert placement.matches_labels(LABELS, "n1") is matches


# -- required node affinity: every operator ------------------------------------------

@pytest.mark.parametrize(("requirement", "matches"), [
    (req("zone", "In", "a", "b"), True),
    (req("zone", "In", "b", "c"), False),
    (req("missing", "In", "a"), False),
    (req("zone", "NotIn", "b"), True),
    (req("zone", "NotIn", "a"), False),
    (req("missing", "NotIn", "a"), True),          # absent label is not in any set
    (req("zone", "Exists"), True),
    (req("missing", "Exists"), False),
    (req("zone", "DoesNotExist"), False),
    (req("missing", "DoesNotExist"), True),
    (req("cores", "Gt", "32"), True),
    (req("cores", "Gt", "64"), False),
    (req("cores", "Gt", "100"), False),
    (req("cores", "Lt", "100"), True),
    (req("cores", "Lt", "64"), False),
    (req("cores", "Lt", "8"), False),
    (req("missing", "Gt", "1"), False),
    (req("missing", "Lt", "1"), False),
    (req("zone", "Gt", "1"), False),               # label is not an integer
    (req("cores", "Gt", "x"), False),              # value is not an integer
    (req("cores", "Gt", "1", "2"), False),         # Gt takes exactly one value
    (req("zone", "Bogus", "a"), False),            # unknown operator matches nothing
])
def test_requirement_operator(requirement: Requirement, matches: bool) -> None:
    assert requirement.matches(LABELS) is matches
    assert Placement(affinity=(term(requirement),)).matches_labels(LABELS, "n1") is matches


@pytest.mark.parametrize(("field", "node_name", "matches"), [
    (req("metadata.name", "In", "n1"), "n1", True),
    (req("metadata.name", "In", "n1"), "n2", False),
    (req("metadata.name", "NotIn", "n1", "n3"), "n2", True),
    (req("metadata.name", "NotIn", "n1", "n3"), "n3", False),
])
def test_match_fields_metadata_name(field: Requirement, node_name: str, matches: bool) -> None:
    placement = Placement(affinity=(term(fields=(field,)),))
    assert placement.matches_labels(LABELS, node_name) is matches


def test_match_fields_do_not_read_labels() -> None:
    placement = Placement(affinity=(term(fields=(req("metadata.name", "In", "n1"),)),))
    assert not placement.matches_labels({"metadata.name": "n1"}, "n2")


def test_empty_term_matches_nothing() -> None:
    assert not SelectorTerm().matches(LABELS, "n1")
    assert not Placement(affinity=(SelectorTerm(),)).matches_labels(LABELS, "n1")


def test_requirements_within_a_term_are_anded() -> None:
    both = term(req("zone", "In", "a"), req("gpu-type", "In", "h100"))
    assert not Placement(affinity=(both,)).matches_labels(LABELS, "n1")


def test_expressions_and_fields_of_one_term_are_anded() -> None:
    mixed = term(req("zone", "In", "a"), fields=(req("metadata.name", "In", "n2"),))
    assert not mixed.matches(LABELS, "n1")
    assert mixed.matches(LABELS, "n2")


@pytest.mark.parametrize(("terms", "matches"), [
    ((term(req("zone", "In", "b")), term(req("zone", "In", "a"))), True),
    ((term(req("zone", "In", "b")), term(req("zone", "In", "c"))), False),
    ((SelectorTerm(), term(req("zone", "Exists"))), True),     # empty term alone is no veto
    ((SelectorTerm(), SelectorTerm()), False),
])
def test_terms_are_ored(terms: tuple[SelectorTerm, ...], matches: bool) -> None:
    assert Placement(affinity=terms).matches_labels(LABELS, "n1") is matches


def test_selector_and_affinity_must_both_hold() -> None:
    placement = Placement(node_selector=(("zone", "b"),),
                          affinity=(term(req("zone", "Exists")),))
    assert not placement.matches_labels(LABELS, "n1")


def test_no_affinity_means_no_constraint() -> None:
    assert Placement().matches_labels({}, "n1")


# -- taints and tolerations -----------------------------------------------------------

@pytest.mark.parametrize(("toleration", "taint_", "tolerated"), [
    (Toleration("gpu", "Equal", "true"), Taint("gpu", "true"), True),
    (Toleration("gpu", "Equal", "false"), Taint("gpu", "true"), False),
    (Toleration("gpu", "Equal", ""), Taint("gpu", ""), True),
    (Toleration("other", "Equal", "true"), Taint("gpu", "true"), False),
    (Toleration("gpu", "Exists"), Taint("gpu", "anything"), True),
    (Toleration("other", "Exists"), Taint("gpu", "anything"), False),
    (Toleration("", "Exists"), Taint("gpu", "x"), True),                    # tolerates all
    (Toleration("", "Exists"), Taint("any", "y", "NoExecute"), True),
    (Toleration("", "Exists", effect="NoSchedule"), Taint("a", "b", "NoExecute"), False),
    (Toleration("gpu", "Exists", effect="NoSchedule"), Taint("gpu", "", "NoSchedule"), True),
    (Toleration("gpu", "Exists", effect="NoSchedule"), Taint("gpu", "", "NoExecute"), False),
    (Toleration("gpu", "Exists", effect=""), Taint("gpu", "", "NoExecute"), True),   # every effect
    (Toleration("gpu", "Equal", "true", "NoExecute"), Taint("gpu", "true", "NoExecute"), True),
])
def test_toleration(toleration: Toleration, taint_: Taint, tolerated: bool) -> None:
    assert toleration.tolerates(taint_) is tolerated


@pytest.mark.parametrize(("tolerations", "taints", "first_untolerated"), [
    ((), (), None),
    ((), (Taint("gpu"),), Taint("gpu")),
    ((), (Taint("gpu", effect="NoExecute"),), Taint("gpu", effect="NoExecute")),
    ((), (Taint("soft", effect="PreferNoSchedule"),), None),          # PreferNoSchedule ignored
    ((Toleration("gpu", "Exists"),), (Taint("gpu"), Taint("b")), Taint("b")),
    ((Toleration("gpu", "Exists"), Toleration("b", "Exists")), (Taint("gpu"), Taint("b")), None),
    ((Toleration("", "Exists"),), (Taint("gpu"), Taint("b", effect="NoExecute")), None),
    ((), (Taint("soft", effect="PreferNoSchedule"), Taint("hard")), Taint("hard")),
])
def test_untolerated(tolerations: tuple[Toleration, ...], taints: tuple[Taint, ...],
                     first_untolerated: Taint | None) -> None:
    assert Placement(tolerations=tolerations).untolerated(taints) == first_untolerated


# -- from the raw pod spec ------------------------------------------------------------

def test_placement_from_raw_spec() -> None:
    spec = {
        "nodeSelector": {"zone": "a", "disk": "ssd"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]},
            ]}}},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                        {"operator": "Exists"}],
    }
    got = placement_from_spec(spec)
    assert got.node_selector == (("disk", "ssd"), ("zone", "a"))
    assert got.affinity == (term(req("cores", "Gt", "8")),
                            term(fields=(req("metadata.name", "In", "n9"),)))
    assert got.tolerations == (Toleration("gpu", "Exists", "", "NoSchedule"),
                               Toleration("", "Exists", "", ""))


def test_toleration_operator_defaults_to_equal() -> None:
    got = placement_from_spec({"tolerations": [{"key": "gpu", "value": "true"}]})
    assert got.tolerations == (Toleration("gpu", "Equal", "true", ""),)


def test_equal_placements_are_one_class() -> None:
    spec = {"nodeSelector": {"zone": "a"}, "tolerations": [{"operator": "Exists"}]}
    assert placement_from_spec(spec) == placement_from_spec(dict(spec))
    assert hash(placement_from_spec(spec)) == hash(placement_from_spec(dict(spec)))
