"""--kube-version: replay checks objects against the schemas of the chosen
Kubernetes version (default: the newest kubernetes-validate bundles), so the
upstream Workload API is what that version serves: 1.35's Workload and
workloadRef, 1.36's v1alpha2 PodGroups, 1.37's v1beta1 ones; each version
refuses the others'."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import orjson
import pytest
from click.testing import CliRunner

from kaisched.cli import main
from kaisched.validation import (
    KUBERNETES_VERSION,
    available_versions,
    kube_version,
    use_kube_version,
)
from tests.builders import SCENARIOS

SCENARIO = SCENARIOS / "upstream-gang-v1beta1.yaml"


@pytest.fixture(autouse=True)
def default_version_after() -> Iterator[None]:
    """The chosen version is process state: later tests get the default back."""
    yield
    use_kube_version(KUBERNETES_VERSION)


def _replay(*flags: str):   # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, ["replay", str(SCENARIO), "--output", "json", *flags])


def test_default_is_the_newest_bundled_version() -> None:
    assert KUBERNETES_VERSION == available_versions()[-1]
    result = _replay()
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout)["bindings"] == {"default/t-0": "n1", "default/t-1": "n1"}
    assert "skipped" not in result.stderr


DEVICE_CLASS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
"""


def test_an_older_version_refuses_what_it_does_not_serve(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text((SCENARIOS / "gang-insufficient.yaml").read_text() + "---" + DEVICE_CLASS)
    old = CliRunner().invoke(main, ["replay", str(path), "--output", "json",
                                    "--kube-version", "1.32"])
    assert old.exit_code == 0, old.output
    assert "unknown kind DeviceClass in resource.k8s.io/v1: Kubernetes 1.32" in old.stderr
    new = CliRunner().invoke(main, ["replay", str(path), "--output", "json"])
    assert "skipped" not in new.stderr
    assert kube_version() == KUBERNETES_VERSION      # each command starts from the default


def test_an_unbundled_version_is_refused_in_one_line() -> None:
    result = _replay("--kube-version", "0.1")
    assert result.exit_code != 0
    assert "bundles no schemas of it" in result.output


def test_simulate_takes_the_flag_too() -> None:
    refused = CliRunner().invoke(main, ["simulate", "--kube-version", "0.1"])
    assert refused.exit_code != 0 and "bundles no schemas of it" in refused.output
    older = CliRunner().invoke(main, ["simulate", "--kube-version", available_versions()[0],
                                      "--output", "json"])
    assert older.exit_code == 0, older.output
    assert kube_version() == available_versions()[0]


# Each scenario is written for one version: the Workload API of the others is refused.
@pytest.mark.parametrize("scenario, served", [
    ("upstream-gang.yaml", "1.35"),
    ("upstream-gang-v1alpha2.yaml", "1.36"),
    ("upstream-gang-v1beta1.yaml", "1.37"),
])
def test_each_workload_api_version_only_where_served(scenario: str, served: str) -> None:
    for version in ("1.35", "1.36", "1.37"):
        result = CliRunner().invoke(main, ["replay", str(SCENARIOS / scenario), "--output", "json",
                                           "--kube-version", version])
        assert result.exit_code == 0, result.output
        bound = orjson.loads(result.stdout)["bindings"]
        if version == served:
            assert "skipped" not in result.stderr and bound, (version, result.stderr)
        else:
            assert f"Kubernetes {version} serves no such kind" in result.stderr, version
            assert not bound, (version, bound)      # their pods name groups that are not there


def test_replay_json_reports_upstream_conditions() -> None:
    result = CliRunner().invoke(main, ["replay", str(SCENARIO), "--output", "json",
                                       "--kube-version", "1.37"])
    groups = orjson.loads(result.stdout)["podGroups"]
    train = groups["default/train"]
    assert train["apiVersion"] == "scheduling.k8s.io/v1beta1" and train["minMember"] == 2
    assert [(c["type"], c["status"], c["reason"]) for c in train["conditions"]] == \
        [("PodGroupInitiallyScheduled", "True", "Scheduled")]
    assert groups["default/big"]["conditions"][0]["reason"] == "Unschedulable"
