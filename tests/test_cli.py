"""The pyref command line: output for people, --json for scripts, meaningful exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest

from pyref.testing import write_seeds
from pyref.cli import main


def run_json(capsys, *argv):
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_inspect_lists_operators_states_and_key_group_ranges(seeds, capsys):
    code, info = run_json(capsys, "inspect", str(seeds))
    assert code == 0 and info["format_version"] == "1.0"
    source, counter = info["operators"]
    assert source["states"][0] | {"chunks": 0, "stored_bytes": 0, "raw_bytes": 0} == {
        "name": "offsets", "type": "list", "mode": "SPLIT_DISTRIBUTE", "serializer": "int64@v1",
        "elements_per_partition": [2, 2], "chunks": 0, "stored_bytes": 0, "raw_bytes": 0}
    assert counter["key_serializer"] == "string@v1" and counter["max_parallelism"] == 128
    assert counter["key_groups_per_subtask"] == {"min": 64, "max": 64} and "subtask_key_groups" not in counter
    assert counter["states"][0]["entries"] == 50
    code, info = run_json(capsys, "inspect", str(seeds), "--subtasks")
    assert info["operators"][1]["subtask_key_groups"] == [[0, 63], [64, 127]]


@pytest.mark.parametrize("with_1_2_parts", [False, True], ids=["plain", "timers and coordinator state"])
def test_inspect_output_does_not_grow_with_parallelism(tmp_path, capsys, with_1_2_parts):
    """100 operators at parallelism 32768 took 29 s, 3.7 GiB and printed 387 MB (issue 9,
    item 13): without --subtasks the output is O(manifest), whatever the parallelism; so it
    is with a timer service and coordinator state (format 1.2) in every operator."""
    from pyref._proto.savepoint.v1 import manifest_pb2 as pb
    from pyref.checksum import crc32c
    from pyref.chunk import encode_chunk
    from pyref.manifest import declare_features, encode_manifest
    from pyref.serializers import String

    payload = encode_chunk([pa.array([b"enumerator"], pa.binary())])
    sizes = {}
    for parallelism in (2, 32768):
        m = pb.Manifest(savepoint_id="s")
        for i in range(100):
            op = m.operators.add(operator_id=f"op-{i:02}", parallelism=parallelism, max_parallelism=32768)
            if with_1_2_parts:
                op.key_serializer.CopyFrom(String().snapshot())
                op.timer_services.add(name="t", domain=pb.EVENT_TIME)
                op.coordinator_state.CopyFrom(pb.Chunk(row_count=1, inline_data=payload, raw_length=len(payload),
                                                       crc32c=crc32c(payload)))
        declare_features(m)
        (tmp_path / str(parallelism)).mkdir()
        (tmp_path / str(parallelism) / "_manifest").write_bytes(encode_manifest(m))
        for flag in ("--json", None):
            assert main(["inspect", str(tmp_path / str(parallelism)), *([flag] if flag else [])]) == 0
            out = capsys.readouterr().out.replace(str(tmp_path / str(parallelism)), "SP")
            sizes[parallelism, flag] = len(out)
    for flag in ("--json", None):
        assert sizes[32768, flag] <= sizes[2, flag] + 100 * 8  # only the numbers grow a few digits
    code, info = run_json(capsys, "inspect", str(tmp_path / "32768"))
    assert info["operators"][0]["key_groups_per_subtask"] == {"min": 1, "max": 1}
    if with_1_2_parts:
        assert info["operators"][0]["timer_services"][0]["name"] == "t"
        assert info["operators"][0]["coordinator_state_bytes"] == len(b"enumerator")


def test_inspect_human_output(seeds, capsys):
    assert main(["inspect", str(seeds)]) == 0
    out = capsys.readouterr().out
    assert "list state offsets [SPLIT_DISTRIBUTE] int64@v1" in out
    assert "key groups per subtask: 64 (--subtasks lists them)" in out
    assert main(["inspect", str(seeds), "--subtasks"]) == 0
    assert "  0:0-63, 1:64-127\n" in capsys.readouterr().out


def test_plan_shows_who_holds_what(seeds, capsys):
    code, info = run_json(capsys, "plan", str(seeds), "-p", "4")
    assert code == 0
    source = info["operators"][0]
    assert [s["list_states"]["offsets"] for s in source["subtasks"]] == [1, 1, 1, 1]


def test_plan_lists_broadcast_states(tmp_path, capsys):
    """Format 1.2: a broadcast state's entries per new subtask (old partition i mod old_p)."""
    from pyref import SavepointWriter
    from pyref.serializers import Int64, String

    with SavepointWriter(str(tmp_path / "sp")) as w:
        rules = w.add_operator("op", 2).broadcast_state("rules", String(), Int64())
        rules.add_all(["a", "b"], [1, 2])
        rules.add(1, ["c"], [3])
    code, info = run_json(capsys, "plan", str(tmp_path / "sp"), "-p", "3")
    assert code == 0
    assert [s["broadcast_states"] for s in info["operators"][0]["subtasks"]] == [{"rules": 2}, {"rules": 3},
                                                                                 {"rules": 2}]
    assert main(["plan", str(tmp_path / "sp"), "-p", "3"]) == 0
    assert "subtask 1: key groups 43-85; rules: 3 entries; reads" in capsys.readouterr().out


