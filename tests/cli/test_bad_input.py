"""Bad input on the command line: one clear line, never a traceback, nothing
silently ignored. An object a cluster would refuse, or of a kind nobody
serves, is reported on stderr and skipped (an error with --strict); a file
with nothing usable is an error."""
from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import yaml
from click.testing import CliRunner, Result

from kaisched.cli import main
from kaisched.validation import KUBERNETES_VERSION
from tests.builders import ROOT

GANG = ROOT / "config" / "examples" / "gang.yaml"
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\x80"

NODE = "apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\n" \
       "status: {allocatable: {cpu: '8', memory: 16Gi, nvidia.com/gpu: '4', pods: '110'}}\n"
POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default}\n" \
      "spec: {schedulerName: kaisched, containers: [{name: main, image: nginx, " \
      "resources: {requests: {cpu: '1'}}}]}\n"
GPU_POD_WITHOUT_LIMIT = "apiVersion: v1\nkind: Pod\nmetadata: {name: train, namespace: default}\n" \
    "spec: {schedulerName: kaisched, containers: [{name: main, image: pytorch, " \
    "resources: {requests: {cpu: '1', nvidia.com/gpu: '1'}}}]}\n"
FLINK_APP = ("apiVersion: flink.apache.org/v1beta1\nkind: FlinkDeployment\n"
             "metadata: {name: wf, namespace: default}\n")
PODGROUP_V1BETA1 = "apiVersion: scheduling.kaisched.io/v1beta1\nkind: PodGroup\n" \
                   "metadata: {name: pg, namespace: default}\nspec: {minMember: 1}\n"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def write(tmp_path: Path, *docs: str, name: str = "objects.yaml") -> str:
    path = tmp_path / name
    path.write_text("---\n".join(docs))
    return str(path)


def error_line(result: Result) -> str:
    """The run failed with exactly one `error:` line, the last one, and no traceback."""
    assert result.exit_code != 0
    assert "Traceback" not in result.output + result.stderr
    lines = result.stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("error: ")] == lines[-1:], result.stderr
    return lines[-1]


# --- a binary or non-UTF-8 file -------------------------------------------------------------------

