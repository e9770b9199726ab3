"""The podgrouper command line, through click's CliRunner."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from podgrouper.cli import main

MANIFESTS = Path(__file__).parent / "manifests"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_sync_prints_the_podgroups_it_made() -> None:
    code, out, err = invoke("sync", str(MANIFESTS / "cli-dump.yaml"))
    assert code == 0, err
    groups = {g["metadata"]["name"]: g for g in yaml.safe_load_all(out)}
    assert set(groups) == {"pg-bert-finetune-5f0c9a12", "pg-orphan-6d5c7-zz9k2-0a1b2c3d"}
    bert = groups["pg-bert-finetune-5f0c9a12"]
    assert bert["apiVersion"] == "scheduling.kaisched.io/v1alpha1" and bert["kind"] == "PodGroup"
    assert bert["metadata"]["namespace"] == "nlp"
    assert bert["metadata"]["ownerReferences"][0]["uid"] == "5f0c9a12-3b7e-4d21-9c64-0e8f2a7b1d33"
    assert "uid" not in bert["metadata"] and "annotations" not in bert["metadata"]
    assert bert["spec"] == {"minMember": 2, "queue": "nlp-team", "subGroups": [
        {"name": "master", "minMember": 1}, {"name": "worker", "minMember": 1}]}
    assert "warning: Pod nlp/orphan-6d5c7-zz9k2: PodGroupDefaulted: owner ReplicaSet/orphan-6d5c7 " \
           "not found" in err
    assert err.strip().endswith("2 PodGroup(s) made")


def test_sync_follows_references_without_uids() -> None:
    """Hand-written manifests often leave uids out; references are then followed by name."""
    code, out, err = invoke("sync", str(MANIFESTS / "mpijob.yaml"))
    assert code == 0, err
    [group] = list(yaml.safe_load_all(out))
    assert group["spec"]["minMember"] == 5
    assert group["metadata"]["ownerReferences"][0]["kind"] == "MPIJob"


def test_sync_with_nothing_to_group(tmp_path: Path) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
    code, out, err = invoke("sync", str(path))
    assert (code, out, err) == (0, "", "0 PodGroup(s) made\n")


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),                 # a path: exit 2, refused before the work
    ("kind: [unclosed\n", "invalid YAML"),
    ("- just\n- a list\n", "is not a Kubernetes object"),
    ("apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: x}\n", "unknown kind 'Deploymnet'"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\napiVersion: v1\nkind: Pod\n"
     "metadata: {name: p}\n", "Pod/p: Pod default/p already exists"),
], ids=["missing", "bad-yaml", "not-an-object", "unknown-kind", "duplicate"])
def test_sync_input_errors_are_one_line_and_exit_1(tmp_path: Path, content: str | None,
                                                   message: str) -> None:
    path = tmp_path / "input.yaml"
    if content is not None:
        path.write_text(content)
    code, out, err = invoke("sync", str(path))
    assert code == (2 if content is None else 1) and out == ""
    assert err.startswith("error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_run_with_a_missing_kubeconfig_is_one_line() -> None:
    code, out, err = invoke("run", "--kubeconfig", "/nonexistent/kubeconfig", "--period", "1s")
    assert code == 2            # a path refused before the work starts
    assert err == "error: kubeconfig /nonexistent/kubeconfig does not exist\n"


@pytest.mark.parametrize("flag", ["--period", "--owner-resync"])
def test_run_rejects_a_bad_duration(flag: str) -> None:
    code, _, err = invoke("run", flag, "soon")
    assert code == 2 and err.startswith("error: ") and "soon" in err and err.count("\n") == 1


def test_run_rejects_a_zero_period() -> None:
    code, _, err = invoke("run", "--period", "0s")
    assert code == 2 and "must be positive" in err


def test_unknown_command_is_one_line() -> None:
    code, _, err = invoke("groupify")
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1


def test_help_lists_the_commands() -> None:
    code, out, _ = invoke("--help")
    assert code == 0 and "run" in out and "sync" in out