def test_verify_ok_and_corrupt(tmp_path, capsys):
    write_seeds(tmp_path / "sp", inline_bytes=0)
    code, report = run_json(capsys, "verify", str(tmp_path / "sp"))
    assert code == 0 and report["ok"] and report["chunks"] > 0
    data = next((tmp_path / "sp" / "data").iterdir())
    raw = bytearray(data.read_bytes())
    raw[-1] ^= 0xFF
    data.write_bytes(bytes(raw))
    code, report = run_json(capsys, "verify", str(tmp_path / "sp"))
    assert code == 3 and not report["ok"] and "CRC32C mismatch" in report["errors"][0]


def test_rescale_command(tmp_path, capsys):
    write_seeds(tmp_path / "sp", inline_bytes=0)
    code, result = run_json(capsys, "rescale", str(tmp_path / "sp"), str(tmp_path / "sp4"), "--operator",
                            "kafka-source=4")
    assert code == 0 and result["new_data_bytes"] == 0 and result["bases"] == ["sp"]
    code, info = run_json(capsys, "inspect", str(tmp_path / "sp4"))
    assert [o["parallelism"] for o in info["operators"]] == [4, 2]
    code, result = run_json(capsys, "rescale", str(tmp_path / "sp"), str(tmp_path / "sp4"), "-p", "3")
    assert code == 2 and "already exists" in result["error"] and "--overwrite" in result["error"]  # the CLI's name


@pytest.mark.parametrize("argv,code", [
    (["inspect", "/nonexistent/savepoint"], 4),
    (["plan", "{seeds}", "-p", "1000"], 2),
    (["plan", "{seeds}"], 2),
    (["rescale", "{seeds}", "{seeds}", "-p", "2"], 2),
])
def test_exit_codes(seeds, capsys, argv, code):
    assert main([a.format(seeds=seeds) for a in argv]) == code
    assert "pyref:" in capsys.readouterr().err


def test_json_errors_go_to_stdout(capsys):
    code, err = run_json(capsys, "inspect", "/nonexistent/savepoint")
    assert code == 4 and err["type"] == "SavepointNotFoundError"


def test_console_script_runs(seeds):
    result = subprocess.run([sys.executable, "-m", "pyref.cli", "inspect", str(seeds), "--json"],
                            capture_output=True, text=True, check=True)
    assert json.loads(result.stdout)["operators"][0]["operator_id"] == "kafka-source"


def _data_as_file(data):
    data.write_bytes(b"not a directory")


def _data_as_fifo(data):
    os.mkfifo(data)


def _data_as_link_loop(data):
    os.symlink("data", data)


@pytest.mark.parametrize("command", [["verify"], ["clean", "--older-than", "0"]])
@pytest.mark.parametrize("plant", [_data_as_file, _data_as_fifo, _data_as_link_loop], ids=["file", "fifo", "loop"])
def test_a_data_path_that_is_not_a_directory_is_a_typed_error(tmp_path, capsys, command, plant):
    """Issue 9 item 17: verify and clean raised NotADirectoryError or OSError (exit 1, no JSON)."""
    write_seeds(tmp_path / "sp")  # every chunk inline: the manifest lists no data file
    plant(tmp_path / "sp" / "data")
    code, err = run_json(capsys, command[0], str(tmp_path / "sp"), *command[1:])
    assert code == 3 and err["type"] == "CorruptSavepointError" and "data" in err["error"]


