"""Composite serializers: nullable, tuple, list, map (spec §3.7-§3.10).

Children are framed (§4): a fixed-width child is written as its exact bytes,
a variable-width child as a u32 length followed by its bytes.
"""

from __future__ import annotations

import collections
import keyword
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (Array.take below; loaded here, not in the first decode)

from pyref._proto.savepoint.v1.serializer_pb2 import SerializerSnapshot
from pyref.errors import CorruptSavepointError, InvalidArgumentError

from .base import (
    _U32,
    _U32_MAX,
    MAX_NESTING_DEPTH,
    MAX_TUPLE_FIELDS,
    Compatibility,
    CompatibilityResult,
    Serializer,
    binary_from_ranges,
    binary_input,
    binary_parts,
    byte_ranges,
    check_builtin_snapshot,
    check_count,
    combine_children,
    corrupt,
    different_ids,
    is_builtin_id,
    is_text,
    migrate_array,
    min_framed_size,
    read_framed,
    read_u32,
    register_builtin,
    resolve_compatibility,
    serializer_from_snapshot,
    write_framed,
)
from .tuple_columns import constant_column, join_fields, split_fields

__all__ = ["ListOf", "MapOf", "Nullable", "Tuple"]

_AS_IS = Compatibility.COMPATIBLE_AS_IS
_MIGRATE = Compatibility.COMPATIBLE_AFTER_MIGRATION
_RECONF = Compatibility.COMPATIBLE_WITH_RECONFIGURED_SERIALIZER
_INCOMPATIBLE = Compatibility.INCOMPATIBLE


def _check_child(parent: str, child: Any) -> Serializer:
    if not isinstance(child, Serializer):
        raise InvalidArgumentError(f"{parent} expects Serializer instances, got {type(child).__name__}")
    if child.depth + 1 > MAX_NESTING_DEPTH:
        raise InvalidArgumentError(f"{parent} would nest serializers deeper than {MAX_NESTING_DEPTH} levels")
    return child


def _restore_children(snapshot: SerializerSnapshot) -> list[Serializer]:
    return [serializer_from_snapshot(c) for c in snapshot.nested]


def _wrap_invalid(prefix: str, e: InvalidArgumentError) -> InvalidArgumentError:
    return InvalidArgumentError(f"{prefix}: {e.reason}")


def _same(value: Any) -> Any:
    return value


def _is_sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray, memoryview))


# --------------------------------------------------------------------------


