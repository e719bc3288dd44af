"""The serializer abstraction, framing, the registry and compatibility.

Normative text: spec/serializers.md. Section numbers below refer to it.

Every state stores a :class:`~pyref._proto.savepoint.v1.serializer_pb2.SerializerSnapshot`
beside its bytes. :func:`serializer_from_snapshot` turns a snapshot back into a
serializer through a registry of *classes the program registered*: a savepoint
only ever names an identifier, never code (§6).
"""

from __future__ import annotations

import abc
import enum
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from pyref._proto.savepoint.v1 import serializer_pb2
from pyref.errors import (
    CorruptSavepointError,
    IncompatibleSerializerError,
    InvalidArgumentError,
    UnsupportedFormatError,
)

__all__ = [
    "MAX_NESTING_DEPTH",
    "MAX_TUPLE_FIELDS",
    "Compatibility",
    "CompatibilityResult",
    "Serializer",
    "decode_framed",
    "encode_framed",
    "migrate_array",
    "register_serializer",
    "registered_serializer_ids",
    "resolve_compatibility",
    "serializer_from_snapshot",
    "unregister_serializer",
]

#: Deepest serializer tree a snapshot may describe (§7). The root is depth 1.
MAX_NESTING_DEPTH = 32
#: Most fields a tuple may have (§7).
MAX_TUPLE_FIELDS = 4096

_U32 = struct.Struct("<I")
_U32_MAX = 0xFFFFFFFF
_I32_MAX = 0x7FFFFFFF

SerializerSnapshot = serializer_pb2.SerializerSnapshot


# --------------------------------------------------------------------------
# Byte-level helpers
# --------------------------------------------------------------------------


def as_view(data: Any) -> memoryview:
    """Return a one-dimensional byte view of ``data`` (any bytes-like object) without copying."""
    if isinstance(data, str):
        raise InvalidArgumentError("decode expects bytes, not str")
    try:
        mv = data if isinstance(data, memoryview) else memoryview(data)
    except TypeError:
        raise InvalidArgumentError(
            f"decode expects a bytes-like object, got {type(data).__name__}"
        ) from None
    if mv.ndim == 1 and mv.format == "B":
        return mv
    try:
        return mv.cast("B")
    except TypeError as e:
        raise InvalidArgumentError(f"cannot decode a non-contiguous buffer: {e}") from None


