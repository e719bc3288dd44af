"""``pyref import-flink``, and ``inspect`` / ``verify`` on Flink savepoints: options,
output, exit codes."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from pyref import Savepoint, TtlConfig
from pyref.cli import main
from pyref.errors import InvalidArgumentError
from pyref.flink import FlinkSavepoint
from pyref.flink.import_plan import parse_duration_ms, parse_ttl
from pyref.testing import write_seeds

CORPUS = pathlib.Path(__file__).resolve().parents[2] / "compat_tests/flink/corpus"
KEYED = CORPUS / "2.3.0/rocksdb/keyed-kinds/savepoint"  # Flink 2.3 stores uids: operators are named
OLD_SEEDS = CORPUS / "1.20.3/hashmap/seeds/savepoint"  # Flink 1.x does not: --uid names them

pytestmark = pytest.mark.skipif(not KEYED.exists(), reason="no Flink corpus")


def run(capsys, *argv) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_import_flink_with_ttl_skip_and_json(tmp_path, capsys) -> None:
    code, result = run(capsys, "import-flink", str(KEYED), str(tmp_path / "sp"), "--skip-state", "pojo-keys/blobs",
                       "--ttl", "keyed-kinds/ttl-last=100d:on_read_and_write", "--ttl-default", "100d")
    assert code == 0 and result["format_version"] == "1.2" and result["attempts"] == 1
    ops = {op["operator_id"]: op for op in result["operators"]}
    assert ops["pojo-keys"]["skipped"] == ["blobs"] and ops["pojo-keys"]["key_groups"] == "writer"
    states = {s["name"]: s for s in ops["keyed-kinds"]["states"]}
    assert states["ttl-last"]["ttl"] == {"ttl_ms": 8_640_000_000, "update_type": "on_read_and_write",
                                         "visibility": "never_return_expired"}
    assert states["ttl-nums"]["ttl"]["update_type"] == "on_create_and_write"
    sp = Savepoint.open(tmp_path / "sp")
    assert states["count"]["rows"] == sum(c.row_count for c in sp.operator("keyed-kinds").keyed_state("count").proto.chunks)
    assert sp.operator("keyed-kinds").keyed_state("ttl-last").ttl == TtlConfig(8_640_000_000, "on_read_and_write")
    code, info = run(capsys, "verify", str(tmp_path / "sp"))
    assert code == 0 and info["ok"]


def test_import_flink_names_operators_by_uid(tmp_path, capsys) -> None:
    code, result = run(capsys, "import-flink", str(OLD_SEEDS), str(tmp_path / "sp"), "--uid", "url-counter",
                       "--uid", "61252f73469d3ffba207c548d29a0267=offsets-source")
    assert code == 0
    names = {op["flink_operator_id"]: (op["operator_id"], op["uid"]) for op in result["operators"]}
    assert names["61252f73469d3ffba207c548d29a0267"] == ("offsets-source", "")
    assert ("url-counter", "url-counter") in names.values()
    code, again = run(capsys, "import-flink", str(OLD_SEEDS), str(tmp_path / "sp"))
    assert code == InvalidArgumentError.exit_code and "already exists" in again["error"]


@pytest.mark.parametrize("argv, exit_code, message", [
    ([], 5, "pojo-keys/blobs"),  # an unsplittable Kryo list
    (["--skip-state", "pojo-keys/blobs"], 2, "keyed-kinds/ttl-last"),  # TTL without a configuration
    (["--skip-state", "pojo-keys/blobs", "--ttl", "keyed-kinds/ttl-last"], 2, "--ttl takes"),
    (["--skip-state", "pojo-keys/blobs", "--ttl-default", "soon"], 2, "duration"),
])
def test_import_flink_refusals_exit_with_their_codes(tmp_path, capsys, argv, exit_code, message) -> None:
    code, result = run(capsys, "import-flink", str(KEYED), str(tmp_path / "sp"), *argv)
    assert code == exit_code and message in result["error"]
    assert not (tmp_path / "sp" / "_manifest").exists()


def test_inspect_and_verify_read_a_flink_savepoint(tmp_path, capsys) -> None:
    code, info = run(capsys, "inspect", str(KEYED))
    assert code == 0 and info["format"] == "flink" and info["metadata_version"] == 6
    ops = {op["name"]: op for op in info["operators"]}
    assert ops["pojo-keys"]["key_type"] == "pojo<int32,string>"
    assert {s["name"] for s in ops["keyed-kinds"]["states"]} >= {"count", "ttl-nums", "buckets"}
    assert "pojo-keys/blobs" in info["import"]["refused"]
    code, report = run(capsys, "verify", str(KEYED))
    assert code == 0 and report["ok"] and report["values"] > 1000 and report["keys_checked"] > 0
    assert any("pojo-keys/blobs" in w for w in report["warnings"])
    # A damaged state file: verify reports it (exit 3) instead of raising.
    damaged = tmp_path / "damaged"
    shutil.copytree(KEYED, damaged)
    victim = max((p for p in damaged.iterdir() if p.name != "_metadata"), key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2:len(data) // 2 + 64] = b"\xff" * 64
    victim.write_bytes(bytes(data))
    code, report = run(capsys, "verify", str(damaged))
    assert code == 3 and not report["ok"] and report["errors"]


def test_ttl_and_duration_syntax() -> None:
    assert parse_duration_ms("7d") == 7 * 86_400_000 and parse_duration_ms("500ms") == 500
    assert parse_duration_ms("90") == 90 and parse_duration_ms("15min") == parse_duration_ms("15m") == 900_000
    assert parse_ttl("12h:OnReadAndWrite:ReturnExpiredIfNotCleanedUp") == TtlConfig(
        43_200_000, "on_read_and_write", "return_expired_if_not_cleaned_up")
    for bad in ("", "1.5h", "-3s", "1h:sometimes", "1h:a:b:c"):
        with pytest.raises(InvalidArgumentError):
            parse_ttl(bad)


def test_commands_for_pyref_savepoints_say_a_flink_savepoint_is_read_otherwise(tmp_path, capsys) -> None:
    code, result = run(capsys, "rescale", str(KEYED), str(tmp_path / "out"), "-p", "2")
    assert code == 4 and result["type"] == "SavepointNotFoundError"
    assert "it is a Flink savepoint (_metadata)" in result["error"] and "plan and import-flink" in result["error"]


@pytest.mark.parametrize("case", ["2.3.0/hashmap/operator-state", "2.3.0/rocksdb/keyed-kinds", "1.20.3/hashmap/seeds"])
def test_plan_of_a_flink_savepoint_is_the_plan_of_its_import(case, tmp_path, capsys) -> None:
    """Key groups, list elements and broadcast entries of every new subtask as pyref plans
    them for the import; the bytes read are Flink's keyed state of those key groups."""
    from compat_tests.flink.imports import import_options
    from pyref.flink import import_flink

    source = CORPUS / case / "savepoint"
    options = import_options(CORPUS / case)
    import_flink(source, tmp_path / "sp", **options)
    code, imported = run(capsys, "plan", str(tmp_path / "sp"), "-p", "2")
    assert code == 0
    code, flink = run(capsys, "plan", str(source), "-p", "2")
    assert code == 0
    # Flink 1.x stores no uids: the plan names those operators by hex id, the import by the uids given.
    by_name = {op.operator_id: op.name for op in FlinkSavepoint.open(source, uids=options["uids"]).operators}
    plans = {by_name.get(op["operator_id"], op["operator_id"]): op for op in flink["operators"]}

    def shares(op: dict) -> list:
        return [(s["first_key_group"], s["last_key_group"], s["list_states"], s["broadcast_states"])
                for s in op["subtasks"]]

    for op in imported["operators"]:
        assert shares(plans[op["operator_id"]]) == shares(op), op["operator_id"]
    keyed = [op for op in flink["operators"] if any(s["planned_bytes"] for s in op["subtasks"])]
    assert keyed or case.endswith("operator-state")
    with FlinkSavepoint.open(source) as savepoint:
        for op in keyed:
            stored = sum(h.stream.size for s in savepoint.operator(op["operator_id"]).state.subtasks
                         if (h := s.managed_keyed_state) is not None)
            assert 0 < sum(s["planned_bytes"] for s in op["subtasks"]) <= stored