@register_builtin
class Nullable(Serializer):
    """A value of ``inner`` or null: 0x00, or 0x01 followed by E_inner(v) (§3.7)."""

    serializer_id = "nullable"
    version = 1

    def __init__(self, inner: Serializer) -> None:
        self.inner = _check_child("Nullable", inner)
        if isinstance(inner, Nullable):
            raise InvalidArgumentError("Nullable(Nullable(...)) is not allowed: one null flag suffices")
        self._depth = inner.depth + 1

    @property
    def nested_serializers(self) -> tuple[Serializer, ...]:
        return (self.inner,)

    @property
    def depth(self) -> int:
        return self._depth

    def encode(self, value: Any) -> bytes:
        if value is None:
            return b"\x00"
        return b"\x01" + self.inner.encode(value)

    def _decode_range(self, mv: memoryview, start: int, end: int) -> Any:
        if end <= start:
            raise corrupt(self.serializer_id, "missing null flag", start)
        flag = mv[start]
        if flag == 0:
            if end - start != 1:
                raise corrupt(
                    self.serializer_id, f"{end - start - 1} trailing bytes after the null flag", start + 1
                )
            return None
        if flag != 1:
            raise corrupt(self.serializer_id, f"null flag 0x{flag:02x} is neither 0x00 nor 0x01", start)
        return self.inner._decode_range(mv, start + 1, end)

    def arrow_type(self) -> pa.DataType:
        return self.inner.arrow_type()

    def decode_array(self, arr: pa.Array) -> pa.Array:
        """On whole buffers when the inner serializer has a vectorised path: the flags are
        checked at once and the non-null values decoded as one column. Any corrupt record
        is left to the value-by-value path, whose error names the record and offset."""
        if not getattr(self.inner, "_vectorised", False):
            return super().decode_array(arr)
        arr = binary_input(arr, self.serializer_id)
        offsets, data = binary_parts(arr)
        starts, lengths = offsets[:-1].astype(np.int64), np.diff(offsets).astype(np.int64)
        if (lengths == 0).any():
            return super().decode_array(arr)  # raises: a record without its null flag
        flags = data[starts]
        present = flags == 1
        if (flags > 1).any() or ((~present) & (lengths != 1)).any():
            return super().decode_array(arr)  # raises: a bad flag, or bytes after a null
        try:
            values = self.inner.decode_array(binary_from_ranges(*byte_ranges(data, starts[present] + 1,
                                                                             lengths[present] - 1)))
        except CorruptSavepointError:
            return super().decode_array(arr)  # raises, numbering the record among all of them
        index = np.cumsum(present) - 1
        return values.take(pa.array(index, mask=~present))

    def _to_arrow_value(self, value: Any) -> Any:
        return None if value is None else self.inner._to_arrow_value(value)

    def _from_arrow_value(self, item: Any) -> Any:
        return None if item is None else self.inner._from_arrow_value(item)

    @classmethod
    def from_snapshot(cls, snapshot: SerializerSnapshot) -> Nullable:
        check_builtin_snapshot(snapshot, nested=1)
        (inner,) = _restore_children(snapshot)
        if isinstance(inner, Nullable):
            raise CorruptSavepointError("nullable snapshot wraps another nullable")
        return cls(inner)

    def resolve_compatibility(self, old_snapshot: SerializerSnapshot) -> CompatibilityResult:
        if old_snapshot.serializer_id == "nullable":
            serializer_from_snapshot(old_snapshot)
            r = self.inner.resolve_compatibility(old_snapshot.nested[0])
            if r.kind is _RECONF:
                return CompatibilityResult(_RECONF, Nullable(r.serializer), f"nullable inner: {r.reason}")
            return CompatibilityResult(r.kind, self, f"nullable inner: {r.reason}")
        # X -> nullable(X): the flag byte changes every encoding.
        r = self.inner.resolve_compatibility(old_snapshot)
        if r.kind is _INCOMPATIBLE:
            return CompatibilityResult(_INCOMPATIBLE, self, r.reason)
        return CompatibilityResult(
            _MIGRATE,
            self,
            f"{old_snapshot.serializer_id} values become nullable; every encoding gains a 0x01 flag byte",
        )

    def value_converter(self, old: Serializer) -> Callable[[Any], Any] | None:
        convert = self.inner.value_converter(old.inner if isinstance(old, Nullable) else old)
        return None if convert is None else lambda v: None if v is None else convert(v)

    def __repr__(self) -> str:
        return f"Nullable({self.inner!r})"


# --------------------------------------------------------------------------


def _default_names(n: int) -> tuple[str, ...]:
    return tuple(f"f{i}" for i in range(n))


def _record_type(names: tuple[str, ...]) -> type[tuple[Any, ...]] | None:
    """The named tuple class decoded values of a tuple with these field names take, or None
    (plain tuples) when a name cannot be an attribute (``class``, ``_x``, ``a-b``...)."""
    if all(n.isidentifier() and not keyword.iskeyword(n) and not n.startswith("_") for n in names):
        return collections.namedtuple("Record", names)
    return None


