"""The manifest envelope and the structural rules of a manifest (spec/format.md §4, §5, §9).

Envelope of the ``_manifest`` file, little-endian::

    offset  size  field
    0       8     magic 89 53 56 50 0D 0A 1A 0A  ("\\x89SVP\\r\\n\\x1a\\n")
    8       2     format major version (u16)
    10      2     format minor version (u16)
    12      4     body length N (u32)
    16      N     body: protobuf savepoint.v1.Manifest
    16+N    4     CRC32C of bytes [0, 16+N)

The first 12 bytes keep this meaning in every major version, so any reader can
name the version it was given before refusing it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from google.protobuf.message import DecodeError

from ._proto.savepoint.v1 import manifest_pb2 as pb
from .checksum import crc32c
from .codecs import MAX_RAW_LENGTH, MAX_ZSTD_RATIO, Codec
from . import features
from .errors import CorruptSavepointError, SavepointNotFoundError, UnsupportedFormatError
from .io import MANIFEST_NAME, SavepointIO, check_directory_name, check_relative_path
from .key_groups import UPPER_BOUND_MAX_PARALLELISM
from .manifest_encoding import has_cut_varints
from .ttl import UPDATE_TYPES, VISIBILITIES, ttl_problem

MAGIC = b"\x89SVP\r\n\x1a\n"
DATA_FILE_MAGIC = b"\x89SVD\r\n\x1a\n"
FORMAT_MAJOR = 1
#: Newest minor version this library reads and writes. 1.1 added the optional
#: feature "chunk-key-bounds" (spec/format.md §7.6); 1.2 the state real jobs keep:
#: namespaces, timers, TTL, broadcast and coordinator state (§9.1).
FORMAT_MINOR = 2
_HEAD = struct.Struct("<8sHHI")
ENVELOPE_OVERHEAD = _HEAD.size + 4
#: Longest ``_manifest`` file a reader must read (spec/format.md §4.1): protobuf parsers
#: refuse messages of 2 GiB, and a reader holds the whole manifest in memory.
MAX_MANIFEST_BYTES = 2**31 - 1
#: Deepest nesting of messages below the Manifest a reader parses (spec/format.md §4.5):
#: protobuf's usual recursion limit, which upb, C++ and Java apply.
MAX_MESSAGE_DEPTH = 100

#: Required features this reader implements (spec/format.md §9.3).
FEATURE_EXTERNAL_BASES = "external-bases"
#: 1.2: bases named by a path from the root of the store, not only siblings (spec/format.md §8.1).
FEATURE_BASE_PATHS = features.BASE_PATHS
KNOWN_REQUIRED_FEATURES = frozenset({FEATURE_EXTERNAL_BASES, *features.REQUIRED_1_2})
#: Optional features this reader implements; unknown optional features are ignored.
FEATURE_CHUNK_KEY_BOUNDS = "chunk-key-bounds"
KNOWN_OPTIONAL_FEATURES = frozenset({FEATURE_CHUNK_KEY_BOUNDS})
#: The format minor version that introduced each feature; a savepoint is labelled
#: with the lowest version that has every feature it uses (spec/format.md §9.4).
FEATURE_MINOR = {FEATURE_EXTERNAL_BASES: 0, FEATURE_CHUNK_KEY_BOUNDS: 1, **{f: 2 for f in features.REQUIRED_1_2}}

#: Columns of a chunk payload per state kind, without a namespace (spec/format.md §7.1, §7.2).
KEYED_COLUMNS = {pb.VALUE: 2, pb.LIST: 2, pb.MAP: 3, pb.REDUCING: 2, pb.AGGREGATING: 2}
LIST_COLUMNS = 1
#: Broadcast chunks hold (key, value) rows (§7.10), coordinator state one cell (§7.11).
BROADCAST_COLUMNS = 2
COORDINATOR_COLUMNS = 1


def keyed_column_count(state: pb.KeyedState) -> int:
    """Columns of the state's chunks: key, [namespace], [user key], value (§7.1, §7.7)."""
    return KEYED_COLUMNS[state.kind] + state.HasField("namespace_serializer")


