"""The conformance kit judges readers: it fails a wrong dump, a reader that reads
what it must refuse, and a refusal with the wrong category or without the protocol."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
import textwrap

import pytest

from compat_tests import ROOT, generate_goldens, generate_rejects
from compat_tests.conformance import check_case, describe, discover, main, reader_argv, run

PYREF = shlex.join([sys.executable, "-m", "compat_tests.dump_pyref"])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    generate_goldens.generate(root / "golden", ["keyed-map"])
    generate_rejects.generate(root / "reject", root / "forward", ["unknown-codec", "chunk-bad-checksum",
                                                                  "unknown-optional-feature"])
    return root


def _reader(tmp_path, body: str) -> str:
    script = tmp_path / "reader.py"
    script.write_text(textwrap.dedent(body))
    return shlex.join([sys.executable, str(script)])


def _results(reader, corpus):
    return {r.case: r for r in run(reader, discover(corpus), jobs=2, cwd=str(ROOT.parent))}


def test_pyref_passes(corpus):
    results = _results(PYREF, corpus)
    assert len(results) == 4 and all(r.passed for r in results.values()), results


def test_a_reader_that_reads_everything_fails(tmp_path, corpus):
    reader = _reader(tmp_path, """
        import json
        print(json.dumps({"canonical_version": 1, "format_version": "1.0", "parallelisms": [], "operators": []}))
    """)
    results = _results(reader, corpus)
    assert not any(r.passed for r in results.values())
    assert "must refuse" in results["reject/unknown-codec"].detail
    assert "differs from expected.json at $." in results["golden/1.0/keyed-map"].detail


def test_wrong_category_and_protocol_violations_fail(tmp_path, corpus):
    reader = _reader(tmp_path, """
        import json, sys
        if "codec" in sys.argv[1]:
            print(json.dumps({"error": {"category": "corrupt", "message": "?"}}))
        else:
            print("Traceback: something broke", file=sys.stderr)
        sys.exit(3)
    """)
    results = _results(reader, corpus)
    assert "refused as 'corrupt', expected 'unsupported-feature'" in results["reject/unknown-codec"].detail
    assert "without an error document" in results["reject/chunk-bad-checksum"].detail
    assert "refused a savepoint it must read" in results["forward/unknown-optional-feature"].detail
    lenient = {r.case: r for r in run(reader, discover(corpus), strict_categories=False)}
    assert lenient["reject/unknown-codec"].passed


def test_an_interrupted_run_is_tried_again(tmp_path, corpus):
    """A reader killed once (as by the machine) passes on its second run, and the kill is reported;
    one killed every time fails, naming the signal."""
    marker = tmp_path / "killed-once"
    reader = _reader(tmp_path, f"""
        import os, pathlib, signal, sys
        marker = pathlib.Path({str(marker)!r})
        if not marker.exists() or "always" in os.environ.get("KILL", ""):
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        os.execv(sys.executable, [sys.executable, "-m", "compat_tests.dump_pyref", *sys.argv[1:]])
    """)
    case = next(c for c in discover(corpus) if c.name == "golden/1.0/keyed-map")
    result = check_case(reader, case, cwd=str(ROOT.parent))
    assert result.passed and result.earlier == [result.earlier[0]], result
    assert result.earlier[0].startswith("reader killed by SIGKILL after")
    assert "earlier runs interrupted: reader killed by SIGKILL" in describe(result)

    always = check_case(reader, case, cwd=str(ROOT.parent), env={**os.environ, "KILL": "always"}, attempts=3)
    assert not always.passed and always.interrupted and always.exit_code == -signal.SIGKILL
    assert always.detail.startswith("reader killed by SIGKILL") and len(always.earlier) == 2
    once = check_case(reader, case, cwd=str(ROOT.parent), env={**os.environ, "KILL": "always"}, attempts=1)
    assert not once.passed and once.earlier == []


def test_placeholders():
    assert reader_argv("r --in {savepoint} -p={parallelisms}", ROOT / "x", [1, 2]) == ["r", "--in", str(ROOT / "x"),
                                                                                       "-p=1,2"]
    assert reader_argv("r -v", ROOT / "x", [3]) == ["r", "-v", str(ROOT / "x"), "--parallelism", "3"]


def test_a_case_with_a_store_root_passes_it():
    """Cases whose savepoints name bases by path (format 1.2 base-paths) carry store.json."""
    assert reader_argv("r", ROOT / "x", [1], ROOT) == ["r", str(ROOT / "x"), "--parallelism", "1", "--store-root",
                                                       str(ROOT)]
    assert reader_argv("r {savepoint} --root={store_root}", ROOT / "x", [1], ROOT) == ["r", str(ROOT / "x"),
                                                                                     f"--root={ROOT}"]
    cases = [c for c in discover() if c.store_root is not None]
    assert cases and all(c.store_root == c.directory for c in cases)
    assert not any(c.store_root for c in discover(ROOT, ["golden"], ["golden/1.2/windowed-job*"]))


def test_command_line_exit_codes(corpus, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT.parent)
    assert main(["--reader", PYREF, "--root", str(corpus), "-q"]) == 0
    assert capsys.readouterr().out.strip().endswith("conformance: 4 passed, 0 failed")
    assert main(["--reader", "false", "--root", str(corpus), "--corpus", "golden"]) == 1
    tampered = tmp_path / "tampered"
    shutil.copytree(corpus, tampered)
    (tampered / "golden" / "1.0" / "keyed-map" / "expected.json").write_text("{}")  # refused up front
    assert main(["--reader", PYREF, "--root", str(tampered), "--corpus", "golden"]) == 2


def test_checking_a_writers_savepoint(corpus, capsys, monkeypatch):
    monkeypatch.chdir(ROOT.parent)
    case = corpus / "golden" / "1.0" / "keyed-map"
    assert main(["--savepoint", str(case / "savepoint"), "--expected", str(case / "expected.json")]) == 0
    other = corpus / "forward" / "unknown-optional-feature" / "expected.json"
    assert main(["--savepoint", str(case / "savepoint"), "--expected", str(other)]) == 1
    assert "dump differs" in capsys.readouterr().out
