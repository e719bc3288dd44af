"""The values of Flink's Scala API serializers (``flink-scala``, Flink 1.x), decoded.

A job written against the Scala API (``org.apache.flink.api.scala``, removed in Flink 2.0)
keeps its state with the serializers of ``org.apache.flink.api.scala.typeutils``. Their
snapshots (:mod:`pyref.flink.serializers` parses them into the ``scala-*`` kinds) are composites
but for the enumeration's, Unit's and Nothing's; their values are written without any length:

=====================  ==========================================================================
kind                   Flink's bytes (Python value)
=====================  ==========================================================================
scala-case-class       the fields in order, nothing else (a tuple; the snapshot names the class,
                       not the fields)
scala-option           boolean: true for ``Some``, then the value (the value, or ``None``)
scala-either           boolean: true for ``Left``, then the left or right value
                       (``{"left": v}`` or ``{"right": v}``)
scala-try              boolean: true for ``Success``, then the value; false: the ``Throwable`` by
                       Kryo, whose length is not stored (``{"success": v}``, or ``{"failure":
                       bytes}`` when the failure ends the cell)
scala-traversable      int element count, per element a boolean (true: present) and the element
                       (a list; a ``dict`` when the collection is a ``Map`` of 2-field tuples)
scala-enum             int: the ``Enumeration`` value's id (its name, from the snapshot)
scala-unit             one byte, 0 (``None``)
scala-nothing          no value can be written (a ``None`` of ``Option[Nothing]`` holds none)
=====================  ==========================================================================

``TraversableSerializerSnapshot`` carries Scala source (``cbfCode``) that Flink compiles to build
the collection on restore. pyref keeps it as text and never evaluates it: it only reads, from the
text, which collection it names (:func:`~pyref.flink.serializers.traversable_collection`).
"""

from __future__ import annotations

from typing import Any, Callable

from .datainput import DataInput
from .serializers import FlinkType, traversable_collection

__all__ = ["SCALA_KINDS", "scala_reader"]

Read = Callable[[DataInput], Any]


def _is_map(type_: FlinkType) -> bool:
    """A traversable whose elements are (key, value) pairs of a ``Map``: decoded as a dict."""
    collection = traversable_collection(type_.cbf_code or "") or ""
    element = type_.children[0]
    return (collection.split("[", 1)[0].rsplit(".", 1)[-1].endswith("Map")
            and element.kind == "scala-case-class" and len(element.children) == 2)


def _traversable(type_: FlinkType, element: Read) -> Read:
    as_dict = _is_map(type_)

    def read(inp: DataInput) -> list | dict:
        out: list[Any] = [element(inp) if inp.read_bool("collection element presence") else None
                          for _ in range(inp.read_count("collection length", 1))]
        if not as_dict or None in out:  # a null element is no (key, value) pair: keep the list
            return out
        try:
            return dict(out)
        except TypeError:  # an unhashable key (a list, a dict): keep the pairs
            return out

    return read


def _option(element: Read) -> Read:
    return lambda inp: element(inp) if inp.read_bool("Option presence") else None


def _either(left: Read, right: Read) -> Read:
    return lambda inp: {"left": left(inp)} if inp.read_bool("Either side") else {"right": right(inp)}


def _try(element: Read, throwable: Read) -> Read:
    return lambda inp: {"success": element(inp)} if inp.read_bool("Try outcome") else {"failure": throwable(inp)}


def _enum(type_: FlinkType) -> Read:
    names = dict(zip(type_.symbol_ids, type_.symbols))

    def read(inp: DataInput) -> str:
        start = inp.pos
        value_id = inp.read_int("Enumeration value id")
        if value_id not in names:
            raise inp.corrupt(f"Enumeration value id {value_id} is none of {type_.type_name}'s {len(names)} values",
                              start, 4)
        return names[value_id]

    return read


def _unit(inp: DataInput) -> None:
    start = inp.pos
    if inp.read_ubyte("Unit") != 0:
        raise inp.corrupt("a Unit value is not the byte 0", start, 1)


def _nothing(inp: DataInput) -> None:
    raise inp.corrupt("a value of Scala's Nothing, which has none")


#: Each Scala kind: how its reader is built from its type and its nested serializers' readers (Flink's order).
_BUILDERS: dict[str, Callable[..., Read]] = {
    "scala-case-class": lambda t, *fields: lambda inp: tuple(f(inp) for f in fields),
    "scala-option": lambda t, element: _option(element),
    "scala-either": lambda t, left, right: _either(left, right),
    "scala-try": lambda t, element, throwable: _try(element, throwable),
    "scala-traversable": _traversable,
    "scala-enum": _enum,
    "scala-unit": lambda t: _unit,
    "scala-nothing": lambda t: _nothing,
}
SCALA_KINDS = frozenset(_BUILDERS)


def _value_of_no_bytes(type_: FlinkType) -> tuple[Any, ...] | None:
    """The one value of a case class whose fields all take no bytes (Flink writes nothing for a
    case class without fields), or None when its values take bytes."""
    if type_.kind != "scala-case-class":
        return None
    fields = [_value_of_no_bytes(child) for child in type_.children]
    return None if any(field is None for field in fields) else tuple(fields)


def scala_reader(type_: FlinkType, children: list[Read]) -> Read:
    """The reader of one value of ``type_`` (a Scala kind) whose nested serializers read ``children``."""
    value = _value_of_no_bytes(type_)
    if value is not None:
        # Built once and shared: read per value, a case class of thousands of empty fields made
        # each element of a collection (one byte) cost thousands of objects.
        return lambda inp: value
    return _BUILDERS[type_.kind](type_, *children)
