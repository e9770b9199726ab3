"""The same mistake reads the same whichever command makes it: every file a command reads
goes through one helper (missing, a directory, binary, bad YAML, not a mapping), a
duration without a unit is refused everywhere with one message, a scenario given where
Kubernetes objects belong says so in one sentence, and a --from-snapshot scenario may add
nodes and queues, a collision naming the file, the object and what to do."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kaisched.cli import main as kaisched
from podgrouper.cli import main as podgrouper
from tests.builders import ROOT

DEMO = ROOT / "kaisched" / "examples" / "demo.yaml"

# Every way a file reaches a command: (program, arguments with FILE standing for the path).
READERS = {
    "simulate SCENARIO": (kaisched, ["simulate", "FILE"]),
    "simulate --config": (kaisched, ["simulate", "--config", "FILE", "--until", "1m"]),
    "simulate --compare": (kaisched, ["simulate", "--compare", "FILE", "--until", "1m"]),
    "simulate --from-snapshot": (kaisched, ["simulate", "--from-snapshot", "FILE"]),
    "replay": (kaisched, ["replay", "FILE"]),
    "replay --config": (kaisched, ["replay", str(ROOT / "config/examples/gang.yaml"), "--config",
                                   "FILE"]),
    "explain --snapshot": (kaisched, ["explain", "a/b", "--snapshot", "FILE"]),
    "podgrouper sync": (podgrouper, ["sync", "FILE"]),
}
OBJECT_READERS = ["simulate --from-snapshot", "replay", "explain --snapshot", "podgrouper sync"]
MAPPING_READERS = ["simulate SCENARIO", "simulate --config", "simulate --compare",
                   "replay --config"]


def run(reader: str, path: Path | str) -> tuple[int, str]:
    program, args = READERS[reader]
    result = CliRunner().invoke(program, [str(path) if a == "FILE" else a for a in args])
    assert "Traceback" not in result.output
    return result.exit_code, result.stderr


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("content,expected", [
    (None, "{path}: no such file\n"),
    (b"\x00\x01\x02data", "{path}: not UTF-8 text (byte 0); a binary file?\n"),
    (b"name: caf\xe9\n", "{path}: not UTF-8 text (byte 9); a binary file?\n"),
    (b"a: [\n", "{path}: invalid YAML at line 2: did not find expected node content\n"),
], ids=["missing", "binary", "latin-1", "bad-yaml"])
def test_a_bad_file_is_worded_alike_by_every_command(tmp_path: Path, reader: str,
                                                      content: bytes | None, expected: str) -> None:
    path = tmp_path / "input.yaml"
    if content is not None:
        path.write_bytes(content)
    code, err = run(reader, path)
    refused_before = content is None        # a path that is not there: exit 2, before the work
    assert (code, err) == (2 if refused_before else 1, "error: " + expected.format(path=path))


@pytest.mark.parametrize("reader", READERS)
def test_a_directory_is_not_a_file(tmp_path: Path, reader: str) -> None:
    code, err = run(reader, tmp_path)
    assert code in (1, 2) and err.startswith("error: ") and "directory" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("reader", MAPPING_READERS)
def test_a_list_where_a_mapping_belongs_names_the_top_level(tmp_path: Path, reader: str) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    code, err = run(reader, path)
    assert code == 1
    assert err.startswith(f"error: {path}: the top level: expected a mapping (key: value) of ")
    assert err.endswith(", got a list\n") and ": : " not in err


@pytest.mark.parametrize("reader", OBJECT_READERS)
def test_a_scenario_given_for_objects_says_the_same_everywhere(reader: str) -> None:
    code, err = run(reader, DEMO)
    assert (code, err) == (1, f"error: {DEMO}: this is a simulate scenario (nodePools, queues, "
                              f"jobs), not Kubernetes objects: run it with `kaisched simulate "
                              f"{DEMO}`\n")


UNIT = "a duration needs a unit: {n} could mean seconds or minutes (write e.g. {n}s or {n}m)"


@pytest.mark.parametrize("key", ["schedulePeriod", "staleGangGracePeriod", "starvationThreshold"])
def test_a_config_duration_without_a_unit_is_refused(tmp_path: Path, key: str) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"{key}: 60\n")
    for reader in ("simulate --config", "replay --config"):
        code, err = run(reader, config)
        assert (code, err) == (1, f"error: {config}: {key}: {UNIT.format(n=60)}\n")


def test_a_scenario_duration_without_a_unit_is_refused_alike(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(DEMO.read_text().replace("duration: 45m", "duration: 300", 1))
    code, err = run("simulate SCENARIO", scenario)
    assert code == 1 and err.endswith(f".duration: {UNIT.format(n=300)}\n"), err


@pytest.mark.parametrize("flag", ["--until", "--remaining"])
def test_a_flag_duration_without_a_unit_is_refused_alike(tmp_path: Path, flag: str) -> None:
    extra = ["--from-snapshot", str(snapshot(tmp_path))] if flag == "--remaining" else []
    result = CliRunner().invoke(kaisched, ["simulate", *extra, flag, "90"])
    assert result.exit_code == 2 and UNIT.format(n=90) in result.stderr


def test_podgrouper_durations_need_a_unit_too() -> None:
    result = CliRunner().invoke(podgrouper, ["run", "--period", "5"])
    assert result.exit_code == 2 and UNIT.format(n=5) in result.stderr


def snapshot(tmp_path: Path) -> Path:
    path = tmp_path / "now.json"
    done = CliRunner().invoke(kaisched, ["simulate", "--until", "10m", "--dump-snapshot", str(path),
                                         "--output", "json"])
    assert done.exit_code == 0, done.stderr
    return path


def test_a_what_if_may_add_nodes_and_queues(tmp_path: Path) -> None:
    more = tmp_path / "more.yaml"
    more.write_text("""\
