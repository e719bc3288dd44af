"""Importing a Flink savepoint as a pyref savepoint, without a JVM.

::

    from pyref.flink import import_flink
    report = import_flink("/flink/savepoint-3f2a1c", "/savepoints/imported",
                          uids=["kafka-source", "url-counter"],
                          ttl={"url-counter/last-seen": TtlConfig(86_400_000)})

Every operator becomes a pyref operator named by its uid (stored by Flink, or
given in ``uids``), else by its hex operator id, with ``uid`` and
``engine_operator_id`` recorded; list and union state, broadcast state,
keyed state of every kind with its namespaces (windows) and TTL timestamps,
timers and coordinator state are written through the core
:class:`~pyref.writer.SavepointWriter`, whose atomic commit applies: a failed
import leaves the target as it was. Key groups are Flink's, taken from the
savepoint: hashed key groups where pyref's key hash is Java's for the key type
(each row's is checked), writer-assigned ones otherwise (spec/format.md §7.12).

Keyed state is read one run of whole key groups at a time (``batch_bytes`` of
stored bytes, within one subtask), each state's columns transcoded whole
(:mod:`pyref.flink.from_flink`), so memory holds one run, not the savepoint.
The savepoint is labelled with the oldest format version that holds what it
uses (spec/format.md §9.4).

Where the data asks for another type than the serializer snapshots say (a null
String, text UTF-8 cannot hold, a POJO subclass), the import goes on with the
other states, then starts over with every such place planned nullable or
opaque (at most twice per place: nullable, then opaque).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from .._proto.savepoint.v1 import manifest_pb2 as pb
from ..errors import CorruptSavepointError, InvalidArgumentError, UnsupportedFormatError
from ..descriptions import serializer_label
from ..key_groups import compute_key_groups
from ..reader import Savepoint
from ..serializers import Nullable, Serializer
from ..storage import open_io, refuse_non_directory_target
from ..serializers.base import fixed_width_binary
from ..ttl import TtlConfig
from ..writer import OperatorWriter, SavepointWriter
from .from_flink import Demotion, Mapped
from .import_plan import BroadcastPlan, KeyedPlan, ListPlan, OperatorPlan, Place, TimerPlan, plan_import
from .keyed import KeyedSubtask
from .row_keys import row_key_groups
from .savepoint import METADATA, FlinkSavepoint, _prefix_bytes, timer_types
from .spans import Spans, constant, join, reversed_fixed, u32_le
from .state_views import FlinkKeyedStateView, FlinkTimerView

__all__ = ["import_flink", "check_import_target", "ImportReport", "OperatorColumns", "OperatorImport", "Replan", "DEFAULT_BATCH_BYTES"]

#: Stored bytes of keyed state read and transcoded at once (whole key groups).
DEFAULT_BATCH_BYTES = 64 << 20


class Replan(Exception):
    """The data asked for another type at ``place``: plan it ``kind`` and start over."""

    def __init__(self, place: Place, kind: str, detail: str) -> None:
        super().__init__(f"{place}: {detail}")
        self.place = place
        self.kind = kind
        self.detail = detail

    def __reduce__(self):  # Spark tasks send them to the driver
        return Replan, (self.place, self.kind, self.detail)


@contextlib.contextmanager
def _at(place: Place) -> Iterator[None]:
    try:
        yield
    except Demotion as d:
        raise Replan(place, d.kind, d.detail) from None


def add_demotion(demotions: dict[Place, str], replan: Replan) -> None:
    """Record what ``replan`` asks for; asking again for what a place already is would be
    a bug, and an endless import: it is an error instead."""
    if demotions.get(replan.place) in (replan.kind, "opaque"):
        raise AssertionError(f"{replan.place} was already planned {demotions[replan.place]}: {replan.detail}")
    demotions[replan.place] = replan.kind


def map_value_serializer(plan: KeyedPlan) -> Serializer:
    """A MAP state holding nulls stores its values nullable (Flink flags them itself)."""
    if plan.map_nulls and not plan.value.nullable:
        return Nullable(plan.value.serializer)
    return plan.value.serializer


def _ttl_cells(mapped: Mapped, cells: Spans, where: str) -> pa.BinaryArray:
    """TTL cells: Flink's big-endian timestamp then the value; pyref's little-endian
    timestamp then the value's encoding (spec/format.md §7.8)."""
    short = np.flatnonzero(cells.lengths < 8)
    if short.size:
        raise CorruptSavepointError(f"a TTL cell of {int(cells.lengths[short[0]])} bytes has no timestamp", state=where)
    stamps = reversed_fixed(cells, (8,))
    values = mapped.column(cells.cut(8), where)
    return join(constant(stamps, len(cells), 8), Spans.of(values))


