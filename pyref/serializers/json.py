"""The JSON serializer (spec §3.12): the UTF-8 text of one JSON document."""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa

from pyref._proto.savepoint.v1.serializer_pb2 import SerializerSnapshot
from pyref.errors import CorruptSavepointError, InvalidArgumentError

from .base import Serializer, binary_input, check_builtin_snapshot, corrupt, register_builtin

__all__ = ["Json", "MAX_JSON_DEPTH"]

#: Deepest nesting of arrays and objects a JSON value may have (spec §3.12): ``[]`` is
#: depth 1. One number every reader accepts and refuses alike, far below any parser's
#: own recursion limit, which differs between languages and Python versions.
MAX_JSON_DEPTH = 64
#: A JSON string (its brackets are text, not nesting), or one bracket.
_STRING_OR_BRACKET = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def nested_too_deep(text: bytes) -> bool:
    """Whether ``text`` nests arrays and objects deeper than :data:`MAX_JSON_DEPTH`, counted
    without recursion; brackets inside strings do not count. Only a value with more than
    that many opening brackets at all is scanned."""
    if text.count(b"[") + text.count(b"{") <= MAX_JSON_DEPTH:
        return False
    depth = 0
    for m in _STRING_OR_BRACKET.finditer(text):
        token = m.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return True
        elif token in (b"]", b"}"):
            depth -= 1
    return False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@register_builtin
class Json(Serializer):
    """A JSON value: dict (str keys), list, str, int, float, bool or None.

    E(v) = UTF-8 of ``json.dumps(v, separators=(",", ":"), ensure_ascii=False,
    allow_nan=False)``. Decoding accepts any valid JSON text (RFC 8259).
    """

    serializer_id = "json"
    version = 1

    def encode(self, value: Any) -> bytes:
        try:
            text = _dumps(value)
        except (TypeError, ValueError, RecursionError) as e:
            raise self._invalid(value, str(e)) from e
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise self._invalid(value, f"not encodable as UTF-8 ({e.reason})") from e
        if nested_too_deep(data):
            raise self._invalid(value, f"nested deeper than {MAX_JSON_DEPTH} levels of arrays and objects")
        return data

    def _decode_range(self, mv: memoryview, start: int, end: int) -> Any:
        try:
            text = str(mv[start:end], "utf-8")
        except UnicodeDecodeError as e:
            raise corrupt(self.serializer_id, f"invalid UTF-8 ({e.reason})", start + e.start) from None
        if nested_too_deep(bytes(mv[start:end])):
            raise corrupt(self.serializer_id, f"JSON nested deeper than {MAX_JSON_DEPTH} levels of arrays and "
                          "objects", start)
        try:
            return json.loads(text, parse_constant=_reject_constant)
        except json.JSONDecodeError as e:
            offset = start + len(text[: e.pos].encode("utf-8"))
            raise corrupt(self.serializer_id, f"invalid JSON ({e.msg})", offset) from None
        except (ValueError, RecursionError) as e:
            raise corrupt(self.serializer_id, f"invalid JSON ({e})", start) from None

    def arrow_type(self) -> pa.DataType:
        return pa.string()

    def _to_arrow_value(self, value: Any) -> Any:
        return _dumps(value)

    def _from_arrow_value(self, item: Any) -> Any:
        if item is None:
            raise InvalidArgumentError("json serializer: a null Arrow entry is not a JSON text; use Nullable")
        try:
            return self.decode(item.encode("utf-8"))
        except CorruptSavepointError as e:
            raise InvalidArgumentError(e.reason) from e
        except UnicodeEncodeError as e:
            raise InvalidArgumentError(f"json serializer: text is not valid UTF-8 ({e.reason})") from e

    def decode_array(self, arr: pa.Array) -> pa.Array:
        arr = binary_input(arr, self.serializer_id)
        for i, b in enumerate(arr.to_pylist()):  # validate every record parses
            try:
                self.decode(b)
            except CorruptSavepointError as e:
                raise CorruptSavepointError(f"record {i}: {e.reason}") from e
        return arr.cast(pa.large_string() if pa.types.is_large_binary(arr.type) else pa.string())

    @classmethod
    def from_snapshot(cls, snapshot: SerializerSnapshot) -> Json:
        check_builtin_snapshot(snapshot)
        return cls()