@pytest.mark.parametrize("argv", [
    ["plan", "{seeds}", "--operator", "kafka-source=\u00b2"],
    ["plan", "{seeds}", "--operator", "kafka-source=\u0661"],
    ["plan", "{seeds}", "-p", "\u0661"],
    ["plan", "{seeds}", "-p", "1_0"],
    ["plan", "{seeds}", "-p", "9" * 5000],
    ["plan", "{seeds}", "--no-such-flag"],
    ["rescale", "{seeds}"],
    ["no-such-command"],
    ["migrate", "{seeds}", "{seeds}-2", "--operator", "o", "--state", "s", "--serializer", "map<string>"],
    ["migrate", "{seeds}", "{seeds}-2", "--operator", "o", "--state", "s", "--serializer", "list<" * 5000 + "int64"],
    ["migrate", "{seeds}", "{seeds}-2", "--operator", "o", "--state", "s", "--serializer", "no.such.Serializer"],
    ["spark-rescale", "{seeds}", "{seeds}-2", "-p", "\u0661"],
    # checked before Spark starts (the core answers these in well under a second)
    ["migrate", "{seeds}", "{seeds}-2", "--operator", "o", "--state", "s", "--serializer", "long"],
    ["migrate", "{seeds}", "{seeds}-2", "--operator", "url-counter", "--state", "nope", "--serializer", "int64"],
    ["spark-rescale", "{seeds}", "{seeds}", "-p", "2"],
    ["spark-rescale", "{seeds}", "{seeds}-2", "-p", "2", "--conf", "no-equals-sign"],
    ["spark-rescale", "{seeds}", "{seeds}-2", "-p", "2", "--spark-conf", "/no/such/file"],
    ["spark-rescale", "{seeds}", "{seeds}-2", "-p", "2", "--master", "local", "--remote", "sc://h:1"],
    ["change-max-parallelism", "{seeds}", "{seeds}-2", "-m", "256", "--target-file-size", "12XB"],
    ["migrate", "{seeds}", "{seeds}-2", "--operator", "url-counter", "--state", "count", "--serializer", "int64",
     "--target-file-size", "0"],
    ["spark-flatten", "{seeds}", "{seeds}-2", "--target-file-size", "1.5GB"],
    ["spark-rescale", "{seeds}", "{seeds}-2", "-p", "2", "--target-file-size", "1MB"],  # not a --copy: no files
    ["inspect", "file://{seeds}#fragment"],
    ["inspect", "nosuchscheme://bucket/sp"],
    ["inspect", ""],
])
def test_argument_errors_are_invalid_arguments_with_a_json_document(seeds, capsys, argv):
    """Issue 9 item 20: op=\u00b2 raised ValueError, op=\u0661 was read as 1, a deep --serializer raised
    RecursionError and map<string> was reported as a corrupt savepoint (3)."""
    code, err = run_json(capsys, *[a.format(seeds=seeds) for a in argv])
    assert code == 2 and err == {"error": err["error"], "type": "InvalidArgumentError", "exit_code": 2}


def test_argument_errors_without_json_go_to_stderr(seeds, capsys):
    assert main(["plan", str(seeds), "-p", "x"]) == 2
    assert "pyref: InvalidArgumentError: pyref plan: argument -p/--parallelism" in capsys.readouterr().err


def test_inspect_and_plan_show_the_1_2_parts(tmp_path, capsys):
    write_seeds(tmp_path / "sp", windowed=True)
    assert main(["inspect", str(tmp_path / "sp")]) == 0
    out = capsys.readouterr().out
    assert "format 1.2" in out and "namespace time-window@v1" in out
    assert "timer service window-timers [event_time] namespace time-window@v1: 50 timers" in out
    code, info = run_json(capsys, "plan", str(tmp_path / "sp"), "-p", "4")
    assert code == 0 and len(info["operators"]) == 3


def test_sizes_read_as_spark_writes_them():
    from pyref.errors import InvalidArgumentError
    from pyref.spark.cli import parse_size

    assert [parse_size(t, "x") for t in ("256MB", "256m", "256 MiB", "1g", "2KB", "7b", "1048576")] == [
        256 << 20, 256 << 20, 256 << 20, 1 << 30, 2048, 7, 1 << 20]
    for bad in ("0", "-1MB", "1.5GB", "12XB", "1ib", "", "MB"):
        with pytest.raises(InvalidArgumentError, match=f"option 'targetFileSize': expected a size > 0.*got {bad!r}"):
            parse_size(bad, "option 'targetFileSize'")


