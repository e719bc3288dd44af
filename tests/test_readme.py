"""The README's library example runs as written (only the path is swapped)."""

from __future__ import annotations

import contextlib
import io
import pathlib
import re

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def test_library_example_runs(tmp_path):
    block = re.search(r"## The library\n\n```python\n(.*?)```", README.read_text(), re.S).group(1)
    code = block.replace("/savepoints/sp-1", str(tmp_path / "sp-1"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    lines = out.getvalue().splitlines()
    assert lines[0] == "[200]"
    assert lines[1].startswith("KeyGroupRange(first=96, last=127)")
    assert lines[2] == "3"
    assert lines[3] == ("<KeyedStateView url-counter/count [value] int64@v1: 2 entries in 2 key groups, 2 chunks, "
                        "68 bytes>")
