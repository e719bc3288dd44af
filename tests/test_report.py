"""``pyref report``: the numbers it draws, its bounds on huge savepoints, and the page as a
real browser (Debian's Chromium, scripts/fetch_chromium.py) lays it out."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

from pyref import Savepoint, SavepointWriter
from pyref.cli import main
from pyref.load import KeyGroupLoad
from pyref.report import MAX_BARS, render_report
from pyref.serializers import Bytes, Int64


def write_skewed(path, *, parallelism=4, max_parallelism=128, keys=40, name=""):
    """Keys 0..keys-1 with values of 10*key bytes: key groups of very different sizes, and
    (with few keys) key groups with nothing in them."""
    with SavepointWriter(str(path), inline_bytes=0, codec="none") as w:
        op = w.add_operator("skewed", parallelism, max_parallelism=max_parallelism, key_serializer=Int64(), name=name)
        op.keyed_state("v", Bytes()).add(np.arange(keys), [b"x" * (10 * k) for k in range(keys)])
        w.add_operator("source", 2).list_state("offsets", Int64()).add(0, [1, 2, 3])


class Elements(HTMLParser):
    """Every start tag with its attributes, in document order."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def bars(self, chart_id: str) -> list[dict]:
        inside, found = False, []
        for tag, attrs in self.tags:
            if tag == "svg":
                inside = attrs.get("id") == chart_id
            elif inside and tag == "rect":
                found.append(attrs)
        return found

    def by_id(self, element_id: str) -> dict:
        return next(attrs for _, attrs in self.tags if attrs.get("id") == element_id)


def expected_key_group_bytes(sp: Savepoint, operator_id: str) -> list[int]:
    """Per key group, from the manifest with plain Python (not the numpy code under test)."""
    op = sp.operator(operator_id).proto
    sizes = [0] * op.max_parallelism
    for state in op.keyed_states:
        for c in state.chunks:
            sizes[c.key_group] += c.range.length
    return sizes


def test_subtask_load_is_what_each_subtask_restores(tmp_path):
    write_skewed(tmp_path / "sp")
    sp = Savepoint.open(tmp_path / "sp")
    load = KeyGroupLoad.of(sp.operator("skewed").proto)
    assert load.bytes.tolist() == expected_key_group_bytes(sp, "skewed")
    for p in (1, 3, 4, 100, 128):
        planned = sp.restore_plan({"skewed": p}).operators["skewed"].planned_bytes  # restore's own arithmetic
        assert load.at(p).bytes.tolist() == planned.tolist()
    at128 = load.at(128)
    assert at128.idle == 128 - len({c.key_group for c in sp.operator("skewed").proto.keyed_states[0].chunks})
    assert at128.skew == pytest.approx(at128.bytes.max() / at128.bytes.mean())


def test_histogram_bins_key_groups_by_powers_of_two(tmp_path):
    write_skewed(tmp_path / "sp")
    sp = Savepoint.open(tmp_path / "sp")
    sizes = expected_key_group_bytes(sp, "skewed")
    bins = KeyGroupLoad.of(sp.operator("skewed").proto).histogram()
    assert sum(c for _, _, c in bins) == 128 and bins[0] == (0, 1, sizes.count(0))
    for low, high, count in bins[1:]:
        assert high == 2 * low and count == sum(low <= s < high for s in sizes)


