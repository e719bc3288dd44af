"""The JSON serializer (spec §3.12): the UTF-8 text of one JSON document."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from pyref._proto.savepoint.v1.serializer_pb2 import SerializerSnapshot
from pyref.errors import CorruptSavepointError, InvalidArgumentError

from .base import Serializer, binary_input, check_builtin_snapshot, corrupt, register_builtin

__all__ = ["Json"]


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
            return text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise self._invalid(value, f"not encodable as UTF-8 ({e.reason})") from e

    def _decode_range(self, mv: memoryview, start: int, end: int) -> Any:
        try:
            text = str(mv[start:end], "utf-8")
        except UnicodeDecodeError as e:
            raise corrupt(self.serializer_id, f"invalid UTF-8 ({e.reason})", start + e.start) from None
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