@register_builtin
class Tuple(Serializer):
    """Fixed sequence of fields, each framed (§3.8). Snapshot version 2 names the fields.

    Values decode to named tuples of the field names (``value.count``, ``value._asdict()``)
    when the fields are named, to plain tuples when they are positional (f0, f1, ...).
    Encoding takes any sequence of the fields' values, or a mapping of the field names."""

    serializer_id = "tuple"
    version = 2

    def __init__(self, *fields: Serializer, names: Sequence[str] | None = None,
                 defaults: Mapping[str, Any] | None = None) -> None:
        if not fields:
            raise InvalidArgumentError("Tuple needs at least one field")
        if len(fields) > MAX_TUPLE_FIELDS:
            raise InvalidArgumentError(f"Tuple has {len(fields)} fields, more than {MAX_TUPLE_FIELDS}")
        self.fields: tuple[Serializer, ...] = tuple(_check_child("Tuple", f) for f in fields)
        positional_names = _default_names(len(fields))
        if names is None:
            self.names = positional_names
        else:
            if isinstance(names, str) or not _is_sequence(names):
                raise InvalidArgumentError("Tuple names must be a sequence of strings")
            names = tuple(names)
            if len(names) != len(fields):
                raise InvalidArgumentError(f"Tuple has {len(fields)} fields but {len(names)} names")
            for n in names:
                if not isinstance(n, str) or not n or not is_text(n):
                    raise InvalidArgumentError(
                        f"Tuple field names must be non-empty strings of valid Unicode text, got {n!r}")
            if len(set(names)) != len(names):
                raise InvalidArgumentError(f"Tuple field names must be unique, got {names!r}")
            self.names = names
        #: True when the fields carry only the default names f0, f1, ...
        self.positional = self.names == positional_names
        #: Decoded values are named tuples of the field names (plain tuples when positional).
        self._record = None if self.positional else _record_type(self.names)
        #: The value a migration gives each field it adds, by field name (§5.3). Not part of
        #: the snapshot: a default only matters while the migration that adds its field runs.
        self.defaults: dict[str, Any] = self._checked_defaults(defaults)
        widths = [f.fixed_width for f in self.fields]
        self._fixed = None if None in widths else sum(widths)  # type: ignore[arg-type]
        self._depth = 1 + max(f.depth for f in self.fields)

    def set_defaults(self, defaults: Mapping[str, Any]) -> None:
        """Give fields the values a migration that adds them writes (§5.3), e.g. after
        restoring the tuple from a snapshot, which holds no defaults."""
        self.defaults = {**self.defaults, **self._checked_defaults(defaults)}

    def _checked_defaults(self, defaults: Mapping[str, Any] | None) -> dict[str, Any]:
        """``defaults`` after checking each names a field and its field can encode it."""
        if defaults is None:
            return {}
        if not isinstance(defaults, Mapping):
            raise InvalidArgumentError("Tuple defaults must be a mapping from field name to value")
        unknown = sorted(map(str, set(defaults) - set(self.names)))
        if unknown:
            raise InvalidArgumentError(f"Tuple defaults name no field: {unknown}; the fields are {list(self.names)}")
        for name, value in defaults.items():
            try:
                self.fields[self.names.index(name)].encode(value)  # few defaults: index is fine
            except InvalidArgumentError as e:
                raise _wrap_invalid(f"default of tuple field {name!r}", e) from e
        return dict(defaults)

    @property
    def fixed_width(self) -> int | None:
        return self._fixed

    @property
    def nested_serializers(self) -> tuple[Serializer, ...]:
        return self.fields

    @property
    def depth(self) -> int:
        return self._depth

    def _values(self, value: Any) -> Sequence[Any]:
        if isinstance(value, Mapping):
            if set(value) != set(self.names):
                raise self._invalid(value, f"keys {sorted(map(str, value))} are not the field names {list(self.names)}")
            return [value[n] for n in self.names]
        if not _is_sequence(value):
            raise self._invalid(value)
        if len(value) != len(self.fields):
            raise self._invalid(value, f"{len(value)} items for {len(self.fields)} fields")
        return value

    def encode(self, value: Any) -> bytes:
        values = self._values(value)
        out = bytearray()
        for i, (f, v) in enumerate(zip(self.fields, values)):
            try:
                write_framed(f, v, out)
            except InvalidArgumentError as e:
                raise _wrap_invalid(f"tuple field {i} ({self.names[i]})", e) from e
        return bytes(out)

    def _decode_range(self, mv: memoryview, start: int, end: int) -> tuple[Any, ...]:
        pos = start
        out = []
        for f in self.fields:
            v, pos = read_framed(f, mv, pos, end)
            out.append(v)
        if pos != end:
            raise corrupt(self.serializer_id, f"{end - pos} trailing bytes after the last field", pos)
        return self._make(out)

    def _make(self, values: list[Any]) -> tuple[Any, ...]:
        return tuple(values) if self._record is None else self._record._make(values)  # type: ignore[attr-defined]

    def arrow_type(self) -> pa.DataType:
        return pa.struct([pa.field(n, f.arrow_type()) for n, f in zip(self.names, self.fields)])

    def decode_array(self, arr: pa.Array) -> pa.Array:
        """On whole buffers: the column is split into one column per field
        (:func:`split_fields`), each decoded by its field's own ``decode_array``. Any corrupt
        record is left to the value-by-value path, whose error names the record and offset."""
        try:
            columns = split_fields(self.fields, self.names, arr)
            children = [f.decode_array(c) for f, c in zip(self.fields, columns)]
        except CorruptSavepointError:
            return super().decode_array(arr)  # raises, naming the record and the offset
        return pa.StructArray.from_arrays(children, fields=list(self.arrow_type()))

    def _to_arrow_value(self, value: Any) -> Any:
        return {n: f._to_arrow_value(v) for n, f, v in zip(self.names, self.fields, value)}

    def _from_arrow_value(self, item: Any) -> Any:
        if isinstance(item, Mapping):
            if set(item) != set(self.names):
                raise self._invalid(item, f"struct fields {sorted(item)} are not {list(self.names)}")
            return self._make([f._from_arrow_value(item[n]) for n, f in zip(self.names, self.fields)])
        if item is None:
            return None
        return self._make([f._from_arrow_value(v) for f, v in zip(self.fields, item)])

    def snapshot(self) -> SerializerSnapshot:
        snap = super().snapshot()
        snap.field_names.extend(self.names)
        return snap

    @classmethod
    def from_snapshot(cls, snapshot: SerializerSnapshot) -> Tuple:
        check_builtin_snapshot(snapshot, nested=None, field_names=snapshot.version >= 2)
        n = len(snapshot.nested)
        if n == 0:
            raise CorruptSavepointError("tuple snapshot has no fields")
        if n > MAX_TUPLE_FIELDS:
            raise CorruptSavepointError(f"tuple snapshot has {n} fields, more than {MAX_TUPLE_FIELDS}")
        if snapshot.version == 1:
            names = None  # version 1 had no names: f0, f1, ...
        else:
            names = tuple(snapshot.field_names)
            if len(names) != n:
                raise CorruptSavepointError(
                    f"tuple snapshot has {n} fields but {len(names)} field_names"
                )
            if any(not x for x in names) or len(set(names)) != n:
                raise CorruptSavepointError(f"tuple snapshot field_names must be unique and non-empty: {names!r}")
        return cls(*_restore_children(snapshot), names=names)

    def resolve_compatibility(self, old_snapshot: SerializerSnapshot) -> CompatibilityResult:
        if old_snapshot.serializer_id != "tuple":
            return different_ids(old_snapshot, self)
        old = serializer_from_snapshot(old_snapshot)
        assert isinstance(old, Tuple)
        sources = field_sources(old, self)
        if sources != list(range(len(old.fields))):
            return self._resolve_evolution(old, old_snapshot, sources)
        results = [
            (f"field {i} ({self.names[i]})", f.resolve_compatibility(old_snapshot.nested[i]))
            for i, f in enumerate(self.fields)
        ]
        kind = combine_children(results)
        if kind is _INCOMPATIBLE or kind is _MIGRATE:
            where, r = next((w, r) for w, r in results if r.kind is kind)
            return CompatibilityResult(kind, self, f"tuple {where}: {r.reason}")
        take_old_names = self.positional and not old.positional
        if kind is _RECONF or take_old_names:
            names = old.names if take_old_names else self.names
            reconfigured = Tuple(*(r.serializer for _, r in results), names=names)
            why = [f"{w}: {r.reason}" for w, r in results if r.kind is _RECONF]
            if take_old_names:
                why.append(f"the positional tuple takes the stored field names {list(old.names)}")
            return CompatibilityResult(_RECONF, reconfigured, "tuple " + "; ".join(why))
        if old.names != self.names:
            return CompatibilityResult(
                _AS_IS, self, "tuple field names changed; names are presentation and the bytes are identical"
            )
        return CompatibilityResult(_AS_IS, self, "same tuple serializer")

    def _resolve_evolution(self, old: Tuple, old_snapshot: SerializerSnapshot, sources: list[int | None]) -> CompatibilityResult:
        """Fields added, removed or reordered (§5.3): after migration when every added field
        has a default and no kept field is incompatible (every value is rewritten by this
        serializer, so a kept field that is reconfigured or migrated is rewritten too)."""
        arity = (f"tuple arity changed from {len(old.fields)} to {len(self.fields)} fields: "
                 if len(old.fields) != len(self.fields) else "tuple ")
        added = [self.names[j] for j, i in enumerate(sources) if i is None]
        undefaulted = [n for n in added if n not in self.defaults]
        if undefaulted:
            return CompatibilityResult(_INCOMPATIBLE, self, f"{arity}added field {undefaulted[0]!r} has no default "
                                       "(give one: Tuple(..., defaults={name: value}))")
        for j, i in enumerate(sources):
            if i is None:
                continue
            r = self.fields[j].resolve_compatibility(old_snapshot.nested[i])
            if r.kind is _INCOMPATIBLE:
                return CompatibilityResult(_INCOMPATIBLE, self, f"tuple field {self.names[j]!r}: {r.reason}")
        kept = [i for i in sources if i is not None]
        removed = [n for i, n in enumerate(old.names) if i not in kept]
        changes = [f"added {added} (defaults {[self.defaults[n] for n in added]!r})"] if added else []
        changes += [f"removed {removed}"] if removed else []
        changes += ["reordered"] if kept != sorted(kept) else []
        return CompatibilityResult(_MIGRATE, self, f"{arity}fields {', '.join(changes)}; every value is rewritten")

    def migrate_column(self, old: Serializer, encoded: pa.Array) -> pa.Array | None:
        """Fields split into columns, each kept field's column migrated on its own (checked
        by decoding it, as a removed field's column is), defaults added, joined (§5.3)."""
        if not isinstance(old, Tuple):
            return None
        sources = field_sources(old, self)
        parts = split_fields(old.fields, old.names, encoded)
        moved: dict[int, pa.Array] = {}
        for j, i in enumerate(sources):
            if i is not None and resolve_compatibility(old.fields[i].snapshot(), self.fields[j]).kind is _MIGRATE:
                moved[i] = migrate_array(old.fields[i], self.fields[j], parts[i])
        for i, (field, part) in enumerate(zip(old.fields, parts)):
            if i not in moved:
                field.decode_array(part)  # refuses corrupt bytes, which would otherwise be copied or dropped
        n = len(encoded)
        columns = [constant_column(f.encode(self.defaults[name]), n) if i is None else moved.get(i, parts[i])
                   for f, name, i in zip(self.fields, self.names, sources)]
        return join_fields(self.fields, columns)

    def value_converter(self, old: Serializer) -> Callable[[Any], Any] | None:
        if not isinstance(old, Tuple):
            return None
        sources = field_sources(old, self)
        converters = [None if i is None else f.value_converter(old.fields[i]) for f, i in zip(self.fields, sources)]
        if sources == list(range(len(old.fields))) and not any(converters):
            return None
        defaults = [self.defaults.get(n) for n in self.names]

        def convert(value: tuple[Any, ...]) -> tuple[Any, ...]:
            return tuple(default if i is None else value[i] if c is None else c(value[i])
                         for i, c, default in zip(sources, converters, defaults))

        return convert

    def __repr__(self) -> str:
        inner = ", ".join(map(repr, self.fields))
        names = "" if self.positional else f", names={self.names!r}"
        defaults = f", defaults={self.defaults!r}" if self.defaults else ""
        return f"Tuple({inner}{names}{defaults})"