def timer_column_count(service: pb.TimerService) -> int:
    """Columns of a timer chunk: key, [namespace], timestamp (§7.9)."""
    return 2 + service.HasField("namespace_serializer")


def selected_rows(state: pb.ListState | pb.BroadcastState) -> dict[int, list[tuple[int, int]]]:
    """For each chunk of a list or broadcast state that a range refers to, in chunk order,
    the runs ``(first, count)`` of its rows that ranges select, merged and ascending. These
    rows are the state: a chunk no range refers to and a row no range selects are not
    (spec/format.md §5.3), and readers never decode them."""
    spans: dict[int, list[tuple[int, int]]] = {}
    for partition in state.partitions:
        for r in partition.ranges:
            spans.setdefault(r.chunk, []).append((r.first, r.first + r.count))
    runs = {}
    for index in sorted(spans):
        merged: list[list[int]] = []
        for first, end in sorted(spans[index]):
            if merged and first <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([first, end])
        runs[index] = [(first, end - first) for first, end in merged]
    return runs


def declare_features(manifest: pb.Manifest) -> None:
    """List exactly the known features the content uses (§9.2): required ones (external bases,
    the 1.2 additions) and optional ones (key bounds); the label follows from them (§9.4)."""
    required = ([FEATURE_EXTERNAL_BASES] if manifest.bases else []) + features.required_1_2(manifest)
    bounded = any(c.HasField("key_bounds") for op in manifest.operators
                  for chunks in [*(s.chunks for s in op.keyed_states), *(s.chunks for s in op.timer_services)]
                  for c in chunks)
    del manifest.required_features[:]
    manifest.required_features.extend(required)
    del manifest.optional_features[:]
    manifest.optional_features.extend([FEATURE_CHUNK_KEY_BOUNDS] if bounded else [])


@dataclass(frozen=True)
class FormatVersion:
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


def minor_version_for(manifest: pb.Manifest) -> int:
    """The lowest format minor version that has every feature the manifest uses."""
    features = [*manifest.required_features, *manifest.optional_features]
    return max((FEATURE_MINOR.get(f, FORMAT_MINOR) for f in features), default=0)


def encode_manifest(manifest: pb.Manifest, minor: int | None = None) -> bytes:
    """The ``_manifest`` file's bytes; the minor version defaults to :func:`minor_version_for`."""
    minor = minor_version_for(manifest) if minor is None else minor
    return encode_envelope(manifest.SerializeToString(deterministic=True), FORMAT_MAJOR, minor)


def encode_envelope(body: bytes, major: int, minor: int) -> bytes:
    """The envelope (spec/format.md §4) around ``body`` with a valid CRC32C, whatever
    ``body`` and the version are: what tests need to build hostile manifests."""
    head = _HEAD.pack(MAGIC, major, minor, len(body))
    return head + body + struct.pack("<I", crc32c(head + body))


def check_envelope_head(head: bytes, size: int, *, path: str) -> FormatVersion:
    """Steps 2 to 5 of spec/format.md §4.2 on the first 16 bytes (fewer if the file is
    shorter) and the file's length: everything that can be refused before the body is read."""
    if size < 12 or head[:8] != MAGIC:
        raise CorruptSavepointError("not a savepoint manifest (bad magic bytes)", path=path, byte_range=(0, 8))
    major, minor = struct.unpack_from("<HH", head, 8)
    version = FormatVersion(major, minor)
    if major != FORMAT_MAJOR:
        raise UnsupportedFormatError(
            f"format version {version} is not readable here; this reader reads major version {FORMAT_MAJOR}",
            path=path, byte_range=(8, 12))
    if size < ENVELOPE_OVERHEAD:
        raise CorruptSavepointError(f"manifest truncated to {size} bytes", path=path)
    (length,) = struct.unpack_from("<I", head, 12)
    if length + ENVELOPE_OVERHEAD != size:
        raise CorruptSavepointError(
            f"manifest body length {length} does not match the file size {size} (truncated or padded)",
            path=path, byte_range=(12, 16))
    if size > MAX_MANIFEST_BYTES:
        raise UnsupportedFormatError(f"manifest of {size} bytes is longer than the {MAX_MANIFEST_BYTES} bytes "
                                     "a manifest may have (spec/format.md §4.1)", path=path, byte_range=(12, 16))
    return version


