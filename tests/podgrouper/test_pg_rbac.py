"""The shipped PodGrouper role may read every owner kind it has a grouper for
(an owner it cannot read would end the walk below the top owner)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kaisched.api.workloadkinds import lookup
from podgrouper.groupers import builtin_groupers

RBAC = Path(__file__).resolve().parents[2] / "config" / "rbac.yaml"


def podgrouper_rules() -> list[dict]:
    docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    role = next(d for d in docs if d["kind"] == "ClusterRole"
                and d["metadata"]["name"] == "kaisched-podgrouper")
    return role["rules"]


@pytest.mark.parametrize("group, kind", sorted(builtin_groupers()))
def test_podgrouper_may_read_every_kind_it_groups(group: str, kind: str) -> None:
    entry = lookup(group, kind)
    assert entry is not None
    plural = entry.plural
    assert any(group in rule["apiGroups"] and plural in rule["resources"] and "get" in rule["verbs"]
               for rule in podgrouper_rules()), f"no get on {plural}.{group}"
