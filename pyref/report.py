"""``pyref report``: one self-contained HTML page of pictures of a savepoint, for people who
look rather than read: per operator, a histogram of key-group sizes, the load of every
subtask at the current parallelism and at a chosen one (skew, idle subtasks), and the
size of every state.

The page is inline SVG and CSS: no script, no font or style sheet fetched, nothing that
needs a network. It is drawn from the manifest alone, like ``inspect``
(spec/format.md §5.9): O(manifest) work, and no chart grows past :data:`MAX_BARS` bars
(consecutive subtasks share a bar, drawn at the largest of them), so a savepoint of any
size gives a page a browser opens. Every name from the savepoint is HTML-escaped.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import numpy as np

from .inspection import describe
from .load import KeyGroupLoad, SubtaskLoad
from .reader import Savepoint

#: The most bars a chart draws; more subtasks are grouped, each bar the largest of its group.
MAX_BARS = 512
WIDTH, HEIGHT, MARGIN = 720, 180, 40

_STYLE = """
body { font: 14px sans-serif; margin: 2em; color: #222; }
h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
svg { display: block; margin: 0.5em 0 1.5em; background: #fafafa; }
.bar { fill: #4477aa; } .histogram .bar { fill: #228833; } .idle { fill: #cc3311; }
.state-bar { fill: #aa7744; } text { font-size: 11px; fill: #444; }
table { border-collapse: collapse; } td, th { padding: 2px 8px; text-align: right; }
td:first-child, th:first-child { text-align: left; }
.summary { font-weight: bold; }
"""


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _svg(chart_id: str, css_class: str, body: Sequence[str], caption: str) -> str:
    return (f'<svg id="{chart_id}" class="{css_class}" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{html.escape(caption)}">'
            f'<title>{html.escape(caption)}</title>{"".join(body)}'
            f'<line x1="{MARGIN}" y1="{HEIGHT - MARGIN}" x2="{WIDTH - 10}" y2="{HEIGHT - MARGIN}" stroke="#888"/>'
            "</svg>")


def _bars(values: np.ndarray, attributes: Sequence[str], tips: Sequence[str], idle: np.ndarray | None = None
          ) -> list[str]:
    """Vertical bars scaled to the largest value; ``idle`` bars drawn as a red mark on the axis."""
    plot_w, plot_h = WIDTH - MARGIN - 10, HEIGHT - 2 * MARGIN
    top = float(values.max()) if len(values) and values.max() > 0 else 1.0
    step = plot_w / max(len(values), 1)
    out = [f'<text x="2" y="{MARGIN - 4}">{html.escape(_bytes(top) if idle is not None else str(int(top)))}</text>']
    for i, (value, attrs, tip) in enumerate(zip(values, attributes, tips)):
        x = MARGIN + i * step
        if idle is not None and idle[i]:
            out.append(f'<rect class="bar idle" x="{x:.2f}" y="{HEIGHT - MARGIN}" width="{max(step - 1, 1):.2f}" '
                       f'height="4" {attrs}><title>{html.escape(tip)}</title></rect>')
            continue
        h = plot_h * float(value) / top
        out.append(f'<rect class="bar" x="{x:.2f}" y="{HEIGHT - MARGIN - h:.2f}" width="{max(step - 1, 1):.2f}" '
                   f'height="{h:.2f}" {attrs}><title>{html.escape(tip)}</title></rect>')
    return out


def _histogram(index: int, load: KeyGroupLoad) -> str:
    bins = load.histogram()
    counts = np.array([c for _, _, c in bins], np.int64)
    labels = [f"{_bytes(low)} - {_bytes(high)}" if low else "empty" for low, high, _ in bins]
    body = _bars(counts, [f'data-low="{low}" data-high="{high}" data-count="{c}"' for low, high, c in bins],
                 [f"{label}: {c} key groups" for label, (_, _, c) in zip(labels, bins)])
    step = (WIDTH - MARGIN - 10) / len(bins)
    body += [f'<text x="{MARGIN + i * step:.2f}" y="{HEIGHT - MARGIN + 14}">{html.escape(label.split(" - ")[0])}'
             "</text>" for i, label in enumerate(labels) if len(bins) <= 16 or i % (len(bins) // 8) == 0]
    return _svg(f"kg-histogram-{index}", "histogram", body,
                f"{load.operator_id}: key groups by stored size (of {load.max_parallelism})")


def _subtasks(index: int, load: SubtaskLoad, label: str) -> str:
    per_bar = -(-load.parallelism // MAX_BARS)  # ceil: subtasks per bar
    firsts = np.arange(0, load.parallelism, per_bar)
    lasts = np.minimum(firsts + per_bar, load.parallelism) - 1
    values = np.maximum.reduceat(load.bytes, firsts)
    idle = values == 0  # a group is idle when all its subtasks are
    attrs = [f'data-first-subtask="{f}" data-last-subtask="{la}" data-bytes="{int(v)}"'
             for f, la, v in zip(firsts, lasts, values)]
    tips = [f"subtask{'s' if la > f else ''} {f}{f'-{la}' if la > f else ''}: {_bytes(int(v))}"
            + (" (idle)" if i else "") for f, la, v, i in zip(firsts, lasts, values, idle)]
    body = _bars(values, attrs, tips, idle=idle)
    body += [f'<text x="{MARGIN}" y="{HEIGHT - MARGIN + 18}">subtask 0</text>',
             f'<text x="{WIDTH - 10}" y="{HEIGHT - MARGIN + 18}" text-anchor="end">{load.parallelism - 1}</text>']
    if idle.any():
        body.append(f'<text x="{WIDTH - 10}" y="{MARGIN - 20}" text-anchor="end">red marks: idle subtasks '
                    "(no key group with state)</text>")
    grouped = f", {per_bar} subtasks per bar (each the largest)" if per_bar > 1 else ""
    heading = (f'<p class="summary" id="load-{index}-p{load.parallelism}-summary" '
               f'data-parallelism="{load.parallelism}" data-skew="{load.skew:.3f}" data-idle="{load.idle}">'
               f"{html.escape(label)}: parallelism {load.parallelism}, largest subtask "
               f"{_bytes(int(load.bytes.max()))}, skew {load.skew:.2f}x (largest / mean), {load.idle} idle "
               f"subtask{'' if load.idle == 1 else 's'}{grouped}</p>")
    return heading + _svg(f"load-{index}-p{load.parallelism}", "load", body,
                          f"{label}: stored bytes each subtask restores at parallelism {load.parallelism}")


def _entries(state: dict[str, Any]) -> int:
    """Entries of a keyed state, timers of a timer service, elements of a list or broadcast state."""
    for field in ("entries", "timers"):
        if field in state:
            return state[field]
    return sum(state.get("elements_per_partition") or state.get("entries_per_partition") or [])


def _states(index: int, op: dict[str, Any]) -> str:
    states = [*op["states"], *({**t, "type": "timers"} for t in op["timer_services"])]
    if not states:
        return ""
    top = max(max(s["stored_bytes"] for s in states), 1)
    rows = []
    for i, s in enumerate(states):
        entries = _entries(s)
        width = 200 * s["stored_bytes"] / top
        rows.append(f'<tr class="state" data-state="{html.escape(s["name"])}" data-stored-bytes="{s["stored_bytes"]}">'
                    f'<td>{html.escape(s["name"])}</td><td>{html.escape(s["type"])}</td><td>{entries}</td>'
                    f'<td>{s["chunks"]}</td><td>{_bytes(s["stored_bytes"])}</td><td>{_bytes(s["raw_bytes"])}</td>'
                    f'<td><svg width="202" height="12"><rect class="state-bar" x="0" y="1" width="{width:.2f}" '
                    f'height="10"/></svg></td></tr>')
    return (f'<table id="states-{index}"><tr><th>state</th><th>type</th><th>entries</th><th>chunks</th>'
            f'<th>stored</th><th>raw</th><th></th></tr>{"".join(rows)}</table>')


def subtask_loads(load: KeyGroupLoad, current: int, chosen: int | None) -> list[tuple[str, SubtaskLoad]]:
    """The loads a report shows, labelled: at the current parallelism, and at ``chosen``
    (capped at the max parallelism: beyond it, the extra subtasks would hold no key group)."""
    loads = [("current", load.at(current))]
    if chosen is not None and chosen != current:
        capped = min(chosen, load.max_parallelism)
        loads.append(("chosen" if capped == chosen else f"chosen {chosen}, capped at the max parallelism",
                      load.at(capped)))
    return loads


def summary(sp: Savepoint, parallelism: int | None = None) -> list[dict[str, Any]]:
    """The numbers of the report's load charts, for ``--json``: per operator with keyed state
    or timers, each load's parallelism, largest subtask, skew and idle subtasks."""
    out = []
    for op in sp.manifest.operators:
        if op.keyed_states or op.timer_services:
            loads = subtask_loads(KeyGroupLoad.of(op), op.parallelism, parallelism)
            out.append({"operator_id": op.operator_id, "max_parallelism": op.max_parallelism, "loads": [
                {"label": label, "parallelism": at.parallelism, "largest_bytes": int(at.bytes.max()),
                 "skew": round(at.skew, 3), "idle_subtasks": at.idle} for label, at in loads]})
    return out


def render_report(sp: Savepoint, parallelism: int | None = None) -> str:
    """The HTML page for ``sp``; ``parallelism`` adds each keyed operator's load at that
    parallelism beside its current one."""
    info = describe(sp).to_dict()
    parts = [f"<h1>Savepoint {html.escape(info['location'])}</h1>",
             f"<p>id {html.escape(info['savepoint_id'])}, format {html.escape(info['format_version'])}, "
             f"{len(info['operators'])} operators, {_bytes(info['data_bytes'])} of its own data"
             f"{', ' + str(len(info['bases'])) + ' bases' if info['bases'] else ''}</p>"]
    parts += [f'<p class="warning">warning: {html.escape(w)}</p>' for w in info["warnings"]]
    for index, (op, described) in enumerate(zip(sp.manifest.operators, info["operators"])):
        title = op.operator_id + (f" ({op.name})" if op.name else "")
        parts.append(f'<h2 id="operator-{index}">{html.escape(title)}</h2>'
                     f"<p>parallelism {op.parallelism}, max parallelism {op.max_parallelism}</p>")
        if op.keyed_states or op.timer_services:
            load = KeyGroupLoad.of(op)
            parts.append(_histogram(index, load))
            parts += [_subtasks(index, at, label) for label, at in subtask_loads(load, op.parallelism, parallelism)]
        parts.append(_states(index, described))
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>pyref report: {html.escape(info['location'])}</title><style>{_STYLE}</style></head>"
            f"<body>{''.join(parts)}</body></html>\n")