def read_manifest_file(io: SavepointIO) -> bytes | None:
    """The ``_manifest`` file's bytes, or None if there is none. Its header and length are
    checked before the body is read, so a huge (or sparse) file costs 16 bytes of reading,
    not its length in memory."""
    size = io.size(MANIFEST_NAME)
    if size is None:
        return None
    path = io.describe(MANIFEST_NAME)
    check_envelope_head(io.read_range(MANIFEST_NAME, 0, min(size, _HEAD.size)), size, path=path)
    # The body by read_file: one whole file, old or new if a commit replaces it meanwhile
    # (never a mix), and on object stores with the version a conditional commit needs.
    try:
        return io.read_file(MANIFEST_NAME)
    except SavepointNotFoundError:
        return None  # deleted since: as if it had not been there


def decode_manifest(data: bytes, *, path: str) -> tuple[pb.Manifest, FormatVersion]:
    """Check the envelope, parse the body and validate its structure."""
    version = check_envelope_head(data[:_HEAD.size], len(data), path=path)
    end = len(data) - 4
    view = memoryview(data)  # slices of a view copy nothing: the manifest may be large
    (stored,) = struct.unpack_from("<I", data, end)
    computed = crc32c(view[:end])
    if stored != computed:
        raise CorruptSavepointError(f"manifest CRC32C mismatch (stored {stored:#010x}, computed {computed:#010x})",
                                    path=path, byte_range=(0, end))
    manifest = pb.Manifest()
    body = view[_HEAD.size:end]
    try:  # upb refuses invalid UTF-8 in strings and nesting deeper than MAX_MESSAGE_DEPTH (§4.5)
        manifest.ParseFromString(body)
        cut = has_cut_varints(body, manifest)
    except (DecodeError, RecursionError) as exc:
        raise CorruptSavepointError(f"manifest body is not a valid protobuf message: {exc}",
                                    path=path, byte_range=(_HEAD.size, end)) from None
    if cut:
        raise CorruptSavepointError("manifest body holds a number wider than its 32-bit field (a parser would cut "
                                    "it to its low 32 bits, spec/format.md §4.5)", path=path, byte_range=(_HEAD.size, end))
    validate_manifest(manifest, path=path)
    return manifest, version


def state_label(operator: pb.Operator, name: str) -> str:
    return f"{operator.operator_id}/{name}"


def validate_manifest(m: pb.Manifest, *, path: str) -> None:
    """Every structural rule of spec/format.md §5 that can be checked without reading data files."""

    def corrupt(reason: str, state: str | None = None) -> CorruptSavepointError:
        return CorruptSavepointError(reason, path=path, state=state)

    unknown = [f for f in m.required_features if f not in KNOWN_REQUIRED_FEATURES]
    if unknown:  # M1, first; a registered optional feature listed here is not a required feature we implement
        raise UnsupportedFormatError(f"savepoint requires features this reader does not implement: {unknown}",
                                     path=path)
    try:
        _validate_rules(m, path, corrupt)
    except CorruptSavepointError:
        _raise_unknown_values(m, path)  # §5.6: a manifest breaking rules of both kinds is unsupported
        raise