class OperatorColumns:
    """One operator's Flink state as pyref's encoded columns (:mod:`pyref.flink.from_flink`):
    a subtask's list and broadcast states, or a run of key groups of its keyed state."""

    def __init__(self, plan: OperatorPlan) -> None:
        self.plan = plan
        self._prefix = _prefix_bytes(plan.flink.max_parallelism)

    def _label(self, name: str) -> str:
        return f"{self.plan.operator_id}/{name}"

    def _column(self, mapped: Mapped, cells: pa.Array, state: str, role: str) -> pa.BinaryArray:
        with _at(Place(self.plan.operator_id, state, role)):
            return mapped.column(Spans.of(cells), self._label(state))

    def list_elements(self, p: ListPlan, elements: pa.BinaryArray) -> pa.BinaryArray:
        return self._column(p.element, elements, p.name, "element")

    def broadcast_entries(self, p: BroadcastPlan, keys: pa.BinaryArray, values: pa.BinaryArray
                          ) -> tuple[pa.BinaryArray, pa.BinaryArray]:
        return (self._column(p.key, keys, p.name, "broadcast_key"),
                self._column(p.value, values, p.name, "broadcast_value"))

    def keyed_view(self, p: KeyedPlan, batch: KeyedSubtask) -> FlinkKeyedStateView | None:
        """Flink's rows of a keyed state in a run of key groups; None when it holds none."""
        found = batch.states.get(p.name)
        if found is None or not len(found[1].keys):
            return None
        return FlinkKeyedStateView(p.name, p.flink_kind, batch.key_type, p.namespace_type, p.stored_type, found[1],
                                   self._prefix, self.plan.flink.max_parallelism)

    def timer_view(self, p: TimerPlan, batch: KeyedSubtask) -> FlinkTimerView | None:
        """Flink's timers of a service in a run of key groups; None when it holds none."""
        found = batch.states.get(p.queue)
        if found is None or not len(found[1].keys):
            return None
        # Planned from one subtask's meta info; this run's subtask may say otherwise.
        return FlinkTimerView(p.service, p.flink_domain, *timer_types(found[0]), found[1],
                              self._prefix, self.plan.flink.max_parallelism)

    def keyed(self, p: KeyedPlan, batch: KeyedSubtask) -> tuple[list[pa.BinaryArray], np.ndarray] | None:
        """A keyed state's columns in a run of key groups (key, [namespace], [user key],
        value) and each row's key group; None when the run holds none of its rows."""
        view = self.keyed_view(p, batch)
        if view is None:
            return None
        table = view.to_arrow(raw=True)
        key_groups = table.column("key_group").to_numpy()
        columns = [self._keys(table.column("key").combine_chunks(), key_groups, p.name)]
        if p.namespace is not None:
            columns.append(self._column(p.namespace, table.column("namespace").combine_chunks(), p.name, "namespace"))
        if p.user_key is not None:
            columns.append(self._column(p.user_key, table.column("user_key").combine_chunks(), p.name, "user_key"))
        with _at(Place(self.plan.operator_id, p.name, "value")):
            columns.append(self._values(p, view, table))
        return columns, key_groups

    def timers(self, p: TimerPlan, batch: KeyedSubtask) -> tuple[list[pa.BinaryArray], np.ndarray] | None:
        """A timer service's columns in a run of key groups (key, [namespace], timestamp)."""
        view = self.timer_view(p, batch)
        if view is None:
            return None
        table = view.to_arrow(raw=True)
        key_groups = table.column("key_group").to_numpy()
        columns = [self._keys(table.column("key").combine_chunks(), key_groups, p.queue)]
        if p.namespace is not None:
            columns.append(self._column(p.namespace, table.column("namespace").combine_chunks(), p.queue, "namespace"))
        stamps = table.column("timestamp").to_numpy().astype("<i8")
        columns.append(fixed_width_binary(stamps.view(np.uint8), len(stamps), 8))
        return columns, key_groups

    def _keys(self, keys: pa.BinaryArray, key_groups: np.ndarray, state: str) -> pa.BinaryArray:
        """The keys as pyref encodes them; with hashed key groups, or Flink SQL keys (writer-assigned
        but hashed by their bytes), each one's key group recomputed and compared with the one Flink
        stored it under."""
        label, max_parallelism = self._label(state), self.plan.flink.max_parallelism
        shown, expected = keys, None
        if self.plan.row_keys:  # Flink's bytes, checked before any transcoding
            expected = row_key_groups(keys, max_parallelism, label)
        encoded = self._column(self.plan.keys(), keys, "", "key")
        if self.plan.hash_type is not None:
            shown = self.plan.keys().serializer.decode_array(encoded)
            expected = compute_key_groups(shown, max_parallelism, self.plan.hash_type)
        if expected is not None:
            bad = np.flatnonzero(expected != key_groups)
            if bad.size:
                i = int(bad[0])
                raise CorruptSavepointError(
                    f"key {shown[i].as_py()!r} is stored in key group {int(key_groups[i])} but hashes to "
                    f"{int(expected[i])} ({bad.size} rows differ)", state=label)
        return encoded

    def _cells(self, p: KeyedPlan, cells: Spans, where: str) -> pa.BinaryArray:
        return _ttl_cells(p.value, cells, where) if p.ttl_cells else p.value.column(cells, where)

    def _values(self, p: KeyedPlan, view: FlinkKeyedStateView, table: pa.Table) -> pa.BinaryArray:
        where = self._label(p.name)
        if p.kind == "list":
            return self._lists(p, view, where)
        cells = Spans.of(table.column("value").combine_chunks())
        if p.kind != "map":
            return self._cells(p, cells, where)
        nulls = table.column("value_is_null").to_numpy(zero_copy_only=False)
        if not nulls.any():
            encoded = self._cells(p, cells, where)
            return encoded if not p.map_nulls or p.value.nullable else join(constant(b"\x01", len(cells), 1),
                                                                            Spans.of(encoded))
        if p.ttl_cells:
            raise UnsupportedFormatError("a MAP state under TTL stores a null value without its timestamp", state=where)
        if not p.map_nulls and not p.value.nullable:
            raise Replan(Place(self.plan.operator_id, p.name, "map_null"), "nullable", "a null MAP value")
        present = np.flatnonzero(~nulls)
        encoded = Spans.of(p.value.column(cells.take(present), where))
        if not p.value.nullable:
            encoded = Spans.of(join(constant(b"\x01", len(present), 1), encoded))
        full = Spans(np.zeros(1, np.uint8), np.zeros(len(nulls), np.int64), np.ones(len(nulls), np.int64))  # 0x00
        placed = Spans(encoded.buffer, np.zeros(len(nulls), np.int64), np.zeros(len(nulls), np.int64))
        placed.starts[present] = encoded.starts
        placed.lengths[present] = encoded.lengths
        return full.where(~nulls, placed).column()

    def _lists(self, p: KeyedPlan, view: FlinkKeyedStateView, where: str) -> pa.BinaryArray:
        """Flink's elements joined by ``,`` as pyref's list: u32 count, framed elements."""
        rows, elements = view.list_elements()
        encoded = self._cells(p, Spans.of(elements), where)
        if p.value.width is None:  # a TTL cell of a fixed-width value is fixed-width too (8 + w)
            framed = Spans.of(join(u32_le(_lengths(encoded)), Spans.of(encoded)))
        else:
            framed = Spans.of(encoded)
        n = len(view)
        counts = np.bincount(rows, minlength=n)
        first = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=first[1:])
        ends = np.append(framed.starts, framed.starts[-1] + framed.lengths[-1] if len(framed) else 0)
        starts = ends[first[:-1]]
        bodies = Spans(framed.buffer, starts, ends[first[1:]] - starts)
        return join(u32_le(counts), bodies)