def field_sources(old: Tuple, new: Tuple) -> list[int | None]:
    """For each field of ``new``, the index of the field of ``old`` whose values it takes, or
    None for a field it adds (§5.3). Fields are matched by name when both tuples are named and
    either their arity differs or a name is on both sides at different positions; else by
    position (so equal arity keeps the rule that names are presentation, and a positional
    tuple, whose names f0, f1, ... are positions, gains or loses trailing fields)."""
    n = len(old.fields)
    index = {name: i for i, name in enumerate(old.names)}
    moved = any(index.get(name, j) != j for j, name in enumerate(new.names))
    if not old.positional and not new.positional and (n != len(new.fields) or moved):
        return [index.get(name) for name in new.names]
    return [j if j < n else None for j in range(len(new.fields))]


# --------------------------------------------------------------------------


@register_builtin
class ListOf(Serializer):
    """u32 count, then each element framed (§3.9)."""

    serializer_id = "list"
    version = 1

    def __init__(self, element: Serializer) -> None:
        self.element = _check_child("ListOf", element)
        self._depth = element.depth + 1

    @classmethod
    def of_list_state(cls, element: Serializer) -> ListOf:
        """The serializer of a LIST state's value column, ``list(element)`` (spec/format.md §7.1).
        The manifest stores only ``element``, and the depth limit is on stored snapshot trees
        (spec/serializers.md §7): this implied list may be one level deeper than the limit."""
        if element.depth < MAX_NESTING_DEPTH:
            return cls(element)
        implied = cls.__new__(cls)
        implied.element, implied._depth = element, element.depth + 1
        return implied

    @property
    def nested_serializers(self) -> tuple[Serializer, ...]:
        return (self.element,)

    @property
    def depth(self) -> int:
        return self._depth

    def encode(self, value: Any) -> bytes:
        if not _is_sequence(value):
            raise self._invalid(value)
        if len(value) > _U32_MAX:
            raise self._invalid(value, f"{len(value)} elements exceed the u32 count")
        out = bytearray(_U32.pack(len(value)))
        for i, v in enumerate(value):
            try:
                write_framed(self.element, v, out)
            except InvalidArgumentError as e:
                raise _wrap_invalid(f"list element {i}", e) from e
        return bytes(out)

    def _decode_range(self, mv: memoryview, start: int, end: int) -> list[Any]:
        count = read_u32(mv, start, end, "element count", self.serializer_id)
        pos = start + 4
        check_count(count, min_framed_size(self.element), pos, end, "element count", self.serializer_id)
        out = []
        for _ in range(count):
            v, pos = read_framed(self.element, mv, pos, end)
            out.append(v)
        if pos != end:
            raise corrupt(self.serializer_id, f"{end - pos} trailing bytes after the last element", pos)
        return out

    def arrow_type(self) -> pa.DataType:
        return pa.list_(self.element.arrow_type())

    def _to_arrow_value(self, value: Any) -> Any:
        return [self.element._to_arrow_value(v) for v in value]

    def _from_arrow_value(self, item: Any) -> Any:
        return None if item is None else [self.element._from_arrow_value(v) for v in item]

    @classmethod
    def from_snapshot(cls, snapshot: SerializerSnapshot) -> ListOf:
        check_builtin_snapshot(snapshot, nested=1)
        return cls(*_restore_children(snapshot))

    def resolve_compatibility(self, old_snapshot: SerializerSnapshot) -> CompatibilityResult:
        if old_snapshot.serializer_id != "list":
            return different_ids(old_snapshot, self)
        serializer_from_snapshot(old_snapshot)
        r = self.element.resolve_compatibility(old_snapshot.nested[0])
        if r.kind is _RECONF:
            return CompatibilityResult(_RECONF, ListOf(r.serializer), f"list element: {r.reason}")
        return CompatibilityResult(r.kind, self, f"list element: {r.reason}")

    def value_converter(self, old: Serializer) -> Callable[[Any], Any] | None:
        convert = self.element.value_converter(old.element) if isinstance(old, ListOf) else None
        return None if convert is None else lambda v: [convert(e) for e in v]

    def __repr__(self) -> str:
        return f"ListOf({self.element!r})"