@pytest.mark.parametrize("command", [
    ["replay", str(GANG), "--config"],
    ["explain", "research/bert", "--snapshot", str(GANG), "--config"],
    ["run", "--kubeconfig", "/nonexistent/kubeconfig", "--metrics-port", "0", "--config"],
], ids=["replay", "explain", "run"])
def test_a_binary_config_is_one_line(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_bytes(BINARY)
    result = invoke(*command, str(path))
    assert result.stderr.count("\n") == 1
    assert error_line(result) == f"error: {path}: not UTF-8 text (byte 0); a binary file?"


def test_a_latin1_config_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_bytes("schedulerName: ordonnanceur-\xe9t\xe9\n".encode("latin-1"))
    result = invoke("replay", str(GANG), "--config", str(path))
    assert result.stderr.count("\n") == 1 and "not UTF-8 text" in error_line(result)


def test_a_config_that_is_a_directory_is_one_line(tmp_path: Path) -> None:
    result = invoke("replay", str(GANG), "--config", str(tmp_path))
    assert result.stderr.count("\n") == 1
    assert error_line(result) == f"error: {tmp_path}: is a directory, not a file"


@pytest.mark.parametrize("command", [["replay"], ["explain", "default/x", "--snapshot"]],
                         ids=["replay", "explain"])
def test_a_binary_file_of_objects_is_one_line(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_bytes(BINARY)
    result = invoke(*command, str(path))
    assert result.stderr.count("\n") == 1 and "not UTF-8 text" in error_line(result)


# --- nothing usable ---------------------------------------------------------------------------

@pytest.mark.parametrize("content", ["", "\n\n", "# only a comment\n", "---\n---\n"],
                         ids=["empty", "blank", "comment", "empty-documents"])
@pytest.mark.parametrize("command", [["replay"], ["explain", "default/x", "--snapshot"]],
                         ids=["replay", "explain"])
def test_an_empty_file_is_an_error(tmp_path: Path, content: str, command: list[str]) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(content)
    result = invoke(*command, str(path))
    assert error_line(result) == f"error: {path}: nothing usable: no Kubernetes objects in it"
    assert result.stdout == ""


@pytest.mark.parametrize("doc, skipped", [
    (FLINK_APP, "skipped: FlinkDeployment default/wf: apiVersion: unknown kind FlinkDeployment in "
                "flink.apache.org/v1beta1: "
                f"neither Kubernetes {KUBERNETES_VERSION} nor kaisched serves it"),
    ("apiVersion: v1\nkind: Podd\nmetadata: {name: x}\n",
     f"skipped: Podd x: kind: unknown kind Podd in v1: Kubernetes {KUBERNETES_VERSION} serves no such kind"),
    (PODGROUP_V1BETA1, "skipped: PodGroup default/pg: apiVersion: scheduling.kaisched.io serves no "
                       "PodGroup in v1beta1 (it serves PodGroup scheduling.kaisched.io/v1alpha1, "
                       "Queue scheduling.kaisched.io/v1alpha1)"),
], ids=["unknown-group", "unknown-kind", "wrong-kaisched-version"])
def test_a_file_of_nothing_usable_says_what_was_skipped(tmp_path: Path, doc: str, skipped: str) -> None:
    path = write(tmp_path, doc)
    result = invoke("replay", path)
    assert result.stderr.splitlines()[0] == skipped
    assert error_line(result) == f"error: {path}: nothing usable: all 1 object(s) skipped"
    assert result.stdout == ""


def test_skipped_objects_are_reported_and_the_rest_replays(tmp_path: Path) -> None:
    path = write(tmp_path, NODE, FLINK_APP, PODGROUP_V1BETA1, POD)
    result = invoke("replay", path, "--output", "json")
    assert result.exit_code == 0, result.stderr
    assert [line.split(":")[0:2] for line in result.stderr.splitlines()] == [
        ["skipped", " FlinkDeployment default/wf"], ["skipped", " PodGroup default/pg"]]
    assert orjson.loads(result.stdout)["bindings"] == {"default/web": "node-a"}


# --- objects a cluster would refuse -----------------------------------------------------------

def test_a_gpu_pod_without_a_limit_is_reported_not_scheduled(tmp_path: Path) -> None:
    path = write(tmp_path, NODE, GPU_POD_WITHOUT_LIMIT, POD)
    result = invoke("replay", path, "--output", "json")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines() == [
        "skipped: Pod default/train: spec.containers[0].resources.limits: a limit must be set for "
        "nvidia.com/gpu: it is not overcommittable, so requests must equal limits"]
    assert orjson.loads(result.stdout)["bindings"] == {"default/web": "node-a"}


def test_strict_makes_it_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, NODE, GPU_POD_WITHOUT_LIMIT, POD)
    result = invoke("replay", path, "--strict")
    assert result.stderr.splitlines()[0].startswith("refused: Pod default/train: spec.containers[0]")
    assert error_line(result) == f"error: {path}: 1 object(s) a cluster would refuse (--strict)"
    assert result.stdout == ""


def test_strict_on_a_clean_file_changes_nothing() -> None:
    strict = invoke("replay", str(GANG), "--output", "json", "--strict")
    plain = invoke("replay", str(GANG), "--output", "json")
    assert strict.exit_code == plain.exit_code == 0
    assert strict.stderr == plain.stderr == ""
    assert strict.stdout_bytes == plain.stdout_bytes


def test_explain_reports_and_skips_the_same_way(tmp_path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(GANG.read_text()) if d]
    for doc in docs:
        if doc["metadata"]["name"] == "llm-1":
            del doc["spec"]["containers"][0]["resources"]["limits"]
    path = tmp_path / "gang.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = invoke("explain", "research/llm", "--snapshot", str(path))
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("skipped: Pod research/llm-1: spec.containers[0].resources.limits: "
                                    "a limit must be set for nvidia.com/gpu")
    assert "research/llm-1" not in result.stdout and "research/llm-0" in result.stdout
    strict = invoke("explain", "research/llm", "--snapshot", str(path), "--strict")
    assert error_line(strict).endswith("1 object(s) a cluster would refuse (--strict)")


def test_a_second_object_of_one_name_is_skipped(tmp_path: Path) -> None:
    path = write(tmp_path, NODE, POD, POD.replace("cpu: '1'", "cpu: '2'"))
    result = invoke("replay", path, "--output", "json")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ("skipped: Pod default/web: metadata.name: already exists: "
                             "an earlier object in the input has this name\n")