def test_import_and_verify_text_say_what_they_counted(tmp_path, capsys) -> None:
    assert main(["import-flink", str(KEYED), str(tmp_path / "sp"), "--skip-state", "pojo-keys/blobs",
                 "--ttl-default", "100d"]) == 0
    out = capsys.readouterr().out
    assert "bytes in data files" in out
    assert "  timers user-timers [event_time]: " in out  # a timer service has no serializer to print
    assert main(["verify", str(KEYED)]) == 0
    assert "keys' key groups recomputed" in capsys.readouterr().out  # keys, not (fewer) key groups


@pytest.mark.parametrize("command", ["import-flink", "spark-import-flink"])  # the Spark one before Spark starts
def test_importing_into_a_flink_savepoint_is_refused(tmp_path, capsys, command) -> None:
    flink = tmp_path / "flink"
    shutil.copytree(OLD_SEEDS, flink)
    code, result = run(capsys, command, str(flink), str(flink))  # a user's slip: the source as the target
    assert code == 2 and "holds a Flink savepoint" in result["error"]
    assert sorted(p.name for p in flink.iterdir()) == ["_metadata"]


def test_a_typo_is_answered_with_the_names_there_are(tmp_path, capsys) -> None:
    with FlinkSavepoint.open(KEYED) as sp:
        with pytest.raises(InvalidArgumentError, match="no operator 'keyed-kind'; its operators: .*'keyed-kinds'"):
            sp.operator("keyed-kind")
        op = sp.operator("keyed-kinds")
        with pytest.raises(InvalidArgumentError, match="no keyed state 'counts' \\(its keyed states: .*'count'"):
            op.keyed_state("counts")
        with pytest.raises(InvalidArgumentError, match="no list state 'count' \\(its list states: none\\)"):
            op.list_state("count")
        # pyref's spelling of a timer domain (event_time) is Flink's (event-time) too
        assert len(op.timers("user-timers", "event_time")) == len(op.timers("user-timers", "event-time")) > 0
    code, result = run(capsys, "import-flink", str(KEYED), str(tmp_path / "sp"), "--skip-state", "pojo-keys/blobs",
                       "--skip-state", "keyed-kinds/blobs", "--ttl-default", "1d", "--ttl", "keyed-kinds/count=1d")
    assert code == 2 and "--skip-state (skip_states) names no state: keyed-kinds/blobs (the states are " \
        in result["error"] and "keyed-kinds/count" in result["error"].split("--ttl")[0]
    assert "--ttl (ttl) names no state under TTL: keyed-kinds/count (the states under TTL are keyed-kinds/ttl-" \
        in result["error"]
    # A uid of no operator (a typo) was ignored, the operator left unnamed; it is an error listing them.
    code, result = run(capsys, "import-flink", str(OLD_SEEDS), str(tmp_path / "seeds"), "--uid", "url-countr")
    assert code == 2 and "no operator of the savepoint has the uid or id 'url-countr'" in result["error"]
    assert result["error"].count(", ") >= 1 and "its operators: " in result["error"]
    code, result = run(capsys, "plan", str(KEYED), "--operator", "keyed-kind=2")
    assert code == 2 and "no such operators: ['keyed-kind']; the operators are " in result["error"]
    assert "keyed-kinds" in result["error"]
    import_flink_args = ("import-flink", str(KEYED), str(tmp_path / "sp"), "--skip-state", "pojo-keys/blobs",
                         "--ttl-default", "1d")
    assert run(capsys, *import_flink_args)[0] == 0
    sp = Savepoint.open(tmp_path / "sp")
    with pytest.raises(InvalidArgumentError, match="no operator 'keyed-kind'; its operators: .*'keyed-kinds'"):
        sp.operator("keyed-kind")
    with pytest.raises(InvalidArgumentError, match="no such state \\(of this type it has .*'count'"):
        sp.operator("keyed-kinds").keyed_state("counts")