def is_text(value: str) -> bool:
    """Whether UTF-8, and so a protobuf string, can hold ``value``: no lone surrogates."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def corrupt(serializer_id: str, message: str, offset: int) -> CorruptSavepointError:
    """A :class:`CorruptSavepointError` saying what is wrong and where."""
    return CorruptSavepointError(f"{serializer_id}: {message} at offset {offset}")


def read_u32(mv: memoryview, pos: int, end: int, what: str, serializer_id: str) -> int:
    """Read a little-endian u32 at ``pos``; the value must end before ``end``."""
    if end - pos < 4:
        raise corrupt(serializer_id, f"truncated {what}: need 4 bytes, {end - pos} remain", pos)
    return _U32.unpack_from(mv, pos)[0]


def check_count(
    count: int, min_item_size: int, pos: int, end: int, what: str, serializer_id: str
) -> None:
    """Refuse a declared count that cannot fit in the remaining bytes (§7).

    Called before anything is allocated for the items.
    """
    remaining = end - pos
    if count * max(min_item_size, 1) > remaining:
        raise corrupt(
            serializer_id,
            f"{what} {count} needs at least {count * max(min_item_size, 1)} bytes "
            f"but only {remaining} remain",
            pos - 4,
        )


def min_framed_size(serializer: Serializer) -> int:
    """Fewest bytes a framed value of ``serializer`` occupies (§4)."""
    w = serializer.fixed_width
    return max(w, 1) if w is not None else 4


def write_framed(serializer: Serializer, value: Any, out: bytearray) -> None:
    """Append F(value) to ``out`` (§4)."""
    data = serializer.encode(value)
    w = serializer.fixed_width
    if w is not None:
        if len(data) != w:
            raise InvalidArgumentError(
                f"{serializer.serializer_id}: declared fixed width {w} but encoded {len(data)} bytes"
            )
        out += data
        return
    if len(data) > _U32_MAX:
        raise InvalidArgumentError(
            f"{serializer.serializer_id}: encoded value of {len(data)} bytes is too long to frame"
        )
    out += _U32.pack(len(data))
    out += data


def read_framed(serializer: Serializer, mv: memoryview, pos: int, end: int) -> tuple[Any, int]:
    """Read F(value) from ``mv[pos:end]``; return the value and the next position (§4)."""
    w = serializer.fixed_width
    if w is not None:
        if end - pos < w:
            raise corrupt(
                serializer.serializer_id,
                f"truncated value: need {w} bytes, {end - pos} remain",
                pos,
            )
        return serializer._decode_range(mv, pos, pos + w), pos + w
    n = read_u32(mv, pos, end, "length prefix", serializer.serializer_id)
    pos += 4
    if n > end - pos:
        raise corrupt(
            serializer.serializer_id,
            f"length prefix {n} exceeds the {end - pos} remaining bytes",
            pos - 4,
        )
    return serializer._decode_range(mv, pos, pos + n), pos + n


def encode_framed(serializer: Serializer, value: Any) -> bytes:
    """F(value): the encoding as it appears inside a composite (§4)."""
    out = bytearray()
    write_framed(serializer, value, out)
    return bytes(out)


def decode_framed(serializer: Serializer, data: Any, offset: int = 0) -> tuple[Any, int]:
    """Read one framed value starting at ``offset``; return it and the next offset."""
    mv = as_view(data)
    if not 0 <= offset <= len(mv):
        raise InvalidArgumentError(f"offset {offset} outside a buffer of {len(mv)} bytes")
    return read_framed(serializer, mv, offset, len(mv))


# --------------------------------------------------------------------------
# Arrow helpers
# --------------------------------------------------------------------------


def binary_input(arr: Any, serializer_id: str) -> pa.Array:
    """Check that ``arr`` is a (large) binary array without nulls; return it as one Array."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if not isinstance(arr, pa.Array) or not (
        pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)
    ):
        raise InvalidArgumentError(
            f"{serializer_id}: decode_array expects a pyarrow binary or large_binary array, "
            f"got {getattr(arr, 'type', type(arr).__name__)}"
        )
    if arr.null_count:
        first = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
        raise CorruptSavepointError(
            f"{serializer_id}: record {first} is null; every stored value is a byte string"
        )
    return arr


def binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The offsets (length n+1) and the data buffer of a null-free (large) binary array."""
    n = len(arr)
    bufs = arr.buffers()
    odt = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    if n == 0 or bufs[1] is None:
        return np.zeros(n + 1, dtype=odt), np.zeros(0, dtype=np.uint8)
    offsets = np.frombuffer(bufs[1], dtype=odt, count=n + 1, offset=arr.offset * np.dtype(odt).itemsize)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return offsets, data


def fixed_width_values(arr: pa.Array, width: int, serializer_id: str) -> np.ndarray:
    """The n*width value bytes of ``arr``, after checking every record has ``width`` bytes."""
    n = len(arr)
    offsets, data = binary_parts(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint8)
    lengths = np.diff(offsets)
    bad = np.flatnonzero(lengths != width)
    if bad.size:
        i = int(bad[0])
        raise CorruptSavepointError(
            f"{serializer_id}: record {i} has {int(lengths[i])} bytes, expected exactly {width}"
        )
    start = int(offsets[0])
    return data[start : start + n * width]


def fixed_width_binary(data: np.ndarray, n: int, width: int) -> pa.Array:
    """A binary array of ``n`` records of ``width`` bytes each over ``data`` (n*width bytes)."""
    total = n * width
    large = total > _I32_MAX
    offsets = np.arange(0, total + 1, width, dtype=np.int64 if large else np.int32)[: n + 1]
    data = np.ascontiguousarray(data).view(np.uint8)
    return pa.Array.from_buffers(
        pa.large_binary() if large else pa.binary(),
        n,
        [None, pa.py_buffer(offsets), pa.py_buffer(data)],
    )


def range_indices(starts: np.ndarray, counts: np.ndarray, dtype: type = np.int64) -> np.ndarray:
    """``starts[0], starts[0] + 1, ..`` (``counts[0]`` of them), then ``starts[1], ..``: the
    concatenated ranges as one index array, no Python loop (``dtype`` int32 where they fit)."""
    offsets = np.cumsum(counts) - counts
    return np.repeat((starts - offsets).astype(dtype), counts) + np.arange(int(counts.sum()), dtype=dtype)


def range_mask(starts: np.ndarray, counts: np.ndarray, size: int) -> np.ndarray:
    """A mask of ``size`` True over each ``[starts[i], starts[i] + counts[i])`` (ascending,
    disjoint): what ``range_indices`` selects, in one pass writing a byte each where an index
    array takes eight."""
    lengths = np.empty(2 * len(starts) + 1, np.int64)
    lengths[1::2] = counts
    lengths[0:-1:2] = starts - np.concatenate([[0], (starts + counts)[:-1]])  # the gap before each range
    lengths[-1] = size - (int(starts[-1] + counts[-1]) if len(starts) else 0)
    pattern = np.zeros(len(lengths), bool)
    pattern[1::2] = True
    return np.repeat(pattern, lengths)


def byte_ranges(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bytes ``data[starts[i]:starts[i] + lengths[i]]`` of every i, concatenated, and
    the offsets (n + 1, int64) of each range in the result: one gather, no Python loop."""
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return data[range_indices(starts, lengths)], offsets


