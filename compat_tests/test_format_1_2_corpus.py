"""Format 1.2 and dump schema 2 against the corpus: what older readers do with it, and how
the kit compares schema 2 dumps with schema 1 expectations.

- A 1.1 reader (pyref knowing only the 1.1 features) refuses every golden/1.2 case as
  ``unsupported-feature``, naming a 1.2 feature (spec/format.md §9.2, rule M1).
- A 1.0 reader (manifests parsed with the released 1.0 schemas, every 1.2 field unknown)
  reads the 1.0-labelled case that carries only informative 1.2 fields.
- The kit compares a schema 2 dump with a schema 1 expectation by what schema 1 has,
  and fails a schema 1 dump of a case that needs schema 2.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import textwrap

import pytest

from compat_tests import GOLDEN_DIR, ROOT
from compat_tests.canonical import as_schema_1, canonical_text, dump_savepoint, error_category
from compat_tests.conformance import check_case, discover
from compat_tests.test_1_0_rules_on_1_1 import manifest_1_0  # noqa: F401  (fixture)

CASES_1_2 = sorted(p for p in (GOLDEN_DIR / "1.2").iterdir() if (p / "expected.json").exists())
FEATURES_1_1 = frozenset({"external-bases"})


def test_there_is_a_1_2_golden_set():
    assert len(CASES_1_2) >= 10


@pytest.mark.parametrize("case", CASES_1_2, ids=lambda p: p.name)
def test_a_1_1_reader_refuses_every_1_2_golden_by_feature(case, monkeypatch):
    from pyref.errors import UnsupportedFormatError
    from pyref.features import REQUIRED_1_2

    monkeypatch.setattr("pyref.manifest.KNOWN_REQUIRED_FEATURES", FEATURES_1_1)
    with pytest.raises(UnsupportedFormatError) as refused:
        dump_savepoint(case / "savepoint", [1])
    assert error_category(refused.value, case / "savepoint") == "unsupported-feature"
    assert any(f"'{f}'" in str(refused.value) for f in REQUIRED_1_2)


def test_a_1_0_reader_reads_a_savepoint_with_only_informative_1_2_fields(manifest_1_0, tmp_path):  # noqa: F811
    from pyref._proto.savepoint.v1 import manifest_pb2
    from pyref.manifest import encode_manifest

    case = GOLDEN_DIR / "1.0" / "informative-1-2-fields"
    work = tmp_path / "case"
    shutil.copytree(case, work)
    data = (work / "savepoint" / "_manifest").read_bytes()
    as_1_0 = manifest_1_0.FromString(data[16:-4])
    as_1_0.DiscardUnknownFields()  # uid, engine_operator_id, SerializerSnapshot.engine: unknown to 1.0
    kept = manifest_pb2.Manifest.FromString(as_1_0.SerializeToString())
    assert not kept.operators[0].uid and not kept.operators[0].keyed_states[0].value_serializer.HasField("engine")
    (work / "savepoint" / "_manifest").write_bytes(encode_manifest(kept, minor=0))
    expected = json.loads((case / "expected.json").read_text(encoding="utf-8"))
    assert expected["operators"][0]["uid"] == "counter-uid"  # the schema 2 expectation shows them
    actual = dump_savepoint(work / "savepoint", expected["parallelisms"])
    assert canonical_text(actual) == canonical_text(as_schema_1(expected))


def test_schema_2_adds_members_only():
    expected = json.loads((GOLDEN_DIR / "1.2" / "timers" / "expected.json").read_text(encoding="utf-8"))
    older = as_schema_1(expected)
    assert older["canonical_version"] == 1
    operator = older["operators"][0]
    assert "timer_services" not in operator and "values" not in operator["keyed_states"][0]
    assert all("namespace" not in e for e in operator["keyed_states"][0]["entries"])
    assert as_schema_1(older) is older


def _reader(tmp_path, body: str) -> str:
    script = tmp_path / "reader.py"
    script.write_text(textwrap.dedent(body))
    return shlex.join([sys.executable, str(script)])


def test_the_kit_compares_schema_2_dumps_with_schema_1_expectations(tmp_path):
    cases = {c.name: c for c in discover(ROOT, ["golden"], ["golden/1.0/keyed-map", "golden/1.2/timers"])}
    reader = shlex.join([sys.executable, "-m", "compat_tests.dump_pyref"])
    for case in cases.values():  # pyref prints schema 2 for both
        assert check_case(reader, case, cwd=str(ROOT.parent)).passed
    # A schema 1 reader: right for the 1.0 case, not enough for the 1.2 one.
    schema_1 = _reader(tmp_path, """
        import os, sys
        sys.path.insert(0, os.getcwd())
        from compat_tests.dump_pyref import main
        import compat_tests.dump_pyref as d
        d.CANONICAL_VERSION = 1
        sys.exit(main())
    """)
    assert check_case(schema_1, cases["golden/1.0/keyed-map"], cwd=str(ROOT.parent)).passed
    result = check_case(schema_1, cases["golden/1.2/timers"], cwd=str(ROOT.parent))
    assert not result.passed and "needs dump schema 2" in result.detail
