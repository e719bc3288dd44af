"""proto/ stays wire- and source-compatible with every released schema (buf, FILE rules)."""

from __future__ import annotations

import shutil

import pytest

from compat_tests import proto_check

pytestmark = pytest.mark.skipif(proto_check.find_buf() is None, reason="buf not installed (pip install buf-bin)")


def test_there_is_a_released_baseline():
    assert [b.name for b in proto_check.baselines()][:1] == ["1.0"]


def test_proto_is_lint_clean_and_not_breaking():
    assert proto_check.check() == 0


def test_a_breaking_change_is_caught(tmp_path):
    changed = tmp_path / "proto"
    shutil.copytree(proto_check.PROTO, changed)
    manifest = changed / "savepoint" / "v1" / "manifest.proto"
    text = manifest.read_text()
    assert "uint32 parallelism = 3;" in text
    manifest.write_text(text.replace("uint32 parallelism = 3;", "uint32 parallelism = 33;"))
    assert proto_check.check(changed, lint=False) == 1