def test_cli_writes_the_page(tmp_path, capsys):
    write_skewed(tmp_path / "sp")
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "sp"), "-p", "128", "-o", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["report"], result["bytes"]) == (str(out), out.stat().st_size)
    page = Elements(out.read_text())
    assert len(page.bars("load-0-p4")) == 4 and len(page.bars("load-0-p128")) == 128
    load = KeyGroupLoad.of(Savepoint.open(tmp_path / "sp").operator("skewed").proto)
    (skewed,) = result["operators"]  # the list-state operator has no key-group load
    assert [(at["parallelism"], at["idle_subtasks"], at["largest_bytes"]) for at in skewed["loads"]] == \
        [(p, load.at(p).idle, load.at(p).bytes.max()) for p in (4, 128)]
    assert page.by_id("load-0-p128-summary")["data-idle"] == str(load.at(128).idle)
    assert main(["report", str(tmp_path / "sp"), "-p", "1000", "-o", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["operators"][0]["loads"][1]["parallelism"] == 128  # capped
    assert "http" not in re.sub(r'xmlns="[^"]*"', "", out.read_text())  # nothing fetched from anywhere
    assert main(["report", str(tmp_path / "sp"), "-p", "0", "-o", str(out), "--json"]) == 2


def test_names_from_the_savepoint_are_escaped(tmp_path):
    write_skewed(tmp_path / "sp", name='<script>alert(1)</script><img src=x onerror="y">')
    page = render_report(Savepoint.open(tmp_path / "sp"), 8)
    assert "<script>" not in page and "<img" not in page and "&lt;script&gt;" in page


def test_a_huge_savepoint_gives_a_bounded_page(tmp_path):
    """Parallelism 32768: each chart draws at most MAX_BARS bars (each the largest of its
    group of subtasks), the histogram at most 65, so the page stays small."""
    write_skewed(tmp_path / "sp", parallelism=32768, max_parallelism=32768, keys=3000)
    sp = Savepoint.open(tmp_path / "sp")
    page_text = render_report(sp, 20000)
    page = Elements(page_text)
    current, chosen = page.bars("load-0-p32768"), page.bars("load-0-p20000")
    assert len(current) == MAX_BARS and len(chosen) == 500  # 40 subtasks a bar: ceil(20000 / 512) = 40
    load = KeyGroupLoad.of(sp.operator("skewed").proto).at(32768)
    assert int(current[0]["data-bytes"]) == load.bytes[:64].max()
    assert len(page.bars("kg-histogram-0")) <= 65 and len(page_text) < 400_000


# -- in a real browser ------------------------------------------------------------------

def find_chromium() -> str | None:
    """$PYREF_CHROMIUM, else what scripts/fetch_chromium.py unpacked, else a Chromium on PATH."""
    if os.environ.get("PYREF_CHROMIUM"):
        return os.environ["PYREF_CHROMIUM"]
    cache = os.environ.get("PYREF_CHROMIUM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pyref", "chromium")
    found = sorted(glob.glob(os.path.join(cache, "*", "chromium")))
    return found[-1] if found else next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)


@pytest.fixture(scope="module")
def chromium():
    path = find_chromium()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the browser test: scripts/test.sh runs scripts/fetch_chromium.py first")
        pytest.skip("no Chromium here: run `python3 scripts/fetch_chromium.py` (Debian's package, unpacked "
                    "without root; CI does) or set PYREF_CHROMIUM")
    return path


#: Appended to a copy of the page: records what the browser laid out, for --dump-dom.
MEASURE = """<script>
for (const el of document.querySelectorAll("svg, rect")) {
  const box = el.getBoundingClientRect();
  el.setAttribute("data-rendered", box.width.toFixed(2) + " " + box.height.toFixed(2));
}
document.body.setAttribute("data-measured", "yes");
</script></body>"""


def run_chromium(chromium: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1000,3000"]
    return subprocess.run([chromium, *flags, *args], capture_output=True, text=True, timeout=120)


def test_the_page_renders_in_chromium(chromium, tmp_path):
    write_skewed(tmp_path / "sp")
    out = tmp_path / "report.html"
    assert main(["report", str(tmp_path / "sp"), "-p", "128", "-o", str(out)]) == 0
    measured = tmp_path / "measured.html"
    measured.write_text(out.read_text().replace("</body>", MEASURE))
    done = run_chromium(chromium, tmp_path, "--dump-dom", measured.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    dom = Elements(done.stdout)
    assert ("body", {"data-measured": "yes"}) in dom.tags
    sp = Savepoint.open(tmp_path / "sp")
    load = KeyGroupLoad.of(sp.operator("skewed").proto)
    planned = sp.restore_plan({"skewed": 128}).operators["skewed"].planned_bytes.tolist()
    for chart, parallelism in (("load-0-p4", 4), ("load-0-p128", 128)):
        bars = dom.bars(chart)
        svg_width, svg_height = map(float, dom.by_id(chart)["data-rendered"].split())
        assert (svg_width, svg_height) == (720, 180)  # laid out at its size, not collapsed
        expected = load.at(parallelism).bytes.tolist()
        assert [int(b["data-bytes"]) for b in bars] == expected
        top = max(expected)
        for bar, value in zip(bars, expected):
            width, height = map(float, bar["data-rendered"].split())
            assert width > 0
            if "idle" in bar["class"]:  # a red mark on the axis, not an empty gap
                assert value == 0 and height == 4
            else:  # drawn to scale: 100 px for the largest
                assert height == pytest.approx(100 * value / top, abs=0.02)
    assert [int(b["data-bytes"]) for b in dom.bars("load-0-p128")] == planned
    summary = dom.by_id("load-0-p128-summary")
    assert int(summary["data-idle"]) == planned.count(0) > 0
    assert float(summary["data-skew"]) == pytest.approx(max(planned) / np.mean(planned), abs=1e-3)
    histogram = dom.bars("kg-histogram-0")
    assert sum(int(b["data-count"]) for b in histogram) == 128
    assert all(float(b["data-rendered"].split()[1]) > 0 for b in histogram if b["data-count"] != "0")
    state = next(attrs for tag, attrs in dom.tags if tag == "tr" and attrs.get("data-state") == "v")
    assert int(state["data-stored-bytes"]) == sum(planned)
    shot = tmp_path / "shot.png"
    done = run_chromium(chromium, tmp_path, f"--screenshot={shot}", out.as_uri())
    assert done.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