def _raise_unknown_values(m: pb.Manifest, path: str) -> None:
    """Raise the *unsupported* error of the first enum value this reader does not know
    (rules C1, L1, K1, K7, O6, T2), if the manifest has one."""
    for op in m.operators:
        known: list[tuple[int, tuple[int, ...], str, str | None]] = [
            (op.key_groups, (pb.KEY_GROUPS_HASHED, pb.KEY_GROUPS_FROM_WRITER), "key-group assignment", None)]
        known += [(ls.mode, (0, pb.SPLIT_DISTRIBUTE, pb.UNION, pb.BROADCAST), "distribution mode",
                   state_label(op, ls.name)) for ls in op.list_states]
        for ks in op.keyed_states:
            label = state_label(op, ks.name)
            known.append((ks.kind, (0, *KEYED_COLUMNS), "keyed state kind", label))
            if ks.HasField("ttl"):
                known += [(ks.ttl.update_type, (0, *UPDATE_TYPES.values()), "TTL update type", label),
                          (ks.ttl.visibility, (0, *VISIBILITIES.values()), "TTL visibility", label)]
        known += [(ts.domain, (0, pb.EVENT_TIME, pb.PROCESSING_TIME), "time domain",
                   state_label(op, f"{ts.name} (timers)")) for ts in op.timer_services]
        for value, values, what, where in known:
            if value not in values:
                raise UnsupportedFormatError(f"operator {op.operator_id!r}: unknown {what} {value}", path=path,
                                             state=where)
    for label, chunk in labelled_chunks(m):
        if int(chunk.codec) not in (Codec.NONE, Codec.ZSTD):
            raise UnsupportedFormatError(f"chunk uses unknown codec {chunk.codec}", path=path, state=label)


def _validate_rules(m: pb.Manifest, path: str, corrupt) -> None:
    """The rules of §5 after M1, in the order they are listed."""
    if not m.savepoint_id:
        raise corrupt("manifest has no savepoint_id")
    if m.bases and FEATURE_EXTERNAL_BASES not in m.required_features:
        raise corrupt("manifest has bases but does not require the 'external-bases' feature")
    unlisted = [f for f in features.required_1_2(m) if f not in m.required_features]
    if unlisted:  # M9: an older reader would silently miss what these features add
        raise corrupt(f"manifest uses the features {unlisted} without listing them in required_features")
    seen_bases = set()
    for base in m.bases:
        check_directory_name(base.directory)
        if base.path:  # listed as a required feature: M9 above
            check_relative_path(base.path, what="base path")
            if base.path.rsplit("/", 1)[-1] != base.directory:
                raise corrupt(f"base path {base.path!r} does not end with its directory {base.directory!r}")
        where = ("path", base.path) if base.path else ("sibling", base.directory)
        if where in seen_bases or not base.savepoint_id:
            raise corrupt(f"base {base.path or base.directory!r} is listed twice or has no savepoint_id")
        seen_bases.add(where)
    seen_files = set()
    for f in m.data_files:
        check_relative_path(f.path, what="data file path")
        if f.base > len(m.bases):
            raise corrupt(f"data file {f.path!r} names base {f.base}, but there are {len(m.bases)} bases")
        if (f.base, f.path) in seen_files:
            raise corrupt(f"data file {f.path!r} is listed twice")
        seen_files.add((f.base, f.path))
    operator_ids = set()
    for op in m.operators:
        if not op.operator_id or op.operator_id in operator_ids:
            raise corrupt(f"operator id {op.operator_id!r} is empty or not unique")
        operator_ids.add(op.operator_id)
        if not 1 <= op.parallelism <= op.max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
            raise corrupt(f"operator {op.operator_id!r}: need 1 <= parallelism ({op.parallelism}) <= max parallelism "
                          f"({op.max_parallelism}) <= {UPPER_BOUND_MAX_PARALLELISM}")
        names = set()
        for st in [*op.list_states, *op.keyed_states, *op.broadcast_states]:
            if not st.name or st.name in names:
                raise corrupt(f"operator {op.operator_id!r}: state name {st.name!r} is empty or not unique")
            names.add(st.name)
        if bool(op.keyed_states or op.timer_services) != op.HasField("key_serializer"):
            raise corrupt(f"operator {op.operator_id!r}: a key serializer is required exactly when there is keyed "
                          "state or a timer service")
        _validate_operator_1_2(m, op, corrupt)
        for ls in op.list_states:
            _validate_list_state(m, op, ls, corrupt)
        for ks in op.keyed_states:
            _validate_keyed_state(m, op, ks, corrupt)
    _check_chunk_ranges_disjoint(m, path)