class OperatorImport:
    """Writes one operator's state through ``writer``, a subtask's handle at a time."""

    def __init__(self, writer: SavepointWriter, plan: OperatorPlan) -> None:
        self.plan = plan
        self.columns = OperatorColumns(plan)
        flink = plan.flink
        self.writer: OperatorWriter = writer.add_operator(
            plan.operator_id, flink.parallelism, max_parallelism=flink.max_parallelism,
            key_serializer=plan.keys().serializer if plan.has_keyed else None, name=flink.flink_name or "",
            uid=plan.uid, engine_operator_id=plan.engine_operator_id, key_groups=plan.key_groups)
        self.lists = {p.name: self.writer.list_state(p.name, p.element.serializer, p.mode) for p in plan.lists}
        self.broadcasts = {p.name: self.writer.broadcast_state(p.name, p.key.serializer, p.value.serializer)
                           for p in plan.broadcasts}
        self.keyed = {p.name: self.writer.keyed_state(
            p.name, map_value_serializer(p), kind=p.kind,
            user_key_serializer=p.user_key.serializer if p.user_key is not None else None,
            namespace_serializer=p.namespace.serializer if p.namespace is not None else None, ttl=p.ttl)
            for p in plan.keyed}
        self.timers = {p.queue: self.writer.timer_service(p.service, p.domain, p.namespace.serializer
                                                          if p.namespace is not None else None)
                       for p in plan.timers}
        self.writer.coordinator_state = flink.coordinator_state
        #: Rows written per state (list elements, broadcast entries, keyed entries, timers).
        self.rows: Counter[str] = Counter()
        #: Places the data asked to plan again. A state with one is not written further (the
        #: import starts over), but the others go on, so one pass finds the places of them all.
        self.replans: dict[Place, Replan] = {}
        self._stopped: set[str] = set()  # "" when the operator's keys asked: every keyed part stops

    def _guarded(self, name: str, keyed: bool,
                 transcode: Callable[[], tuple[Any, ...] | None]) -> tuple[Any, ...] | None:
        """``transcode()``, or None when the state stopped or asks to be planned again."""
        if name in self._stopped or keyed and "" in self._stopped:
            return None
        try:
            return transcode()
        except Replan as replan:
            self.replans.setdefault(replan.place, replan)
            self._stopped.add(replan.place.state if replan.place.state == "" else name)
            return None

    def operator_subtask(self, subtask: int) -> None:
        """The list, union and broadcast states subtask ``subtask`` wrote."""
        stream = self.plan.flink.operator_stream(subtask)
        if stream is None:
            return
        for p in self.plan.lists:
            elements = stream.elements.get(p.name)
            if elements is not None and len(elements):
                found = self._guarded(p.name, False, lambda: (self.columns.list_elements(p, elements),))
                if found is not None:
                    self.lists[p.name].add_encoded(subtask, *found)
                    self.rows[p.name] += len(elements)
        for b in self.plan.broadcasts:
            entries = stream.broadcast.get(b.name)
            if entries is not None and len(entries[0]):
                found = self._guarded(b.name, False, lambda: self.columns.broadcast_entries(b, *entries))
                if found is not None:
                    self.broadcasts[b.name].add_encoded(subtask, *found)
                    self.rows[b.name] += len(entries[0])

    def keyed_batch(self, batch: KeyedSubtask) -> None:
        """Every keyed state and timer service's rows of a run of key groups."""
        for p in self.plan.keyed:
            found = self._guarded(p.name, True, lambda: self.columns.keyed(p, batch))
            if found is not None:
                self.keyed[p.name].add_encoded(*found)
                self.rows[p.name] += len(found[1])
        for t in self.plan.timers:
            found = self._guarded(t.queue, True, lambda: self.columns.timers(t, batch))
            if found is not None:
                self.timers[t.queue].add_encoded(*found)
                self.rows[t.queue] += len(found[1])