@pytest.mark.parametrize("argv, message", [
    (["spark-import-flink", str(KEYED), "{tmp}/sp"], "pojo-keys/blobs"),
    (["spark-import-flink", str(KEYED), "{tmp}/sp", "--skip-state", "pojo-keys/blobs"], "keyed-kinds/ttl-last"),
    (["spark-import-flink", "{tmp}/nope", "{tmp}/sp"], "no Flink _metadata"),
    (["spark-export-flink", "{tmp}/seeds", "{tmp}/f", "--flink-version", "2.9"], "'2.9'"),
    (["spark-export-flink", "{tmp}/seeds", "{tmp}/f", "--flink-version", "2.3", "--only", "nope"], "nope"),
])
def test_spark_flink_commands_refuse_before_spark_starts(tmp_path, capsys, monkeypatch, argv, message) -> None:
    write_seeds(tmp_path / "seeds")
    monkeypatch.setattr("pyref.spark.cli._run_on_spark", lambda *args: pytest.fail("Spark was started"))
    code, result = run(capsys, *[a.format(tmp=tmp_path) for a in argv])
    assert code in (2, 4, 5) and message in result["error"]


def test_inspect_subtasks_lists_a_flink_savepoints_key_groups(capsys) -> None:
    code, info = run(capsys, "inspect", str(KEYED), "--subtasks")
    ops = {op["name"]: op for op in info["operators"]}
    assert code == 0 and ops["keyed-kinds"]["subtask_key_groups"] == [[0, 333], [334, 666], [667, 999]]
    assert main(["inspect", str(KEYED), "--subtasks"]) == 0
    assert "  key groups 0:0-333, 1:334-666, 2:667-999" in capsys.readouterr().out