def _validate_list_state(m: pb.Manifest, op: pb.Operator, ls: pb.ListState, corrupt) -> None:
    label = state_label(op, ls.name)
    if ls.mode == pb.DISTRIBUTION_MODE_UNSPECIFIED:
        raise corrupt("list state has no distribution mode", label)
    if ls.mode not in (pb.SPLIT_DISTRIBUTE, pb.UNION, pb.BROADCAST):
        raise UnsupportedFormatError(f"unknown distribution mode {ls.mode}", state=label)
    if not ls.HasField("element_serializer"):
        raise corrupt("list state has no element serializer", label)
    if ls.mode != pb.UNION and len(ls.partitions) != op.parallelism:
        raise corrupt(f"{len(ls.partitions)} partitions for parallelism {op.parallelism}", label)
    _validate_partitioned_chunks(m, ls, ls.mode, LIST_COLUMNS, label, corrupt)


def _validate_partitioned_chunks(m: pb.Manifest, state: pb.ListState | pb.BroadcastState, mode: int, columns: int,
                                 label: str, corrupt) -> None:
    """L4-L6 for list state, B4 and L6 for broadcast state (whose partitions are copies of
    one map, ``mode`` BROADCAST): unkeyed chunks, ranges inside them, each row selected once."""
    for chunk in state.chunks:
        _validate_chunk(m, chunk, columns, label, corrupt)
        if chunk.key_group or chunk.HasField("key_bounds"):
            raise corrupt("chunk of a list or broadcast state has a key group or key bounds", label)
    selected = []  # (partition, chunk, first, count) of every range
    for p, partition in enumerate(state.partitions):
        for r in partition.ranges:
            if r.chunk >= len(state.chunks):
                raise corrupt(f"partition {p} refers to chunk {r.chunk} of {len(state.chunks)}", label)
            if r.count == 0 or r.first + r.count > state.chunks[r.chunk].row_count:
                raise corrupt(f"partition {p}: range {r.first}+{r.count} is empty or outside chunk {r.chunk} "
                              f"({state.chunks[r.chunk].row_count} rows)", label)
            selected.append((p, r.chunk, r.first, r.count))
    _check_rows_selected_once(mode, selected, label, corrupt)


def _check_rows_selected_once(mode: int, selected: list[tuple[int, int, int, int]], label: str, corrupt) -> None:
    """Rule L6 (spec/format.md §5.3): each row of a chunk is an element of one partition at
    most, and at most once (BROADCAST partitions, copies of one list, may share rows)."""
    if len(selected) < 2:
        return
    partition, chunk, first, count = np.array(selected, dtype=np.int64).T
    # Rows are only compared within one "owner": the state, or the partition for BROADCAST.
    owner = partition if mode == pb.BROADCAST else np.zeros_like(partition)
    order = np.lexsort((first, chunk, owner))
    partition, chunk, first, end, owner = (a[order] for a in (partition, chunk, first, first + count, owner))
    clash = np.flatnonzero((owner[1:] == owner[:-1]) & (chunk[1:] == chunk[:-1]) & (first[1:] < end[:-1]))
    if clash.size:
        i = int(clash[0])
        raise corrupt(f"rows {first[i + 1]}..{min(end[i], end[i + 1]) - 1} of chunk {chunk[i]} are selected twice "
                      f"(partitions {partition[i]} and {partition[i + 1]}); a row is one element of one "
                      "partition (rule L6)", label)


