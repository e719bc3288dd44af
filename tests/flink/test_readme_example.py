"""The README's "From Flink" example runs as written on a corpus savepoint (only the path is swapped)."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CASE = ROOT / "compat_tests/flink/corpus/1.20.3/hashmap/seeds/savepoint"


@pytest.mark.skipif(not CASE.is_dir(), reason="the Flink corpus case is not present")
def test_from_flink_example_runs() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## From Flink.*?```python\n(.*?)```", text, re.S).group(1)
    namespace: dict = {}
    exec(compile(block.replace("/savepoints/savepoint-3f2a1c-7d9e", str(CASE)), "README.md", "exec"), namespace)
    assert namespace["counts"].get("/page/7") == 7


@pytest.mark.skipif(not CASE.is_dir(), reason="the Flink corpus case is not present")
def test_import_example_runs(tmp_path) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"### Importing a Flink savepoint.*?```python\n(.*?)```", text, re.S).group(1)
    code = block.replace("/flink/savepoint-3f2a1c", str(CASE)).replace("/savepoints/imported", str(tmp_path / "sp"))
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["report"].rows == 56 and namespace["counter"].keyed_state("count").get("/page/7") == 7