def test_spark_conf_file_then_conf_flags(tmp_path):
    import argparse

    from pyref.errors import InvalidArgumentError
    from pyref.spark.cli import spark_conf

    conf_file = tmp_path / "spark-defaults.conf"
    conf_file.write_text("# comment\nspark.executor.memory   4g\nspark.sql.shuffle.partitions=16\n\n")
    args = argparse.Namespace(spark_conf=str(conf_file), conf=["spark.sql.shuffle.partitions=8", "a.b=x=y"])
    assert spark_conf(args) == {"spark.ui.showConsoleProgress": "false", "spark.executor.memory": "4g",
                                "spark.sql.shuffle.partitions": "8", "a.b": "x=y"}
    conf_file.write_text("just-a-key\n")
    with pytest.raises(InvalidArgumentError, match="line 1: expected 'key value'"):
        spark_conf(argparse.Namespace(spark_conf=str(conf_file), conf=None))


@pytest.mark.parametrize("as_json", [True, False])
def test_ctrl_c_is_exit_130_without_a_traceback(seeds, capsys, monkeypatch, as_json):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr("pyref.cli.run", interrupted)
    assert main(["inspect", str(seeds), *(["--json"] if as_json else [])]) == 130
    out, err = capsys.readouterr()
    if as_json:
        assert json.loads(out) == {"error": "interrupted", "type": "KeyboardInterrupt", "exit_code": 130}
    else:
        assert err == "pyref: interrupted\n"


def test_a_directory_above_savepoints_names_them(tmp_path, capsys):
    """Flink users point at the job's checkpoint directory (chk-N, shared/, taskowned/) or a
    savepoint's parent: the not-found error names the savepoints one level down, newest first."""
    import shutil

    checkpoint = os.path.join(os.path.dirname(__file__), "flink", "data", "checkpoints", "1.20.3-hashmap-seeds",
                              "checkpoint")
    job = tmp_path / "job"
    for name in ("chk-7", "chk-12"):
        shutil.copytree(checkpoint, job / name)
    (job / "shared").mkdir()
    write_seeds(job / "pyref-copy")
    for argv in (["inspect", str(job)], ["import-flink", str(job), str(tmp_path / "out")]):
        assert main(argv) == 4
        err = capsys.readouterr().err
        assert f"one level down: {job / 'chk-12'}, {job / 'chk-7'}, {job / 'pyref-copy'}" in err, err
    assert main(["inspect", str(job / "shared")]) == 4
    assert "one level down" not in capsys.readouterr().err
    # Flink's checkpoint directory (state.checkpoints.dir) holds a directory per job id, each its chk-N
    assert main(["inspect", str(tmp_path)]) == 4
    assert f"two levels down: {job / 'chk-12'}, {job / 'chk-7'}, {job / 'pyref-copy'}" in capsys.readouterr().err


def test_a_savepoints_manifest_given_for_it_names_its_directory(tmp_path, capsys):
    """The not-found error said only "no committed savepoint here (no _manifest)" of the _manifest itself."""
    write_seeds(tmp_path / "sp")
    assert main(["verify", str(tmp_path / "sp" / "_manifest")]) == 4
    assert f"the path is a file: give the savepoint's directory ({tmp_path / 'sp'})" in capsys.readouterr().err


FLINK_SEEDS = os.path.join(os.path.dirname(__file__), "..", "compat_tests", "flink", "corpus", "2.3.0", "rocksdb",
                           "seeds", "savepoint")


@pytest.mark.parametrize("command", [
    ["rescale", "{sp}", "{file}", "-p", "2"],
    ["flatten", "{sp}", "{file}"],
    ["import-flink", FLINK_SEEDS, "{file}"],
    ["export-flink", "{sp}", "{file}", "--flink-version", "2.3"],
    ["spark-import-flink", FLINK_SEEDS, "{file}"],  # refused before Spark starts
])
def test_a_target_that_is_a_file_is_refused_as_one(tmp_path, capsys, command):
    """A write into a regular file named by mistake failed on a path that "cannot be resolved",
    a CorruptSavepointError (exit 3), as if a savepoint were damaged."""
    write_seeds(tmp_path / "sp")
    (tmp_path / "notes.txt").write_text("mine")
    code = main([a.format(sp=tmp_path / "sp", file=tmp_path / "notes.txt") for a in command] + ["--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 2 and "target exists and is not a directory" in result["error"], result
    assert (tmp_path / "notes.txt").read_text() == "mine"