def labelled_chunks(m: pb.Manifest) -> Iterator[tuple[str, pb.Chunk]]:
    """Every chunk entry of the manifest with the part it belongs to: list, keyed and
    (1.2) broadcast states, timer services and coordinator states."""
    for op in m.operators:
        for st in [*op.list_states, *op.keyed_states, *op.broadcast_states]:
            for c in st.chunks:
                yield state_label(op, st.name), c
        for ts in op.timer_services:
            for c in ts.chunks:
                yield state_label(op, f"{ts.name} (timers)"), c
        if op.HasField("coordinator_state"):
            yield f"{op.operator_id} (coordinator state)", op.coordinator_state


def _check_chunk_ranges_disjoint(m: pb.Manifest, path: str) -> None:
    """Rule C6 (spec/format.md §5.5): no stored byte belongs to two chunks, of any state,
    timer service or coordinator state, so reading every chunk once decompresses at most
    32768 bytes per stored byte (spec/security.md §6.1)."""
    where = [(label, c.range) for label, c in labelled_chunks(m) if c.WhichOneof("location") == "range"]
    if len(where) < 2:
        return
    file, offset, length = np.array([(r.file, r.offset, r.length) for _, r in where], dtype=np.uint64).T
    order = np.lexsort((offset, file))
    file, offset, end = file[order], offset[order], offset[order] + length[order]  # C3 bounds these by the file size
    clash = np.flatnonzero((file[1:] == file[:-1]) & (offset[1:] < end[:-1]))
    if clash.size:
        i = int(clash[0])
        (a, _), (b, _) = where[order[i]], where[order[i + 1]]
        raise CorruptSavepointError(
            f"chunks of {a} and {b} share stored bytes of data file {m.data_files[int(file[i])].path!r}; every "
            "chunk has bytes of its own (rule C6)", path=path, byte_range=(int(offset[i + 1]), int(min(end[i], end[i + 1]))))


def _validate_keyed_state(m: pb.Manifest, op: pb.Operator, ks: pb.KeyedState, corrupt) -> None:
    label = state_label(op, ks.name)
    if ks.kind == pb.KEYED_STATE_KIND_UNSPECIFIED:
        raise corrupt("keyed state has no kind", label)
    if ks.kind not in KEYED_COLUMNS:
        raise UnsupportedFormatError(f"unknown keyed state kind {ks.kind}", state=label)
    if ks.HasField("ttl"):  # K8
        problem = ttl_problem(ks.ttl)
        if problem:
            reason, unsupported = problem
            raise UnsupportedFormatError(reason, state=label) if unsupported else corrupt(reason, label)
    if not ks.HasField("value_serializer") or ks.HasField("user_key_serializer") != (ks.kind == pb.MAP):
        raise corrupt("keyed state lacks a value serializer, or has a user-key serializer without being MAP "
                      "state (or the reverse)", label)
    _validate_key_group_chunks(m, op, ks.chunks, keyed_column_count(ks), label, corrupt)


def _validate_key_group_chunks(m: pb.Manifest, op: pb.Operator, chunks, columns: int, label: str, corrupt) -> None:
    """K3-K6 for keyed state, T3-T4 for timers: key groups in range and ordered, chunk rules."""
    previous = 0
    for chunk in chunks:
        if chunk.key_group >= op.max_parallelism:
            raise corrupt(f"chunk of key group {chunk.key_group} but max parallelism is {op.max_parallelism}", label)
        if chunk.key_group < previous:
            raise corrupt("key-group chunks are not ordered by key group", label)
        previous = chunk.key_group
        _validate_chunk(m, chunk, columns, label, corrupt)
        if chunk.HasField("key_bounds") and chunk.key_bounds.min > chunk.key_bounds.max:
            raise corrupt(f"chunk of key group {chunk.key_group} has key bounds with min > max", label)


