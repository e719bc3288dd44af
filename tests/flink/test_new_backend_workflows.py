"""A user's workflows over checkpoints of the changelog state backend and of ForSt (tests/flink/data/
checkpoints): through the CLI (inspect, verify, plan, import-flink, --json), the Python API, and at their
URL on an object store (moto's S3 server: chk-N with its job's shared/ and taskowned/ beside it). What is
refused is refused by name, with the remedy, and --skip-state imports the rest."""

from __future__ import annotations

import json
import pathlib

import pytest

from compat_tests.flink.imports import ttl_configs
from pyref.cli import main
from pyref.flink import FlinkSavepoint, export_savepoint
from pyref.flink.importer import import_flink
from tests.flink.test_checkpoints import DATA, snapshot, truth
from tests.flink.test_changelog import dstl_files
from tests.flink.test_corpus import assert_reads_as_truth
from tests.flink.test_flink_on_object_stores import upload

#: Before its first materialization: operators without timers record no key serializer.
UNMATERIALIZED = "2.3.0-rocksdb-changelog-keyed-kinds"
REFUSED_UNMATERIALIZED = ["long-keys/last-user", "long-keys/max", "tuple-keys/nums", "tuple-keys/by-seq"]


def _json(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out)


def test_a_changelog_checkpoint_before_materialization_is_refused_per_state_and_the_rest_imports(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, expected = snapshot(UNMATERIALIZED, tmp_path), truth(UNMATERIALIZED)
    assert main(["import-flink", str(source), str(tmp_path / "refused"), "--ttl-default", "1d", "--json"]) == 5
    refusal = _json(capsys)
    assert refusal["type"] == "UnsupportedFormatError"
    for state in REFUSED_UNMATERIALIZED:  # each named, operator and state, with the remedy
        assert f"{state}: changelog state backend keyed state before its first materialization" in refusal["error"]
    assert "periodic-materialize" in refusal["error"] and "--skip-state" in refusal["error"]
    skips = [arg for state in REFUSED_UNMATERIALIZED + ["pojo-keys/blobs"] for arg in ("--skip-state", state)]
    assert main(["import-flink", str(source), str(tmp_path / "imported"), "--ttl-default", "1d", *skips,
                 "--json"]) == 0
    capsys.readouterr()
    for uid in ("long-keys", "tuple-keys"):
        expected["operators"][uid]["keyed_state"] = {}
    del expected["operators"]["pojo-keys"]["keyed_state"]["blobs"]
    export_savepoint(tmp_path / "imported", tmp_path / "flink", flink_version=expected["flink_version"])
    with FlinkSavepoint.open(tmp_path / "flink") as exported:
        expected["checkpoint_id"] = exported.checkpoint_id
    assert_reads_as_truth(tmp_path / "flink", expected)

CASES = ["2.3.0-forst-incremental-async-state", "1.20.3-rocksdb-changelog-churn-materialized",
         "2.3.0-hashmap-changelog-churn-materialized-compressed"]


def _uploaded(case: str, s3_prefix: str, tmp_path: pathlib.Path) -> str:
    """The case's chk-N at s3://.../job/chk-N, its shared/ (if any) at s3://.../job/shared."""
    local = snapshot(case, tmp_path)
    # The harness copied the files _metadata names in the job's taskowned/ into chk-N: back where Flink wrote them.
    metadata, owned = (local / "_metadata").read_bytes(), tmp_path / "taskowned"
    owned.mkdir()
    for path in sorted(local.iterdir()):
        if f"/taskowned/{path.name}".encode() in metadata:
            path.rename(owned / path.name)
    upload(local, f"{s3_prefix}/job/chk-6")
    upload(owned, f"{s3_prefix}/job/taskowned")
    if (local.parent / "shared").is_dir():
        upload(local.parent / "shared", f"{s3_prefix}/job/shared")
    return f"{s3_prefix}/job/chk-6"


@pytest.mark.parametrize("case", CASES)
def test_a_forst_or_changelog_checkpoint_on_s3_reads_imports_and_exports_as_its_truth(case, s3_prefix, tmp_path,
                                                                                         capsys):
    url, expected = _uploaded(case, s3_prefix, tmp_path), truth(case)
    assert_reads_as_truth(url, expected)  # type: ignore[arg-type]
    assert main(["inspect", url, "--json"]) == 0
    assert "changelog" in capsys.readouterr().out or "forst" in case
    assert main(["verify", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"]
    import_flink(url, f"{s3_prefix}/imported", uids=list(expected["operators"]), ttl=ttl_configs(expected))
    export_savepoint(f"{s3_prefix}/imported", tmp_path / "flink", flink_version=expected["flink_version"])
    with FlinkSavepoint.open(tmp_path / "flink") as exported:
        expected["checkpoint_id"] = exported.checkpoint_id
    assert_reads_as_truth(tmp_path / "flink", expected)


def test_inspect_names_the_layout_of_keyed_state_it_refuses(tmp_path: pathlib.Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    source = str(snapshot(UNMATERIALIZED, tmp_path))
    assert main(["inspect", source, "--json"]) == 0
    operators = {op["uid"]: op for op in _json(capsys)["operators"]}
    for uid in ("long-keys", "tuple-keys", "keyed-kinds"):
        assert operators[uid]["keyed_state_layout"] == "changelog", uid
        assert operators[uid]["key_groups_with_data"] is None, uid  # a changelog says none, not 0
    assert operators["long-keys"]["keyed_state_refused"] and not operators["keyed-kinds"]["keyed_state_refused"]
    assert main(["inspect", source]) == 0
    text = capsys.readouterr().out
    assert "in 0 key groups" not in text and text.count("bytes in the changelog layout") == 4


def test_flink_2_0_async_map_state_is_refused_by_name_by_inspect_and_verify(tmp_path: pathlib.Path,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    source = str(snapshot("2.0.2-forst-incremental-async-state", tmp_path))
    refusal = "MAP state of the async state API written by Flink 2.0, whose state meta info names no user key"
    assert main(["verify", source, "--json"]) == 0  # what the reader does not read is a warning
    report = _json(capsys)
    named = [w for w in report["warnings"] if not w.startswith("import-flink")]
    assert report["ok"] and len(named) == 1 and named[0].startswith(f"async-counter/by-parity: {refusal}")
    assert main(["inspect", source, "--json"]) == 0
    states = {s["name"]: s for op in _json(capsys)["operators"] for s in op["states"]}
    assert refusal in states["by-parity"]["refused"] and states["count"]["refused"] is None


#: The committed changelog and ForSt cases (tests/flink/data/checkpoints/README.md).
NEW_BACKENDS = sorted(p.name for p in DATA.iterdir() if "changelog" in p.name or "forst" in p.name)


@pytest.mark.parametrize("case", NEW_BACKENDS)
def test_plan_hands_out_every_key_group_once_with_the_bytes_of_its_keyed_state(
        case: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = str(snapshot(case, tmp_path))
    assert main(["plan", source, "-p", "5", "--json"]) == 0
    plan = _json(capsys)
    with FlinkSavepoint.open(source) as sp:
        for planned in plan["operators"]:
            op = sp.operator(planned["operator_id"])
            subtasks = planned["subtasks"]
            groups = [g for s in subtasks for g in range(s["first_key_group"], s["last_key_group"] + 1)]
            assert groups == list(range(op.max_parallelism)), op.name
            # a changelog's changes and RocksDB's files are spread over their key groups: every new subtask reads some
            keyed = any(s.managed_keyed_state is not None for s in op.state.subtasks)
            assert all(s["planned_bytes"] > 0 for s in subtasks) == keyed, op.name


def test_a_changelog_checkpoint_without_its_dstl_file_names_it_and_the_remedy(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = "2.3.0-hashmap-changelog-churn-materialized-compressed"
    source = snapshot(case, tmp_path)
    dstl = dstl_files(source)
    assert len(dstl) == 1  # both subtasks' change sets in one file
    for command in (["inspect"], ["verify"], ["plan", "-p", "3"]):  # each opens a checkpoint as import-flink does
        assert main([*command, str(source), "--allow-external-files", "--json"]) == 0, command
    capsys.readouterr()
    dstl[0].unlink()  # as when chk-N is copied without the files of state.changelog.dstl.dfs.base-path
    for command in (["verify"], ["import-flink", str(tmp_path / "imported")], ["import-flink", "--allow-external-files",
                                                                               str(tmp_path / "imported")]):
        assert main([command[0], str(source), *command[1:], "--json"]) == 3, command
        out = _json(capsys)
        error = out["errors"][0] if command == ["verify"] else out["error"]
        assert f"DSTL file of the changelog state backend: state file 'file:/" in error and dstl[0].name in error
        assert f"nor does {dstl[0].name} in {source}" in error, error  # where it was looked for
        assert "state.changelog.dstl.dfs.base-path" in error and "--allow-external-files" in error
