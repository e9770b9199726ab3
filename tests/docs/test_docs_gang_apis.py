"""The examples of docs/gang-apis.md are what their Kubernetes version's API
server accepts, and the upstream ones schedule as the page says: each gang
binds whole on a node with room."""
from __future__ import annotations

import re
from typing import Iterator

import pytest
import yaml

from kaisched.builtins.catalog import register_builtins
from kaisched.framework import default_config
from kaisched.tools.replay import replay
from kaisched.validation import KUBERNETES_VERSION, partition, summarize, use_kube_version
from tests.builders import ROOT

PAGE = ROOT / "docs" / "gang-apis.md"
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}


def examples() -> list[tuple[str, str]]:
    """(kube-version, text) of every YAML block that names its version."""
    blocks = re.findall(r"```yaml\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    return [(m.group(1), block) for block in blocks
            if (m := re.match(r"# kube-version: (\S+)\n", block))]


@pytest.fixture(autouse=True)
def default_version_after() -> Iterator[None]:
    yield
    use_kube_version(KUBERNETES_VERSION)


def test_the_page_has_an_example_per_version_and_kai() -> None:
    # 1.37 twice before KAI's: its PodGroup, and one sharing a claim with its pods
    assert [v for v, _ in examples()] == ["1.35", "1.36", "1.37", "1.37", "1.37"]


@pytest.mark.parametrize("version, text", examples(), ids=lambda x: x[:30])
def test_example_is_accepted_and_its_gang_binds(version: str, text: str) -> None:
    use_kube_version(version)
    objects = [d for d in yaml.safe_load_all(text) if d]
    kept, problems = partition([NODE, *objects])
    assert summarize(problems) == []
    pods = [f"default/{o['metadata']['name']}" for o in objects if o["kind"] == "Pod"]
    if any(o["apiVersion"].startswith("scheduling.run.ai") for o in objects):
        return          # one pod of a KAI gang of three: shown, not complete
    registry = register_builtins()
    result = replay(kept, default_config(registry), registry)
    assert sorted(result.bindings) == sorted(pods)
