"""The tuple evolution goldens (spec/serializers.md §5.3): pyref's migration of each committed
case gives its ``expected_migrated.json`` or is refused naming the case's field, and the
generator writes checked cases once."""

from __future__ import annotations

import json

import pytest

from compat_tests import GOLDEN_DIR, generate_tuple_evolution
from compat_tests._build import read_sums
from compat_tests.canonical import canonical_text, first_difference
from compat_tests.conformance import verify_corpora

CASES = sorted(p.parent for p in GOLDEN_DIR.glob("*/*/migration.json"))


def test_every_case_of_the_generator_is_committed():
    assert {c.name for c in CASES} == {c.name for c in generate_tuple_evolution.cases()}


@pytest.mark.parametrize("case_dir", CASES, ids=lambda p: p.name)
def test_pyref_migrates_each_case_as_expected(case_dir, tmp_path):
    from pyref.errors import IncompatibleSerializerError
    from pyref.reader import Savepoint

    doc = json.loads((case_dir / "migration.json").read_text(encoding="utf-8"))
    migrated = generate_tuple_evolution.run_migration(case_dir, tmp_path / "migrated")
    if doc["outcome"] == generate_tuple_evolution.REFUSED:
        assert migrated is None and not (tmp_path / "migrated" / "_manifest").exists()
        return
    expected = json.loads((case_dir / "expected_migrated.json").read_text(encoding="utf-8"))
    assert canonical_text(migrated) == canonical_text(expected), first_difference(expected, migrated)
    # Until migrated, the source cannot be read with the new serializer (§5.3).
    new = generate_tuple_evolution.serializer_from_migration(doc)
    with pytest.raises(IncompatibleSerializerError, match="migrat"):
        operator = Savepoint.open(case_dir / "savepoint").operator(doc["operator"])
        if doc["state"] in operator.keyed_state_names:
            operator.keyed_state(doc["state"], new)
        else:
            operator.list_state(doc["state"], new)


@pytest.mark.parametrize("case_dir", CASES, ids=lambda p: p.name)
def test_each_label_is_the_serializer_of_its_case(case_dir):
    from pyref.spark.cli import parse_serializer

    doc = json.loads((case_dir / "migration.json").read_text(encoding="utf-8"))
    parsed = parse_serializer(doc["label"])
    assert parsed == generate_tuple_evolution.serializer_from_migration(doc)
    assert generate_tuple_evolution.defaults_json(parsed) == doc["defaults"]


def test_the_generator_writes_checked_cases_once(tmp_path):
    only = ["tuple-evolution-add-field", "tuple-evolution-refused-no-default"]
    assert generate_tuple_evolution.generate(tmp_path, only) == only
    assert generate_tuple_evolution.generate(tmp_path, only) == []  # written once
    assert not verify_corpora(tmp_path.parent, [tmp_path.name])
    assert any(p.endswith("tuple-evolution-add-field/expected_migrated.json") for p in read_sums(tmp_path))
    assert "| `tuple-evolution-refused-no-default` |" in (tmp_path / "1.0" / "README.md").read_text()


def test_a_migration_that_differs_from_the_hand_converted_values_is_not_kept(tmp_path):
    case = next(c for c in generate_tuple_evolution.cases() if c.name == "tuple-evolution-add-field")
    wrong = generate_tuple_evolution.EvolutionCase(**{**case.__dict__, "after": case.before})
    with pytest.raises(SystemExit, match="pyref's migration differs"):
        generate_tuple_evolution.generate_case(wrong, tmp_path / "x", "test")
    assert not (tmp_path / "x").exists()