def _validate_chunk(m: pb.Manifest, chunk: pb.Chunk, columns: int, label: str, corrupt) -> None:
    codec = int(chunk.codec)
    if codec not in (Codec.NONE, Codec.ZSTD):
        raise UnsupportedFormatError(f"chunk uses unknown codec {chunk.codec}", state=label)
    where = chunk.WhichOneof("location")
    if where is None:
        raise corrupt("chunk has neither a file range nor inline data", label)
    stored = len(chunk.inline_data) if where == "inline_data" else chunk.range.length
    if where == "range":
        r = chunk.range
        if r.file >= len(m.data_files):
            raise corrupt(f"chunk refers to data file {r.file} of {len(m.data_files)}", label)
        f = m.data_files[r.file]
        if r.offset < len(DATA_FILE_MAGIC) or r.offset + r.length > f.size:
            raise corrupt(f"chunk bytes {r.offset}..{r.offset + r.length} lie outside data file {f.path!r} "
                          f"({f.size} bytes after its header)", label)
    # The smallest payload that can hold row_count rows: reject absurd counts before allocating.
    minimum = 8 + 4 * columns * (chunk.row_count + 1)
    if not minimum <= chunk.raw_length <= MAX_RAW_LENGTH:
        raise corrupt(f"chunk raw length {chunk.raw_length} cannot hold {chunk.row_count} rows of {columns} columns",
                      label)
    if codec == Codec.NONE and stored != chunk.raw_length:
        raise corrupt(f"uncompressed chunk stores {stored} bytes but declares {chunk.raw_length}", label)
    if codec == Codec.ZSTD and chunk.raw_length > MAX_ZSTD_RATIO * stored:
        raise corrupt(f"zstd chunk of {stored} stored bytes cannot expand to its declared {chunk.raw_length}", label)


# --------------------------------------------------------------------------
# Format 1.2 parts of an operator (§5.2 O6-O8, §5.7 T1-T4, §5.8 B1-B4)
# --------------------------------------------------------------------------


def _validate_operator_1_2(m: pb.Manifest, op: pb.Operator, corrupt) -> None:
    if op.key_groups not in (pb.KEY_GROUPS_HASHED, pb.KEY_GROUPS_FROM_WRITER):  # O6
        raise UnsupportedFormatError(f"operator {op.operator_id!r}: unknown key-group assignment {op.key_groups}")
    if op.HasField("coordinator_state"):  # O7
        label = f"{op.operator_id} (coordinator state)"
        chunk = op.coordinator_state
        _validate_chunk(m, chunk, COORDINATOR_COLUMNS, label, corrupt)
        if chunk.row_count != 1 or chunk.key_group or chunk.HasField("key_bounds"):
            raise corrupt("coordinator state must be one row, without key group or key bounds", label)
    services = set()
    for ts in op.timer_services:
        label = state_label(op, f"{ts.name} (timers)")
        if not ts.name or (ts.name, ts.domain) in services:  # T1
            raise corrupt("timer service name is empty, or the (name, domain) pair is not unique", label)
        services.add((ts.name, ts.domain))
        if ts.domain == pb.TIME_DOMAIN_UNSPECIFIED:  # T2
            raise corrupt("timer service has no time domain", label)
        if ts.domain not in (pb.EVENT_TIME, pb.PROCESSING_TIME):
            raise UnsupportedFormatError(f"unknown time domain {ts.domain}", state=label)
        _validate_key_group_chunks(m, op, ts.chunks, timer_column_count(ts), label, corrupt)  # T3, T4
    for bs in op.broadcast_states:
        label = state_label(op, bs.name)
        if not (bs.HasField("key_serializer") and bs.HasField("value_serializer")):  # B2
            raise corrupt("broadcast state lacks a key or value serializer", label)
        if len(bs.partitions) != op.parallelism:  # B3
            raise corrupt(f"{len(bs.partitions)} partitions for parallelism {op.parallelism}", label)
        _validate_partitioned_chunks(m, bs, pb.BROADCAST, BROADCAST_COLUMNS, label, corrupt)  # B4, L6