nodePools:
  - {name: big, count: 2, capacity: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 8}}
queues:
  - {name: team-c, resources: {nvidia.com/gpu: {quota: 8}}}
jobs:
  - {name: extra, kind: PyTorchJob, queue: team-c, duration: 10m,
     roles: {master: {replicas: 1, requests: {gpu: 8}}}}
""")
    result = CliRunner().invoke(kaisched, ["simulate", "--from-snapshot", str(snapshot(tmp_path)),
                                           str(more), "--output", "json"])
    assert result.exit_code == 0, result.stderr
    assert "cluster: 6 nodes" not in result.stdout      # json, not text
    import orjson
    report = orjson.loads(result.stdout)
    assert report["cluster"]["nodes"] == 6
    assert any(j["name"] == "team-c/extra" and j["state"] == "succeeded" for j in report["jobs"])


def test_a_node_of_the_snapshot_named_again_says_file_object_and_fix(tmp_path: Path) -> None:
    snap = snapshot(tmp_path)
    more = tmp_path / "more.yaml"
    more.write_text("nodePools:\n  - {name: gpu, count: 1, capacity: {cpu: 8, memory: 8Gi}}\n"
                    "jobs: []\n")
    result = CliRunner().invoke(kaisched, ["simulate", "--from-snapshot", str(snap), str(more)])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        f"error: {more}: nodePools[0] (gpu): node gpu-0 is in the snapshot {snap} already; give "
        "the pool another name (its nodes are named gpu-0, gpu-1, ...)")


def test_help_and_docs_say_a_what_if_may_add_nodes_and_queues() -> None:
    helped = CliRunner().invoke(kaisched, ["simulate", "--help"], terminal_width=200).stdout
    assert "adds jobs, and nodes and queues the snapshot does not have" in " ".join(helped.split())
    page = " ".join((ROOT / "docs" / "simulate.md").read_text().split())
    assert "may hold only `jobs:`" not in page
    assert "node pools whose nodes do not collide with the snapshot's" in page