def _lengths(column: pa.BinaryArray) -> np.ndarray:
    return Spans.of(column).lengths


@dataclass
class ImportReport:
    """What an import wrote."""

    source: str
    target: str
    savepoint_id: str
    format_version: str
    operators: list[dict[Any, Any]]
    demotions: list[str] = field(default_factory=list)
    attempts: int = 1
    seconds: float = 0.0
    new_data_bytes: int = 0

    @property
    def rows(self) -> int:
        return sum(s["rows"] for op in self.operators for s in op["states"])

    def to_dict(self) -> dict[Any, Any]:
        return {"source": self.source, "target": self.target, "savepoint_id": self.savepoint_id,
                "format_version": self.format_version, "rows": self.rows, "new_data_bytes": self.new_data_bytes,
                "seconds": round(self.seconds, 3), "attempts": self.attempts, "demotions": self.demotions,
                "operators": self.operators}


def operator_summary(imp: OperatorImport) -> dict[Any, Any]:
    """One operator of an :class:`ImportReport`."""
    plan, rows = imp.plan, imp.rows
    states = [{"name": p.name, "type": "list", "kind": p.mode.name, "rows": rows[p.name],
               "serializer": serializer_label(p.element.serializer.snapshot())} for p in plan.lists]
    states += [{"name": p.name, "type": "broadcast", "kind": "BROADCAST", "rows": rows[p.name],
                "serializer": serializer_label(p.value.serializer.snapshot()),
                "key_serializer": serializer_label(p.key.serializer.snapshot())} for p in plan.broadcasts]
    states += [{"name": p.name, "type": "keyed", "kind": p.kind, "rows": rows[p.name],
                "serializer": serializer_label(map_value_serializer(p).snapshot()),
                "namespace_serializer": serializer_label(p.namespace.serializer.snapshot()) if p.namespace else None,
                "ttl": vars(p.ttl) if p.ttl is not None else None} for p in plan.keyed]
    states += [{"name": p.service, "type": "timers", "kind": p.domain, "rows": rows[p.queue],
                "namespace_serializer": serializer_label(p.namespace.serializer.snapshot()) if p.namespace else None}
               for p in plan.timers]
    return {"operator_id": plan.operator_id, "flink_operator_id": plan.flink.operator_id, "uid": plan.uid,
            "name": plan.flink.flink_name, "parallelism": plan.flink.parallelism,
            "max_parallelism": plan.flink.max_parallelism, "key_groups": plan.key_groups if plan.has_keyed else None,
            "key_serializer": serializer_label(plan.keys().serializer.snapshot()) if plan.has_keyed else None,
            "coordinator_state_bytes": len(plan.flink.coordinator_state or b"") or None,
            "states": states, "skipped": plan.skipped, "in_flight_data_dropped": plan.in_flight_dropped}