# --------------------------------------------------------------------------


#: Built-ins whose equal values have equal encodings, so byte equality is key equality (§3.10);
#: the second line are the 1.2 additions (float32 is not: NaNs and zeros).
_KEY_IDS = frozenset({"int32", "int64", "boolean", "string", "bytes",
                      "int8", "int16", "char", "enum", "time-window", "global-window", "opaque"})


def _key_allowed(s: Serializer) -> bool:
    """Map keys need value equality that matches byte equality (§3.10)."""
    if not is_builtin_id(s.serializer_id):
        return True  # user-defined: the registrant vouches for its keys
    if s.serializer_id in _KEY_IDS:
        return True
    if isinstance(s, (Nullable, Tuple)):
        return all(_key_allowed(c) for c in s.nested_serializers)
    return False


@register_builtin
class MapOf(Serializer):
    """u32 count, then F(key) F(value) per entry in insertion order (§3.10)."""

    serializer_id = "map"
    version = 1

    def __init__(self, key: Serializer, value: Serializer) -> None:
        self.key = _check_child("MapOf", key)
        self.value = _check_child("MapOf", value)
        if not _key_allowed(key):
            raise InvalidArgumentError(
                f"MapOf key serializer {key!r} is not allowed: keys must be int32, int64, boolean, "
                f"string, bytes, or nullable/tuple of those"
            )
        self._depth = 1 + max(key.depth, value.depth)
        self._min_entry = min_framed_size(key) + min_framed_size(value)

    @property
    def nested_serializers(self) -> tuple[Serializer, ...]:
        return (self.key, self.value)

    @property
    def depth(self) -> int:
        return self._depth

    def _items(self, value: Any) -> list[tuple[Any, Any]]:
        if isinstance(value, Mapping):
            return list(value.items())
        if _is_sequence(value):  # list of (key, value) pairs, as Arrow's to_pylist gives
            items = []
            for pair in value:
                if not _is_sequence(pair) or len(pair) != 2:
                    raise self._invalid(value, "expected a mapping or a sequence of (key, value) pairs")
                items.append((pair[0], pair[1]))
            return items
        raise self._invalid(value)

    def encode(self, value: Any) -> bytes:
        items = self._items(value)
        if len(items) > _U32_MAX:
            raise self._invalid(value, f"{len(items)} entries exceed the u32 count")
        out = bytearray(_U32.pack(len(items)))
        seen: set[bytes] = set()
        for i, (k, v) in enumerate(items):
            before = len(out)
            try:
                write_framed(self.key, k, out)
            except InvalidArgumentError as e:
                raise _wrap_invalid(f"map key {i}", e) from e
            kb = bytes(out[before:])
            if kb in seen:
                raise self._invalid(value, f"duplicate key {k!r}")
            seen.add(kb)
            try:
                write_framed(self.value, v, out)
            except InvalidArgumentError as e:
                raise _wrap_invalid(f"map value {i} (key {k!r})", e) from e
        return bytes(out)

    def _decode_range(self, mv: memoryview, start: int, end: int) -> dict[Any, Any]:
        count = read_u32(mv, start, end, "entry count", self.serializer_id)
        pos = start + 4
        check_count(count, self._min_entry, pos, end, "entry count", self.serializer_id)
        out: dict[Any, Any] = {}
        for _ in range(count):
            key_pos = pos
            k, pos = read_framed(self.key, mv, pos, end)
            v, pos = read_framed(self.value, mv, pos, end)
            if k in out:
                raise corrupt(self.serializer_id, f"duplicate key {k!r}", key_pos)
            out[k] = v
        if pos != end:
            raise corrupt(self.serializer_id, f"{end - pos} trailing bytes after the last entry", pos)
        return out

    def arrow_type(self) -> pa.DataType:
        return pa.map_(self.key.arrow_type(), self.value.arrow_type())

    def _to_arrow_value(self, value: Any) -> Any:
        return [(self.key._to_arrow_value(k), self.value._to_arrow_value(v)) for k, v in value.items()]

    def _from_arrow_value(self, item: Any) -> Any:
        if item is None:
            return None
        pairs = item.items() if isinstance(item, Mapping) else item
        out = {}
        for k, v in pairs:
            key = self.key._from_arrow_value(k)
            if key in out:
                raise self._invalid(item, f"duplicate key {key!r}")
            out[key] = self.value._from_arrow_value(v)
        return out

    @classmethod
    def from_snapshot(cls, snapshot: SerializerSnapshot) -> MapOf:
        check_builtin_snapshot(snapshot, nested=2)
        key, value = _restore_children(snapshot)
        if not _key_allowed(key):
            raise CorruptSavepointError(f"map snapshot has a key serializer not allowed for keys: {key!r}")
        return cls(key, value)

    def resolve_compatibility(self, old_snapshot: SerializerSnapshot) -> CompatibilityResult:
        if old_snapshot.serializer_id != "map":
            return different_ids(old_snapshot, self)
        serializer_from_snapshot(old_snapshot)
        results = [
            ("key", self.key.resolve_compatibility(old_snapshot.nested[0])),
            ("value", self.value.resolve_compatibility(old_snapshot.nested[1])),
        ]
        kind = combine_children(results)
        if kind is _AS_IS:
            return CompatibilityResult(_AS_IS, self, "same map serializer")
        where, r = next((w, r) for w, r in results if r.kind is kind)
        if kind is _RECONF:
            return CompatibilityResult(
                _RECONF, MapOf(results[0][1].serializer, results[1][1].serializer), f"map {where}: {r.reason}"
            )
        return CompatibilityResult(kind, self, f"map {where}: {r.reason}")

    def value_converter(self, old: Serializer) -> Callable[[Any], Any] | None:
        if not isinstance(old, MapOf):
            return None
        key, value = self.key.value_converter(old.key), self.value.value_converter(old.value)
        if key is None and value is None:
            return None
        key, value = key or _same, value or _same
        # Pairs, not a dict: keys that become equal must reach encode, which refuses them (§5.3).
        return lambda v: [(key(k), value(x)) for k, x in v.items()]

    def __repr__(self) -> str:
        return f"MapOf({self.key!r}, {self.value!r})"
