"""The hex examples of spec/serializers.md, read so the tests can hold the spec to the code."""

from __future__ import annotations

import re
from pathlib import Path

SPEC = Path(__file__).resolve().parents[2] / "spec" / "serializers.md"


def spec_hex_examples(section: str) -> set[str]:
    """The hex cells (last column of table rows) of one ``### <section>`` of the spec."""
    text = SPEC.read_text(encoding="utf-8")
    m = re.search(rf"^### {re.escape(section)} .*?\n(.*?)(?=^##)", text, re.M | re.S)
    assert m, f"spec section {section} not found"
    found = set()
    for line in m.group(1).splitlines():
        if line.startswith("|"):
            last = line.strip().strip("|").split("|")[-1].strip()
            h = re.fullmatch(r"`([0-9a-f]{2}(?: [0-9a-f]{2})*)`", last)
            if h:
                found.add(h.group(1))
    return found