def write_operator(writer: SavepointWriter, plan: OperatorPlan, batch_bytes: int | None) -> OperatorImport:
    """Every state of one operator, one subtask's handle (and one run of its keyed state) at a time."""
    imp = OperatorImport(writer, plan)
    for sub in plan.flink.state.subtasks:
        imp.operator_subtask(sub.index)
    if plan.has_keyed:
        for batch in plan.flink.keyed_subtasks(batch_bytes):
            imp.keyed_batch(batch)
    return imp


def check_import_target(target: str | os.PathLike[str]) -> None:
    """Refuse a target holding a Flink savepoint (its own source, say): a pyref manifest beside
    Flink's ``_metadata`` would make inspect and verify see only the pyref savepoint there."""
    io = open_io(os.fspath(target))
    refuse_non_directory_target(io, "import target")
    if io.stat(METADATA) is not None:
        raise InvalidArgumentError("the import target holds a Flink savepoint (_metadata); import into another "
                                   "directory", path=io.location)


def import_flink(source: str | os.PathLike[str], target: str | os.PathLike[str], *,
                 uids: Iterable[str] | Mapping[str, str] | None = None, ttl: Mapping[str, TtlConfig] | None = None,
                 ttl_default: TtlConfig | None = None, skip_states: Iterable[str] = (), overwrite: bool = False,
                 batch_bytes: int = DEFAULT_BATCH_BYTES, allow_external_files: bool = False,
                 drop_in_flight_data: bool = False, **writer_options) -> ImportReport:
    """Import the Flink savepoint at ``source`` as a pyref savepoint at ``target``.

    ``uids`` names operators whose uid Flink did not store (the job's uids, or a
    mapping from uid or hex operator id to a name); ``ttl`` gives the TTL
    configuration of states under TTL by ``"operator/state"`` (operator by pyref
    id, uid or hex id), ``ttl_default`` that of the others; ``skip_states``
    leaves states out (``"operator/state"``). ``drop_in_flight_data`` imports an unaligned
    checkpoint without the records it kept in flight, refused otherwise (the report's
    ``in_flight_data_dropped`` says, per operator, what was dropped). ``writer_options`` go to
    :class:`~pyref.writer.SavepointWriter` (codec, chunk_bytes...).
    """
    started = time.monotonic()
    check_import_target(target)
    demotions: dict[Place, str] = {}
    skip_states = list(skip_states)
    with FlinkSavepoint.open(source, uids=uids, allow_external_files=allow_external_files) as sp:
        # Every pass plans at least one more place (of finitely many) again, or commits.
        for attempt in itertools.count(1):
            plans = plan_import(sp, ttl=ttl, ttl_default=ttl_default, skip_states=skip_states, demotions=demotions,
                                drop_in_flight_data=drop_in_flight_data)
            writer = SavepointWriter(os.fspath(target), overwrite=overwrite, **writer_options)
            try:
                imports = [write_operator(writer, plan, batch_bytes) for plan in plans]
            except BaseException:
                writer.abort()
                raise
            replans = [r for imp in imports for r in imp.replans.values()]
            if replans:
                writer.abort()
                for replan in replans:
                    add_demotion(demotions, replan)
                continue
            manifest = writer.commit().manifest
            return build_report(sp, target, manifest, imports, demotions, attempt, time.monotonic() - started)
    raise AssertionError("itertools.count() ended")


def build_report(sp: FlinkSavepoint, target, manifest: pb.Manifest, imports: list[OperatorImport],
            demotions: Mapping[Place, str], attempts: int, seconds: float) -> ImportReport:
    version = str(Savepoint.open(os.fspath(target)).version)
    return ImportReport(sp.location, os.fspath(target), manifest.savepoint_id, version,
                        [operator_summary(i) for i in imports], [f"{p} -> {k}" for p, k in demotions.items()],
                        attempts, seconds, sum(f.size for f in manifest.data_files if f.base == 0))