def binary_from_ranges(data: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """A binary array (large_binary beyond 2 GiB) over ``data`` with int64 ``offsets``."""
    large = int(offsets[-1]) > _I32_MAX
    return pa.Array.from_buffers(pa.large_binary() if large else pa.binary(), len(offsets) - 1,
                                 [None, pa.py_buffer(offsets if large else offsets.astype(np.int32)),
                                  pa.py_buffer(np.ascontiguousarray(data, np.uint8))])


def binary_from_list(encoded: list[bytes]) -> pa.Array:
    """A binary array (large_binary beyond 2 GiB) of already encoded values."""
    total = sum(map(len, encoded))
    return pa.array(encoded, type=pa.large_binary() if total > _I32_MAX else pa.binary())


# --------------------------------------------------------------------------
# The serializer abstraction
# --------------------------------------------------------------------------


class Serializer(abc.ABC):
    """Turns Python values into the bytes stored in a savepoint and back.

    Subclasses set :attr:`serializer_id` and :attr:`version` and implement
    :meth:`encode`, :meth:`decode`, :meth:`from_snapshot` and, when they have
    configuration, :attr:`custom_configuration` (user-defined serializers, §6).
    """

    #: Identifier of the serializer family. Built-ins have no dot; user-defined
    #: serializers MUST use a reverse-DNS id containing a dot (§6).
    serializer_id: ClassVar[str]
    #: Snapshot version this implementation writes; it reads 1..version (§2.2).
    version: ClassVar[int] = 1

    # -- shape ------------------------------------------------------------

    @property
    def fixed_width(self) -> int | None:
        """Width in bytes of every encoding, or None when variable (§4)."""
        return None

    @property
    def nested_serializers(self) -> tuple[Serializer, ...]:
        """Child serializers, in snapshot order (§2)."""
        return ()

    @property
    def custom_configuration(self) -> bytes:
        """Configuration bytes of a user-defined serializer (§6); empty for built-ins."""
        return b""

    @property
    def depth(self) -> int:
        """Height of this serializer tree; a leaf has depth 1 (§7)."""
        return 1 + max((c.depth for c in self.nested_serializers), default=0)

    # -- values -----------------------------------------------------------

    @abc.abstractmethod
    def encode(self, value: Any) -> bytes:
        """E(value): the bytes of one value (§3)."""

    def decode(self, data: bytes | memoryview) -> Any:
        """The value whose encoding is exactly ``data``.

        Raises CorruptSavepointError for truncated input, trailing bytes or any
        byte pattern the encoding does not allow.
        """
        mv = as_view(data)
        return self._decode_range(mv, 0, len(mv))

    def _decode_range(self, mv: memoryview, start: int, end: int) -> Any:
        """Decode the value occupying exactly ``mv[start:end]``.

        Offsets in error messages are absolute positions in ``mv``. Built-ins
        override this; a user-defined serializer overrides :meth:`decode`
        instead and receives the bytes of its value.
        """
        if type(self).decode is Serializer.decode:
            raise NotImplementedError(f"{type(self).__name__} must implement decode()")
        return self.decode(bytes(mv[start:end]))

    def _invalid(self, value: Any, why: str | None = None) -> InvalidArgumentError:
        text = f"{self.serializer_id} serializer cannot encode a value of type {type(value).__name__}"
        return InvalidArgumentError(f"{text}: {why}" if why else text)

    # -- Arrow ------------------------------------------------------------

    def arrow_type(self) -> pa.DataType:
        """Arrow type of decoded values. User-defined default: binary (the encoding)."""
        return pa.binary()

    def _to_arrow_value(self, value: Any) -> Any:
        """A decoded Python value as ``pa.array`` accepts it for :meth:`arrow_type`."""
        if type(self).arrow_type is Serializer.arrow_type:
            return self.encode(value)
        return value

    def _from_arrow_value(self, item: Any) -> Any:
        """An element of ``arrow_array.to_pylist()`` as a Python value for :meth:`encode`."""
        if type(self).arrow_type is Serializer.arrow_type:
            return self.decode(item)
        return item

    def encode_array(self, values: Any) -> pa.Array:
        """Encode many values into a binary array (one record per value).

        ``values`` is a pyarrow Array / ChunkedArray of :meth:`arrow_type` or a
        sequence of Python values. Returns a BinaryArray (LargeBinaryArray when
        the total exceeds 2 GiB or the input was a large type).
        """
        if isinstance(values, (pa.Array, pa.ChunkedArray)):
            items = [self._from_arrow_value(v) for v in values.to_pylist()]
        elif isinstance(values, (str, bytes, bytearray)) or not isinstance(values, (Sequence, np.ndarray)):
            raise InvalidArgumentError(
                f"{self.serializer_id}: encode_array expects a pyarrow array or a sequence, "
                f"got {type(values).__name__}"
            )
        else:
            items = list(values)
        out = []
        for i, v in enumerate(items):
            try:
                out.append(self.encode(v))
            except InvalidArgumentError as e:
                raise InvalidArgumentError(f"value {i}: {e.reason}") from e
        return binary_from_list(out)

    def decode_array(self, arr: pa.Array) -> pa.Array:
        """Decode a (large) binary array of encodings into an array of :meth:`arrow_type`."""
        arr = binary_input(arr, self.serializer_id)
        out = []
        for i, b in enumerate(arr.to_pylist()):
            try:
                out.append(self._to_arrow_value(self.decode(b)))
            except CorruptSavepointError as e:
                raise CorruptSavepointError(f"record {i}: {e.reason}") from e
        try:
            return pa.array(out, type=self.arrow_type())
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
            raise InvalidArgumentError(
                f"{self.serializer_id}: decoded values cannot be represented as {self.arrow_type()}: {e}"
            ) from e

    # -- snapshots --------------------------------------------------------

    #: Format 1.2: the originating engine's own snapshot of this serializer (§2.4), written
    #: into :meth:`snapshot` when set (an importer sets it with :meth:`with_engine`).
    engine_serializer: serializer_pb2.EngineSerializer | None = None

    def with_engine(self, engine: str, class_name: str, snapshot: bytes) -> Serializer:
        """This serializer, its snapshot carrying the engine's own snapshot bytes (§2.4):
        an importer keeps how the engine described the type, for an exporter back to it."""
        self.engine_serializer = serializer_pb2.EngineSerializer(engine=engine, class_name=class_name,
                                                                 snapshot=bytes(snapshot))
        return self

    def snapshot(self) -> serializer_pb2.SerializerSnapshot:
        """The snapshot stored beside the state (§2)."""
        snap = SerializerSnapshot(
            serializer_id=self.serializer_id,
            version=self.version,
            nested=[c.snapshot() for c in self.nested_serializers],
            custom_configuration=self.custom_configuration,
        )
        if self.engine_serializer is not None:
            snap.engine.CopyFrom(self.engine_serializer)
        return snap

    @classmethod
    def from_snapshot(cls, snapshot: serializer_pb2.SerializerSnapshot) -> Serializer:
        """Rebuild the serializer from its snapshot (version already checked)."""
        raise NotImplementedError(f"{cls.__name__} must implement from_snapshot()")

    def resolve_compatibility(
        self, old_snapshot: serializer_pb2.SerializerSnapshot
    ) -> CompatibilityResult:
        """Whether this serializer can take over state written under ``old_snapshot`` (§5).

        Default: same id and equal configuration -> AS_IS, else INCOMPATIBLE.
        """
        if old_snapshot.serializer_id != self.serializer_id:
            return different_ids(old_snapshot, self)
        old = serializer_from_snapshot(old_snapshot)
        if old == self:
            return CompatibilityResult(
                Compatibility.COMPATIBLE_AS_IS, self, f"same {self.serializer_id} serializer"
            )
        return CompatibilityResult(
            Compatibility.INCOMPATIBLE,
            self,
            f"the {self.serializer_id} serializer's configuration changed",
        )

    def migrate_column(self, old: Serializer, encoded: pa.Array) -> pa.Array | None:
        """The encodings of a whole column written with ``old`` as this serializer writes
        them, computed on whole buffers, or None to migrate value by value (decode with
        ``old``, :meth:`value_converter`, encode). Only called for a pair that resolves as
        compatible after migration; must refuse corrupt input as decoding does."""
        return None

    def value_converter(self, old: Serializer) -> Callable[[Any], Any] | None:
        """How a migration (§5) turns a value decoded with ``old`` into the value this
        serializer writes, or None when the value stays as it is (int32 -> int64, enum
        symbols reordered). Only called for a pair that resolves as compatible. Built-in
        composites convert their children; a tuple whose fields changed maps them by
        name and fills added fields with their defaults (§5.3)."""
        return None

    # -- identity ---------------------------------------------------------

    def _config_key(self) -> bytes:
        return _without_engine(self.snapshot()).SerializeToString(deterministic=True)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Serializer):
            return NotImplemented
        return type(self) is type(other) and self._config_key() == other._config_key()

    def __hash__(self) -> int:
        return hash((type(self), self._config_key()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _without_engine(snapshot: serializer_pb2.SerializerSnapshot) -> serializer_pb2.SerializerSnapshot:
    """The snapshot without the informative engine snapshots (§2.4), which take no part in a
    serializer's identity; an opaque serializer's engine is its configuration (§3.20) and stays."""
    if snapshot.serializer_id != "opaque":
        snapshot.ClearField("engine")
    for child in snapshot.nested:
        _without_engine(child)
    return snapshot


# --------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------

_REGISTRY: dict[str, type[Serializer]] = {}
_BUILTIN_IDS: set[str] = set()
_BUILTIN_ID_RE = re.compile(r"[a-z][a-z0-9_-]*\Z")  # no dot (§2.1); 1.2 ids have dashes
_USER_ID_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)+\Z")


def register_builtin(cls: type[Serializer]) -> type[Serializer]:
    """Register a built-in serializer class (internal)."""
    sid = cls.serializer_id
    assert _BUILTIN_ID_RE.match(sid) and sid not in _REGISTRY, sid
    _REGISTRY[sid] = cls
    _BUILTIN_IDS.add(sid)
    return cls


def is_builtin_id(serializer_id: str) -> bool:
    return "." not in serializer_id


def register_serializer(cls: type[Serializer]) -> type[Serializer]:
    """Register a user-defined serializer class (usable as a class decorator).

    The class's ``serializer_id`` MUST be reverse-DNS (contain a dot) and not
    already registered; it MUST implement ``from_snapshot``. Snapshots naming
    this id are then restored with ``cls.from_snapshot`` (§6).
    """
    if not (isinstance(cls, type) and issubclass(cls, Serializer)):
        raise InvalidArgumentError(f"register_serializer expects a Serializer subclass, got {cls!r}")
    sid = getattr(cls, "serializer_id", None)
    if not isinstance(sid, str) or not sid:
        raise InvalidArgumentError(f"{cls.__name__} has no serializer_id")
    if sid in _BUILTIN_IDS or is_builtin_id(sid):
        raise InvalidArgumentError(
            f"serializer id {sid!r} is reserved for built-in serializers; user-defined ids "
            f"must be reverse-DNS and contain a dot, e.g. 'com.example.{sid}'"
        )
    if not _USER_ID_RE.match(sid):
        raise InvalidArgumentError(
            f"serializer id {sid!r} is not a reverse-DNS name (letters, digits, '_', '-', dots)"
        )
    if sid in _REGISTRY:
        raise InvalidArgumentError(f"serializer id {sid!r} is already registered by {_REGISTRY[sid].__name__}")
    if not isinstance(cls.version, int) or isinstance(cls.version, bool) or cls.version < 1:
        raise InvalidArgumentError(f"{cls.__name__}.version must be an integer >= 1")
    if cls.from_snapshot.__func__ is Serializer.from_snapshot.__func__:  # type: ignore[attr-defined]
        raise InvalidArgumentError(f"{cls.__name__} must implement the from_snapshot classmethod")
    _REGISTRY[sid] = cls
    return cls


def unregister_serializer(serializer_id: str) -> None:
    """Remove a user-defined serializer from the registry (built-ins cannot be removed)."""
    if serializer_id in _BUILTIN_IDS:
        raise InvalidArgumentError(f"built-in serializer {serializer_id!r} cannot be unregistered")
    if serializer_id not in _REGISTRY:
        raise InvalidArgumentError(f"serializer id {serializer_id!r} is not registered")
    del _REGISTRY[serializer_id]


def registered_serializer_ids() -> tuple[str, ...]:
    """Every registered id, built-ins first, each group sorted."""
    return tuple(sorted(_BUILTIN_IDS)) + tuple(sorted(set(_REGISTRY) - _BUILTIN_IDS))


def _check_depth(snapshot: serializer_pb2.SerializerSnapshot) -> None:
    stack = [(snapshot, 1)]
    while stack:
        snap, d = stack.pop()
        if d > MAX_NESTING_DEPTH:
            raise CorruptSavepointError(
                f"serializer snapshot nests deeper than {MAX_NESTING_DEPTH} levels"
            )
        stack.extend((c, d + 1) for c in snap.nested)


def serializer_from_snapshot(snapshot: serializer_pb2.SerializerSnapshot) -> Serializer:
    """Restore the serializer a snapshot describes, through the registry (§2, §6).

    Unknown id or a snapshot version newer than the registered class supports
    -> UnsupportedFormatError; malformed snapshot -> CorruptSavepointError.
    """
    if not isinstance(snapshot, SerializerSnapshot):
        raise InvalidArgumentError(
            f"serializer_from_snapshot expects a SerializerSnapshot, got {type(snapshot).__name__}"
        )
    _check_depth(snapshot)
    sid = snapshot.serializer_id
    cls = _REGISTRY.get(sid)
    if cls is None:
        if not sid:
            raise CorruptSavepointError("serializer snapshot has an empty serializer_id")
        if is_builtin_id(sid):
            raise UnsupportedFormatError(
                f"unknown built-in serializer {sid!r}: the savepoint needs a newer reader"
            )
        raise UnsupportedFormatError(
            f"serializer {sid!r} is not registered: register the class that implements it "
            f"with pyref.serializers.register_serializer before reading this state"
        )
    if snapshot.version == 0:
        raise CorruptSavepointError(f"serializer {sid!r} snapshot has version 0; versions start at 1")
    if snapshot.version > cls.version:
        raise UnsupportedFormatError(
            f"serializer {sid!r} snapshot version {snapshot.version} is newer than the "
            f"supported version {cls.version}: the savepoint needs a newer reader"
        )
    restored = cls.from_snapshot(snapshot)
    if not isinstance(restored, Serializer):
        raise InvalidArgumentError(f"{cls.__name__}.from_snapshot returned {type(restored).__name__}")
    return restored


def check_builtin_snapshot(
    snapshot: serializer_pb2.SerializerSnapshot,
    *,
    nested: int | None = 0,
    field_names: bool = False,
    protobuf: bool = False,
    symbols: bool = False,
) -> None:
    """Refuse a built-in snapshot carrying fields its family does not use (§2.3).
    ``engine`` is informative on every snapshot (§2.4) and never refused here."""
    sid = snapshot.serializer_id
    if nested is not None and len(snapshot.nested) != nested:
        raise CorruptSavepointError(
            f"{sid} snapshot must have {nested} nested serializer(s), has {len(snapshot.nested)}"
        )
    if not field_names and len(snapshot.field_names):
        raise CorruptSavepointError(f"{sid} snapshot must not have field_names")
    if not protobuf and snapshot.HasField("protobuf"):
        raise CorruptSavepointError(f"{sid} snapshot must not have a protobuf configuration")
    if not symbols and len(snapshot.symbols):
        raise CorruptSavepointError(f"{sid} snapshot must not have symbols (only enum has)")
    if snapshot.custom_configuration:
        raise CorruptSavepointError(f"built-in {sid} snapshot must not have custom_configuration")


# --------------------------------------------------------------------------
# Compatibility (§5)
# --------------------------------------------------------------------------


class Compatibility(enum.Enum):
    """The four outcomes of resolving a new serializer against an old snapshot."""

    COMPATIBLE_AS_IS = "compatible_as_is"
    COMPATIBLE_AFTER_MIGRATION = "compatible_after_migration"
    COMPATIBLE_WITH_RECONFIGURED_SERIALIZER = "compatible_with_reconfigured_serializer"
    INCOMPATIBLE = "incompatible"


@dataclass(frozen=True)
class CompatibilityResult:
    """Outcome of :func:`resolve_compatibility`.

    ``serializer`` is the serializer to use from now on: the reconfigured one
    for COMPATIBLE_WITH_RECONFIGURED_SERIALIZER, the new one otherwise. For
    COMPATIBLE_AFTER_MIGRATION, read the old bytes with
    ``serializer_from_snapshot(old_snapshot)`` and write them with
    ``serializer`` (see :func:`migrate_array`).
    """

    kind: Compatibility
    serializer: Serializer
    reason: str

    @property
    def is_compatible(self) -> bool:
        return self.kind is not Compatibility.INCOMPATIBLE


def different_ids(
    old_snapshot: serializer_pb2.SerializerSnapshot, new: Serializer
) -> CompatibilityResult:
    """The result for two different serializer families with no rule between them."""
    old_id = old_snapshot.serializer_id
    if old_id == "nullable":
        reason = (
            f"the old nullable serializer allows nulls, which the new {new.serializer_id} "
            f"serializer cannot represent"
        )
    else:
        reason = f"serializer changed from {old_id} to {new.serializer_id}"
    return CompatibilityResult(Compatibility.INCOMPATIBLE, new, reason)


def resolve_compatibility(
    old_snapshot: serializer_pb2.SerializerSnapshot, new_serializer: Serializer
) -> CompatibilityResult:
    """Resolve ``new_serializer`` against the snapshot stored with a state (§5)."""
    if not isinstance(old_snapshot, SerializerSnapshot):
        raise InvalidArgumentError(
            f"resolve_compatibility expects a SerializerSnapshot, got {type(old_snapshot).__name__}"
        )
    if not isinstance(new_serializer, Serializer):
        raise InvalidArgumentError(
            f"resolve_compatibility expects a Serializer, got {type(new_serializer).__name__}"
        )
    _check_depth(old_snapshot)
    result = new_serializer.resolve_compatibility(old_snapshot)
    if not isinstance(result, CompatibilityResult):
        raise InvalidArgumentError(
            f"{type(new_serializer).__name__}.resolve_compatibility returned {type(result).__name__}"
        )
    return result


def combine_children(
    results: Sequence[tuple[str, CompatibilityResult]],
) -> Compatibility:
    """Combine child outcomes: INCOMPATIBLE > AFTER_MIGRATION > RECONFIGURED > AS_IS."""
    kinds = [r.kind for _, r in results]
    for k in (
        Compatibility.INCOMPATIBLE,
        Compatibility.COMPATIBLE_AFTER_MIGRATION,
        Compatibility.COMPATIBLE_WITH_RECONFIGURED_SERIALIZER,
    ):
        if k in kinds:
            return k
    return Compatibility.COMPATIBLE_AS_IS


def migrate_array(old: Serializer, new: Serializer, data: Any) -> pa.Array:
    """Re-encode values written with ``old`` so that ``new`` reads them.

    Decodes with ``old`` and encodes with ``new``: vectorised through an Arrow
    cast when both are primitive serializers (int32 -> int64), one value at a
    time otherwise. Raises IncompatibleSerializerError when the two do not
    resolve as compatible. When no byte changes are needed the input is
    returned unchanged.
    """
    result = resolve_compatibility(old.snapshot(), new)
    if result.kind is Compatibility.INCOMPATIBLE:
        raise IncompatibleSerializerError(f"cannot migrate: {result.reason}")
    arr = binary_input(data, old.serializer_id)
    if result.kind is not Compatibility.COMPATIBLE_AFTER_MIGRATION:
        return arr
    target = result.serializer
    if getattr(old, "_vectorised", False) and getattr(target, "_vectorised", False):
        decoded = old.decode_array(arr)
        try:
            converted = decoded.cast(target.arrow_type())
        except pa.ArrowException as e:
            raise IncompatibleSerializerError(f"cannot migrate {old!r} to {target!r}: {e}") from e
        return target.encode_array(converted)
    column = target.migrate_column(old, arr)
    if column is not None:
        return column
    convert = target.value_converter(old)
    out = []
    for i, b in enumerate(arr.to_pylist()):
        try:
            value = old.decode(b)
        except CorruptSavepointError as e:
            raise CorruptSavepointError(f"record {i}: {e.reason}") from e
        try:
            out.append(target.encode(value if convert is None else convert(value)))
        except InvalidArgumentError as e:
            raise IncompatibleSerializerError(f"record {i} cannot be migrated: {e.reason}") from e
    return binary_from_list(out)
