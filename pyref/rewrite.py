"""New savepoints derived from existing ones: rescale and serializer migration.

By default a derived savepoint is *shallow*: it lists the source as a base and
refers to the source's data files, so no state bytes are copied
(spec/format.md §8). The source must then stay where it is: deleting or
replacing it breaks the derived savepoint, which readers detect and report. With
``copy=True`` the derived savepoint is self-contained: every chunk it uses is
copied byte for byte (no decoding) into its own data files.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Mapping

import pyarrow as pa

from . import __version__
from ._proto.savepoint.v1 import manifest_pb2 as pb
from .chunk import encode_chunk
from .derived import register_derived
from .descriptions import serializer_label
from .errors import IncompatibleSerializerError, InvalidArgumentError, unknown_names
from .io import SavepointIO, is_directory_name, is_safe_relative_path, open_io
from .manifest import KNOWN_OPTIONAL_FEATURES, LIST_COLUMNS, keyed_column_count, selected_rows, state_label
from .reader import ChunkStore, Savepoint
from .restore import plan_list_state, resolve_parallelism
from .serializers import (
    Compatibility,
    CompatibilityResult,
    ListOf,
    Serializer,
    migrate_array,
    resolve_compatibility,
    serializer_from_snapshot,
)
from .ttl import migrate_ttl_cells
from .writer import ChunkSink, delete_replaced, publish, read_previous


class Derivation:
    """The target manifest under construction, and where each of its chunks lives."""

    def __init__(self, source: Savepoint, target: SavepointIO, copy: bool) -> None:
        self.source = source
        self.copy = copy
        self.sink = ChunkSink(target)
        self.manifest = pb.Manifest(savepoint_id=str(uuid.uuid4()), created_by=f"pyref {__version__}",
                                    created_at_ms=int(time.time() * 1000))
        # Carry over only the optional features this library maintains (spec/format.md §9.2).
        self.manifest.optional_features.extend(f for f in source.manifest.optional_features
                                               if f in KNOWN_OPTIONAL_FEATURES)
        if not copy:
            self._refer_to_source(target)
        # The target's own files follow the referenced ones.
        self._own_offset = len(self.manifest.data_files)

    def _refer_to_source(self, target: SavepointIO) -> None:
        """List the source (and the source's own bases, flattened) as bases, each by name
        where it is the target's sibling and by its path in the store otherwise
        (spec/format.md §8.3); keep file indexes."""
        source = self.source
        referenced = [(source.io, source.savepoint_id)]
        referenced += [(source.store.base_io(k), b.savepoint_id) for k, b in enumerate(source.manifest.bases, 1)]
        # Before anything is written: each base learns that the target will use it (§8.3 step 8).
        register_derived(target, [io for io, _ in referenced])
        for io, savepoint_id in referenced:
            base = self.manifest.bases.add(directory=io.name, savepoint_id=savepoint_id)
            if io.parent_key() != target.parent_key():
                base.path = io.store_path()
        # "external-bases" and, for bases named by path, "base-paths" are declared at the commit (M9).
        # bases = [source] + source's bases: the source's own files are base 1, its base k's are k + 1.
        for f in source.manifest.data_files:
            self.manifest.data_files.append(pb.DataFile(path=f.path, size=f.size, base=f.base + 1))

    def own(self, chunk: pb.Chunk) -> pb.Chunk:
        """A completed chunk of the sink, with its file index counted past the referenced files."""
        if chunk.WhichOneof("location") == "range":
            chunk.range.file += self._own_offset
        return chunk

    def place(self, chunk: pb.Chunk, label: str) -> pb.Chunk:
        """The source's chunk as the target refers to it: same file (shallow) or a byte copy."""
        if self.copy and chunk.WhichOneof("location") == "range":
            return self.own(self.sink.put_stored(chunk, self.source.store.read_stored(chunk, label)))
        placed = pb.Chunk()
        placed.CopyFrom(chunk)
        return placed

    def publish(self, target: SavepointIO, operators: list[pb.Operator], previous: bytes | None, *,
                force: bool = False) -> pb.Manifest:
        try:
            self.manifest.data_files.extend(self.sink.close())
        except BaseException:
            self.sink.abort()
            raise
        self.manifest.operators.extend(operators)
        # Fields from a newer writer may carry invariants this library cannot keep.
        self.manifest.DiscardUnknownFields()
        publish(target, self.manifest, previous, self.sink.abort, force=force)
        return self.manifest


def derive(source: str | os.PathLike[str], target: str | os.PathLike[str], *, copy: bool, overwrite: bool,
           base_paths: bool, build: Callable[[Savepoint, Derivation], list[pb.Operator]],
           force: bool = False) -> Savepoint:
    """The savepoint at ``target`` whose operators ``build`` makes from ``source``'s, placing chunks
    through the :class:`Derivation` (copied, or referenced in the source as a base), committed
    atomically; on any failure the target keeps what it held."""
    src = Savepoint.open(source)
    target_io = open_io(target)
    check_target(src, target_io, copy, base_paths)
    previous = read_previous(target_io, overwrite, force=force)
    derivation = Derivation(src, target_io, copy)
    try:
        operators = build(src, derivation)
    except BaseException:
        derivation.sink.abort()
        raise
    manifest = derivation.publish(target_io, operators, previous, force=force)
    delete_replaced(target_io, manifest, previous)
    return Savepoint.written(target_io, manifest)


def check_target(source: Savepoint, target: SavepointIO, copy: bool, base_paths: bool = False) -> None:
    """Refuse a target a savepoint derived from ``source`` cannot be written to, before
    anything is written (spec/format.md §8.3). Savepoints are compared by their resolved
    locations, so a link to the source or to one of its bases is that savepoint. A
    shallow target is the source's sibling, or with ``base_paths`` anywhere in the
    source's store (format 1.2: it names its bases by their paths there)."""
    if target.location == source.location:
        raise InvalidArgumentError("target must differ from the source savepoint", path=target.location)
    if copy:
        return
    if not is_directory_name(source.io.name):
        raise InvalidArgumentError(
            f"the source's directory name {source.io.name!r} cannot name a base (one path segment without ':', "
            "'\\' or NUL, spec/format.md §8.1); pass copy=True (pyref rescale --copy) or rename the source",
            path=source.location)
    if target.parent_key() != source.io.parent_key() and not base_paths:
        raise InvalidArgumentError(
            "a shallow savepoint must be a sibling of its source (same parent directory, links resolved), because "
            "it names the source by directory name; put the target beside the source, pass copy=True, or pass "
            "base_paths=True (--base-paths) to name it by its path in the store (format 1.2 readers)",
            path=target.location)
    if target.store_key() != source.io.store_key():
        raise InvalidArgumentError(
            "a shallow savepoint must be in the same store (bucket, container, filesystem) as its source, because it "
            "names the source by its path there; pass copy=True", path=target.location)
    # The derived savepoint refers to every base of the source: they must all still be the
    # savepoints the source refers to (present, same ids), or the result is unreadable.
    bases = [source.store.base_io(k) for k in range(1, len(source.manifest.bases) + 1)]
    if target.location in {b.location for b in bases}:
        # Replacing a savepoint this one reads from would delete the data it refers to.
        raise InvalidArgumentError("target is a base of the source; a shallow savepoint cannot replace its own base",
                                   path=target.location)
    for io in [source.io, *bases]:
        if io.parent_key() != target.parent_key() and not is_safe_relative_path(io.store_path()):
            raise InvalidArgumentError(
                f"{io.location} is not the target's sibling and its path {io.store_path()!r} cannot name a base (a "
                "safe relative path, spec/format.md §6.2); put the target beside it or pass copy=True",
                path=target.location)


def copy_states(op: pb.Operator, derivation: Derivation, skip: str | None = None) -> pb.Operator:
    """The operator with every chunk placed in the target (keyed, list and, format 1.2,
    timer, broadcast and coordinator chunks), except those of state ``skip`` (which the
    caller rewrites: copying them first would only leave dead bytes) and list and broadcast
    chunks no range refers to (no state, never read: spec/format.md §5.3)."""
    new = referenced_chunks_only(op)
    for state in [*new.list_states, *new.keyed_states, *new.broadcast_states, *new.timer_services]:
        label = state_label(op, state.name)
        placed = [] if state.name == skip and not isinstance(state, pb.TimerService) else [
            derivation.place(c, label) for c in state.chunks]
        del state.chunks[:]
        state.chunks.extend(placed)
    if new.HasField("coordinator_state"):
        new.coordinator_state.CopyFrom(derivation.place(op.coordinator_state, f"{op.operator_id} (coordinator state)"))
    return new


def referenced_chunks_only(op: pb.Operator) -> pb.Operator:
    """A copy of the operator without the list and broadcast chunks no range refers to: they
    are no state and never read (spec/format.md §5.3), so a copy must not read them either."""
    new = pb.Operator()
    new.CopyFrom(op)
    for state in [*new.list_states, *new.broadcast_states]:
        _compact_list_state(state)
    return new


def _compact_list_state(state: pb.ListState | pb.BroadcastState) -> None:
    """Drop chunks no partition refers to (e.g. broadcast copies of removed subtasks)."""
    used = sorted({r.chunk for p in state.partitions for r in p.ranges})
    remap = {old: new for new, old in enumerate(used)}
    chunks = [state.chunks[i] for i in used]
    del state.chunks[:]
    state.chunks.extend(chunks)
    for p in state.partitions:
        for r in p.ranges:
            r.chunk = remap[r.chunk]


def rescaled_operator(op: pb.Operator, parallelism: int) -> pb.Operator:
    """The operator as if its state had been restored at ``parallelism`` and snapshotted
    again unchanged: keyed and timer chunks stay, SPLIT/BROADCAST partitions and broadcast
    state partitions are re-cut by reference, UNION partitions stay as written (union
    state is stored once), coordinator state stays (spec/format.md §8.3)."""
    new = pb.Operator()
    new.CopyFrom(op)
    new.parallelism = parallelism
    plan = plan_list_state(op, parallelism)
    for state in [*new.list_states, *new.broadcast_states]:
        if not isinstance(state, pb.ListState) or state.mode != pb.UNION:
            del state.partitions[:]
            state.partitions.extend(pb.Partition(ranges=ranges) for ranges in plan[state.name])
            _compact_list_state(state)
    return new


def rescale(source: str | os.PathLike[str], target: str | os.PathLike[str], parallelism: int | Mapping[str, int], *,
            copy: bool = False, overwrite: bool = False, base_paths: bool = False, force: bool = False) -> Savepoint:
    """Write the savepoint ``source`` restored at a new parallelism to ``target``; returns it, open.

    ``parallelism`` is one number for every operator (a non-parallel one, of max parallelism 1,
    stays at 1) or a map from operator id (unlisted operators keep theirs). Shallow by default: no state bytes are
    written, the target refers to the source's data files, so it is the source's
    sibling or, with ``base_paths``, anywhere in its store (format 1.2). ``force``
    replaces a target that other shallow savepoints use as a base (breaking them).
    """

    def build(src: Savepoint, derivation: Derivation) -> list[pb.Operator]:
        wanted = resolve_parallelism(list(src.manifest.operators), parallelism)
        return [copy_states(rescaled_operator(op, wanted[op.operator_id]), derivation) for op in src.manifest.operators]

    return derive(source, target, copy=copy, overwrite=overwrite, base_paths=base_paths, build=build, force=force)


def flatten(source: str | os.PathLike[str], target: str | os.PathLike[str], *, overwrite: bool = False,
            force: bool = False) -> Savepoint:
    """Write a self-contained copy of ``source`` to ``target``, anywhere: every chunk it
    reads, from its own files or its bases', copied byte for byte (no decoding), nothing
    else changed; returns it, open. The copy outlives the bases (spec/format.md §8.4)."""

    def build(src: Savepoint, derivation: Derivation) -> list[pb.Operator]:
        return [copy_states(op, derivation) for op in src.manifest.operators]

    return derive(source, target, copy=True, overwrite=overwrite, base_paths=False, build=build, force=force)


def migrate_state(source: str | os.PathLike[str], target: str | os.PathLike[str], operator_id: str, state: str,
                  serializer: Serializer, *, copy: bool = False, overwrite: bool = False,
                  base_paths: bool = False, force: bool = False) -> Savepoint:
    """Write ``source`` to ``target`` with one state's values (list elements, or keyed
    values) under a new serializer: schema evolution. Returns the new savepoint, open.

    The new serializer is resolved against the stored snapshot: as is and
    reconfigured only update the snapshot; after migration the state's chunks are
    decoded with the old serializer and re-encoded with the new one; incompatible
    raises :class:`IncompatibleSerializerError` naming the state and both serializers.
    """

    def build(src: Savepoint, derivation: Derivation) -> list[pb.Operator]:
        operators = []
        found = False
        for op in src.manifest.operators:
            new = copy_states(op, derivation) if op.operator_id != operator_id else _migrate(op, derivation)
            found = found or op.operator_id == operator_id
            operators.append(new)
        if not found:
            raise unknown_names("operators", [operator_id], [op.operator_id for op in src.manifest.operators])
        return operators

    def _migrate(op: pb.Operator, derivation: Derivation) -> pb.Operator:
        label = state_label(op, state)
        source_state = next((s for s in [*op.list_states, *op.keyed_states] if s.name == state), None)
        if source_state is None:
            raise unknown_names("states", [state], [s.name for s in [*op.list_states, *op.keyed_states]], state=label)
        result, stored = resolve_migration(source_state, serializer, label)
        new = copy_states(op, derivation, skip=state if stored is not None else None)
        target_state = next(s for s in [*new.list_states, *new.keyed_states] if s.name == state)
        if stored is not None:
            store, sink = derivation.source.store, derivation.sink
            if isinstance(source_state, pb.ListState):  # the chunks ranges refer to, as copy_states keeps (§5.3)
                migrated = [migrate_chunk(store, source_state, label, source_state.chunks[i], stored, sink, rows)
                            for i, rows in selected_rows(source_state).items()]
            else:
                migrated = [migrate_chunk(store, source_state, label, chunk, stored, sink)
                            for chunk in source_state.chunks]
            sink.flush()  # chunks are complete only now; the manifest copies them
            target_state.chunks.extend(derivation.own(c) for c in migrated)
        snapshot_field = "element_serializer" if isinstance(target_state, pb.ListState) else "value_serializer"
        getattr(target_state, snapshot_field).CopyFrom(result.serializer.snapshot())
        return new

    return derive(source, target, copy=copy, overwrite=overwrite, base_paths=base_paths, build=build, force=force)


def resolve_migration(state: pb.ListState | pb.KeyedState, serializer: Serializer, label: str
                      ) -> tuple[CompatibilityResult, tuple[Serializer, Serializer] | None]:
    """How ``serializer`` takes over ``state``'s values (list elements or keyed values):
    the resolution, and the stored (old, new) serializers when the chunks must be
    re-encoded (compatible after migration), else None. Raises
    :class:`IncompatibleSerializerError` naming the state and both serializers."""
    is_list = isinstance(state, pb.ListState)
    old_snapshot = state.element_serializer if is_list else state.value_serializer
    result = resolve_compatibility(old_snapshot, serializer)
    if result.kind is Compatibility.INCOMPATIBLE:
        raise IncompatibleSerializerError(
            f"serializer {serializer_label(serializer.snapshot())!r} cannot read state written with "
            f"{serializer_label(old_snapshot)!r}: {result.reason}", state=label)
    if result.kind is not Compatibility.COMPATIBLE_AFTER_MIGRATION:
        return result, None
    old, new = serializer_from_snapshot(old_snapshot), result.serializer
    if not is_list and state.kind == pb.LIST and not state.HasField("ttl"):  # each key's whole list is one value
        old, new = ListOf.of_list_state(old), ListOf.of_list_state(new)
    return result, (old, new)


def migrate_chunk(store: ChunkStore, state: pb.ListState | pb.KeyedState, label: str, chunk: pb.Chunk,
                  stored: tuple[Serializer, Serializer], sink: ChunkSink,
                  selected: list[tuple[int, int]] | None = None) -> pb.Chunk:
    """Re-encode one chunk's values from ``stored[0]`` to ``stored[1]`` into ``sink``
    (the returned chunk is complete once the sink is flushed). A list chunk's ``selected``
    runs ``(first, count)`` (ascending, disjoint) are its elements; its other rows are no
    state (spec/format.md §5.3), may not decode, and are kept as they are, so that the chunk
    keeps its rows and the ranges that select them stay valid."""
    columns = LIST_COLUMNS if isinstance(state, pb.ListState) else keyed_column_count(state)
    cols = store.read_columns(chunk, columns, label)
    if selected is not None:
        cols[-1] = _migrate_selected(stored, cols[-1], selected)
    elif isinstance(state, pb.KeyedState) and state.HasField("ttl"):  # timestamps stay, values move (§7.8)
        cols[-1] = migrate_ttl_cells(stored[0], stored[1], cols[-1], whole_lists=state.kind == pb.LIST)
    else:
        cols[-1] = migrate_array(stored[0], stored[1], cols[-1])
    new_chunk = sink.put(encode_chunk(cols), chunk.row_count, chunk.key_group)
    if chunk.HasField("key_bounds"):  # keys are unchanged, so are their bounds
        new_chunk.key_bounds.CopyFrom(chunk.key_bounds)
    return new_chunk


def _migrate_selected(stored: tuple[Serializer, Serializer], values: pa.Array,
                      selected: list[tuple[int, int]]) -> pa.Array:
    """``values`` with the rows of the ``selected`` runs migrated and every other row as it was."""
    pieces, at = [], 0
    for first, count in selected:
        pieces += [values.slice(at, first - at), migrate_array(stored[0], stored[1], values.slice(first, count))]
        at = first + count
    pieces.append(values.slice(at))
    return pa.concat_arrays([piece.cast(values.type) for piece in pieces])  # encodings are binary, as stored