def test_inspect_and_verify_name_a_flink_1_savepoints_operators_by_uid(tmp_path, capsys) -> None:
    uids = [op for op in json.loads((OLD_SEEDS.parent / "truth.json").read_text())["operators"]]
    code, info = run(capsys, "inspect", str(OLD_SEEDS), *[f"--uid={u}" for u in uids])
    assert code == 0 and set(uids) <= {op["name"] for op in info["operators"]}
    code, report = run(capsys, "verify", str(OLD_SEEDS), f"--uid={uids[0]}")
    assert code == 0 and report["ok"]
    code, report = run(capsys, "verify", str(OLD_SEEDS), f"--uid={uids[0]}x")
    ids = [op.operator_id for op in FlinkSavepoint.open(OLD_SEEDS).operators]
    assert code == 2 and f"'{uids[0]}x'" in report["error"] and all(i in report["error"] for i in ids)
    write_seeds(tmp_path / "pyref")
    code, report = run(capsys, "inspect", str(tmp_path / "pyref"), "--uid=seeds")
    assert code == 2 and "Flink savepoint" in report["error"]


OLD_KEYED = CORPUS / "1.13.6/rocksdb/keyed-kinds/savepoint"  # the job of KEYED, whose uids Flink 1.13 did not store
KEYED_KINDS_ID = "98579dcfc6bf805e03cf6694974d3f70"  # the hex id of its operator with uid keyed-kinds


def test_inspect_text_says_the_names_uid_gave_though_the_import_would_be_refused(capsys) -> None:
    """The text names an operator --uid named (by the job's uid or HEXID=NAME), not only an
    import plan's "imports as", which a refused import (here a Kryo LIST state) does not show."""
    assert main(["inspect", str(OLD_KEYED), "--uid", "keyed-kinds", "--uid", "4801EDA71632001A39F6730227C58E58=pk"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith(f"operator {KEYED_KINDS_ID} named keyed-kinds:") for line in lines)
    assert any(line.startswith("operator 4801eda71632001a39f6730227c58e58 named pk:") for line in lines)
    assert any(line.startswith("import-flink would refuse") for line in lines)


def test_an_operator_is_named_by_uid_or_hex_id_in_either_case_on_every_release(tmp_path, capsys) -> None:
    """Flink 2.x stores uids, 1.x does not: a uid, a hex id and an uppercase hex id name the
    same operator of both in plan, the Python API, --skip-state and --ttl."""
    for savepoint in (KEYED, OLD_KEYED):
        for name in ("keyed-kinds", KEYED_KINDS_ID, KEYED_KINDS_ID.upper()):
            code, plan = run(capsys, "plan", str(savepoint), "--operator", f"{name}=5")
            moved = [op["operator_id"] for op in plan["operators"] if op["to_parallelism"] != op["from_parallelism"]]
            assert code == 0 and len(moved) == 1 and moved[0] in ("keyed-kinds", KEYED_KINDS_ID), (savepoint, name)
            with FlinkSavepoint.open(savepoint) as sp:
                assert sp.operator(name).operator_id == KEYED_KINDS_ID
    code, result = run(capsys, "plan", str(KEYED), "--operator", "keyed-kinds=5", "--operator", f"{KEYED_KINDS_ID}=3")
    assert code == 2 and "operator keyed-kinds is named twice" in result["error"]
    # --uid names a Flink 1.x savepoint's operators in plan as in inspect and import-flink
    code, plan = run(capsys, "plan", str(OLD_KEYED), "-p", "2", "--uid", "keyed-kinds")
    assert code == 0 and "keyed-kinds" in [op["operator_id"] for op in plan["operators"]]
    # the states of Flink 1.13's operators by the job's uids and an uppercase hex id, without --uid
    code, report = run(capsys, "import-flink", str(OLD_KEYED), str(tmp_path / "sp"), "--skip-state", "pojo-keys/blobs",
                       "--ttl", "keyed-kinds/ttl-last=1d", "--ttl", f"{KEYED_KINDS_ID.upper()}/ttl-nums=2d",
                       "--ttl", f"{KEYED_KINDS_ID}/ttl-tags=3d")
    assert code == 0, report
    states = {st["name"]: st for op in report["operators"] for st in op["states"]}
    assert "blobs" not in states and {"ttl-last", "ttl-nums", "ttl-tags"} <= set(states)
    # its operators are named by hex id; export-flink takes the job's uid for them too
    code, exported = run(capsys, "export-flink", str(tmp_path / "sp"), str(tmp_path / "old-flink"), "--flink-version",
                         "1.13", "--only", "keyed-kinds", "--operator", "keyed-kinds=2")
    assert code == 0 and [(op["operator_id"], op["parallelism"]) for op in exported["operators"]] == [
        (KEYED_KINDS_ID, 2)]
    # and export-flink, of an import named by uid, takes the Flink id it exports the operator as
    code, report = run(capsys, "import-flink", str(KEYED), str(tmp_path / "named"), "--skip-state", "pojo-keys/blobs",
                       "--ttl-default", "1d")
    code, exported = run(capsys, "export-flink", str(tmp_path / "named"), str(tmp_path / "flink"), "--flink-version",
                         "2.3", "--only", KEYED_KINDS_ID.upper(), "--operator", f"{KEYED_KINDS_ID}=2")
    assert code == 0 and [(op["operator_id"], op["parallelism"]) for op in exported["operators"]] == [("keyed-kinds", 2)]


def test_a_mistyped_skip_state_is_named_before_the_refusal_it_was_meant_to_lift(tmp_path, capsys) -> None:
    code, result = run(capsys, "import-flink", str(KEYED), str(tmp_path / "sp"), "--skip-state", "pojo-key/blobs",
                       "--ttl-default", "1d")
    assert code == 2 and "--skip-state (skip_states) names no state: pojo-key/blobs" in result["error"]
    assert "pojo-keys/blobs" in result["error"]  # among the states there are


@pytest.mark.parametrize("argv", [
    ["plan", str(KEYED)],
    ["rescale", "{tmp}/seeds", "{tmp}/out"],
    ["export-flink", "{tmp}/seeds", "{tmp}/out", "--flink-version", "2.3"],
    ["spark-rescale", "{tmp}/seeds", "{tmp}/out"],
])
def test_a_parallelism_for_every_operator_and_one_by_one_are_not_combined(tmp_path, capsys, argv) -> None:
    """-p N beside --operator ID=M was dropped without a word (the other operators kept theirs)."""
    write_seeds(tmp_path / "seeds")
    code, result = run(capsys, *[a.format(tmp=tmp_path) for a in argv], "-p", "2", "--operator", "seeds=3")
    assert code == 2 and "argument --operator: not allowed with argument -p/--parallelism" in result["error"]
    assert not (tmp_path / "out").exists()


def test_a_flink_savepoint_is_read_at_its_file_url(capsys) -> None:
    for url in (KEYED.as_uri(), KEYED.as_uri() + "/", (KEYED / "_metadata").as_uri()):
        code, info = run(capsys, "inspect", url)
        assert code == 0 and info["location"] == str(KEYED), url
        with FlinkSavepoint.open(url) as sp:
            assert sp.location == str(KEYED)


def test_a_path_with_nothing_or_the_wrong_savepoint_at_it_says_so(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # "~/..." quoted: a relative path whose first directory is "~"
    for argv in (["inspect", "~/savepoint"], ["plan", "~/savepoint", "-p", "2"], ["import-flink", "~/savepoint", "sp"]):
        code, result = run(capsys, *argv)
        assert code == 4 and "the path does not exist; '~' is not expanded" in result["error"], result
    write_seeds(tmp_path / "pyref")  # a pyref savepoint where a Flink one goes: said so, not "no _metadata" alone
    code, result = run(capsys, "import-flink", "pyref", "sp")
    assert code == 4 and "it is a pyref savepoint (_manifest)" in result["error"]
    code, result = run(capsys, "inspect", "savepoint")
    assert code == 4 and result["error"].endswith(f"; the path does not exist [file={tmp_path / 'savepoint'}]")


def test_a_window_states_get_asks_for_the_window_instead_of_answering_none() -> None:
    """Real window state (Flink 1.20.3 and 2.3.0): get() without the window gave the default
    for every key; it is refused as pyref's own views refuse it, and get() with it finds it."""
    from pyref.flink import GLOBAL_WINDOW, TimeWindow

    for release in ("1.20.3", "2.3.0"):
        with FlinkSavepoint.open(CORPUS / release / "rocksdb/windows/savepoint") as sp:
            windows = [op for op in sp.operators if "window-contents" in op.keyed_state_names]
            for op in windows:
                contents = op.keyed_state("window-contents")
                key, window, value = next(iter(contents.items()))
                assert isinstance(window, TimeWindow) or window is GLOBAL_WINDOW
                assert contents.get(key, namespace=window) == value
                with pytest.raises(InvalidArgumentError, match="window-contents is kept per namespace .*namespace="):
                    contents.get(key)
            plain = next(op for op in sp.operators if op.keyed_state_names and not any(
                op.keyed_state(n).has_namespace for n in op.keyed_state_names))
            state = plain.keyed_state(plain.keyed_state_names[0])
            with pytest.raises(InvalidArgumentError, match="has no namespace"):
                state.get(next(iter(state.items()))[0], namespace=TimeWindow(0, 1))


def test_inspect_says_a_flink_1_15_metadata_does_not_tell_a_savepoint_from_a_checkpoint(capsys) -> None:
    """_metadata version 3 records no savepoint format: a 1.15 retained checkpoint was shown as
    "Flink savepoint ..., format unknown"; version 4 says which it is."""
    checkpoint = CORPUS.parents[2] / "tests/flink/data/checkpoints/1.15.4-rocksdb-full-seeds/checkpoint"
    for path in (checkpoint, OLD_KEYED):
        assert main(["inspect", str(path)]) == 0
        head = capsys.readouterr().out.splitlines()[:2]
        assert head == [f"Flink savepoint or retained checkpoint {path}",
                        "  _metadata version 3, checkpoint 1, version 3 does not say which"], head
    assert main(["inspect", str(KEYED)]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == [
        f"Flink savepoint {KEYED}", "  _metadata version 6, checkpoint 1, CANONICAL"]


def test_plan_only_shows_the_operators_asked_for(tmp_path, capsys) -> None:
    """A Flink SQL job plans a hundred operators: --only (uid or hex id, either case) shows some."""
    code, plan = run(capsys, "plan", str(OLD_KEYED), "-p", "2", "--only", "keyed-kinds", "--only",
                     "C691A218D56B8F74DAE6FA83F71CED11")
    assert code == 0 and [op["operator_id"] for op in plan["operators"]] == ["c691a218d56b8f74dae6fa83f71ced11",
                                                                            KEYED_KINDS_ID]
    code, result = run(capsys, "plan", str(KEYED), "-p", "2", "--only", "keyed-kind")
    assert code == 2 and "no operator 'keyed-kind'" in result["error"]
    write_seeds(tmp_path / "seeds")
    code, plan = run(capsys, "plan", str(tmp_path / "seeds"), "-p", "2", "--only", "url-counter")
    assert code == 0 and [op["operator_id"] for op in plan["operators"]] == ["url-counter"]


def test_uid_cannot_rename_an_operator_whose_uid_flink_stored(tmp_path, capsys) -> None:
    """Flink 2.x stores uids: another name for one was dropped without a word."""
    code, result = run(capsys, "import-flink", str(KEYED), str(tmp_path / "sp"), "--uid", f"{KEYED_KINDS_ID}=counter")
    assert code == 2 and f"{KEYED_KINDS_ID} is 'keyed-kinds', not 'counter'" in result["error"]
    assert not (tmp_path / "sp").exists()
    code, info = run(capsys, "inspect", str(KEYED), "--uid", "keyed-kinds", "--uid", f"{KEYED_KINDS_ID.upper()}=keyed-kinds")
    assert code == 0  # the job's own uids, as a script passes them for 1.x and 2.x alike
