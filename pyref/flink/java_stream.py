"""Stepping over one Java Object Serialization stream (``ObjectOutputStream``), never reading it.

The table runtime writes parts of its serializer snapshots with
``InstantiationUtil.serializeObject``: one stream each (magic ``0xACED``,
version 5, one object). pyref only needs where such a stream ends, so this walks
the grammar of the Java Object Serialization Specification (section 6.4):
class descriptors (with the handle table, so a back reference to a descriptor
still tells which fields its objects have), field values by their type codes,
arrays by the component code of their class name, block data and the
annotations ``writeObject`` / ``writeExternal`` write, strings, enums, classes,
back references and nulls. Nothing is loaded or instantiated: the walk only
counts bytes, and returns the class name of the top-level object to describe it.

Hostile bytes cost a typed error, never more: nesting is bounded
(:data:`MAX_DEPTH`, and class hierarchies by :data:`MAX_HIERARCHY`), every count is
checked against the bytes left before anything is looped over, and each step
consumes input, so the work is linear in the stream.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import CorruptSavepointError, UnsupportedFormatError
from .datainput import DataInput

__all__ = ["skip_java_stream", "JAVA_STREAM_MAGIC", "MAX_DEPTH", "MAX_HIERARCHY"]

#: ``STREAM_MAGIC`` then ``STREAM_VERSION`` (5): how every ``ObjectOutputStream`` starts.
JAVA_STREAM_MAGIC = b"\xac\xed\x00\x05"
#: How deep objects, arrays and class descriptors may nest in one stream (Flink's
#: LogicalTypes and serializers nest a few levels per type level; deeper is refused).
MAX_DEPTH = 64
#: How many classes one object's hierarchy may have (Java's own are far shallower).
MAX_HIERARCHY = 64

_TC_NULL, _TC_REFERENCE, _TC_CLASSDESC, _TC_OBJECT, _TC_STRING, _TC_ARRAY, _TC_CLASS = range(0x70, 0x77)
_TC_BLOCKDATA, _TC_ENDBLOCKDATA, _TC_RESET, _TC_BLOCKDATALONG, _TC_EXCEPTION = range(0x77, 0x7C)
_TC_LONGSTRING, _TC_PROXYCLASSDESC, _TC_ENUM = range(0x7C, 0x7F)
_BASE_HANDLE = 0x7E0000
_SC_WRITE_METHOD, _SC_SERIALIZABLE, _SC_EXTERNALIZABLE, _SC_BLOCK_DATA = 0x01, 0x02, 0x04, 0x08
#: Bytes of a primitive field by its type code.
_PRIMITIVE_SIZES = {ord("B"): 1, ord("Z"): 1, ord("C"): 2, ord("S"): 2, ord("I"): 4, ord("F"): 4, ord("J"): 8,
                    ord("D"): 8}
_OBJECT_CODES = frozenset({ord("L"), ord("[")})


@dataclass
class _ClassDesc:
    """What an object of a class descriptor takes: its own slot's bytes, then its superclass's."""

    name: str
    flags: int = 0
    primitive_bytes: int = 0  # every primitive field's value, written first
    object_fields: int = 0  # then one object per object field
    parent: _ClassDesc | None = None
    hierarchy: int = 1  # classes from this one up to the top
    complete: bool = False  # its super descriptor was read: objects of it may follow


class _Other:
    """A handle that is not a class descriptor (a string, an object, an array...)."""


_OTHER = _Other()


class _Walk:
    def __init__(self, inp: DataInput, what: str) -> None:
        self.inp = inp
        self.what = what
        self.start = inp.pos
        self.handles: list[_ClassDesc | _Other] = []

    def corrupt(self, reason: str, at: int) -> CorruptSavepointError:
        return self.inp.corrupt(f"{self.what}: {reason}", at, max(self.inp.pos - at, 1))

    def unsupported(self, reason: str, at: int) -> UnsupportedFormatError:
        return UnsupportedFormatError(f"{self.what}: {reason}", path=self.inp.path, state=self.inp.state,
                                      byte_range=(self.inp.base + at, self.inp.base + self.inp.pos))

    def deeper(self, depth: int, at: int) -> int:
        if depth >= MAX_DEPTH:
            raise self.unsupported(f"Java objects nested more than {MAX_DEPTH} levels deep", at)
        return depth + 1

    def count(self, n: int, each: int, what: str, at: int) -> int:
        if n < 0 or n * each > self.inp.remaining():
            raise self.corrupt(f"{what} {n} is impossible with {self.inp.remaining()} bytes left", at)
        return n

    # -- contents ----------------------------------------------------------------------

    def object(self, depth: int) -> str | None:
        """One ``object`` of the grammar; the class name of a new object, array or enum."""
        inp = self.inp
        at = inp.pos
        tc = inp.read_ubyte("Java serialization type code")
        if tc == _TC_NULL:
            return None
        if tc == _TC_REFERENCE:
            self.handle(at)
            return None
        if tc in (_TC_STRING, _TC_LONGSTRING):
            self.string_body(tc, at)
            return "java.lang.String"
        if tc in (_TC_CLASSDESC, _TC_PROXYCLASSDESC):
            inp.pos = at
            self.class_desc(depth)
            return None
        depth = self.deeper(depth, at)
        if tc == _TC_CLASS:
            self.class_desc(depth)
            self.handles.append(_OTHER)
            return "java.lang.Class"
        if tc == _TC_ENUM:
            desc = self.class_desc(depth)
            self.handles.append(_OTHER)
            self.object(depth)  # the constant's name, a string
            return desc.name if desc else None
        if tc == _TC_ARRAY:
            return self.array(depth, at)
        if tc == _TC_OBJECT:
            return self.new_object(depth, at)
        if tc == _TC_EXCEPTION:
            raise self.unsupported("the stream holds an exception its writer hit", at)
        raise self.corrupt(f"type code 0x{tc:02x} where an object belongs", at)

    def handle(self, at: int) -> _ClassDesc | _Other:
        index = self.inp.read_int("Java serialization handle") - _BASE_HANDLE
        if not 0 <= index < len(self.handles):
            raise self.corrupt(f"back reference to handle {index} of {len(self.handles)}", at)
        return self.handles[index]

    def string_body(self, tc: int, at: int) -> None:
        inp = self.inp
        n = inp.read_ushort("Java string length") if tc == _TC_STRING else inp.read_long("Java long string length")
        inp.skip(self.count(n, 1, "Java string length", at), "Java string")
        self.handles.append(_OTHER)

    def annotation(self, depth: int) -> None:
        """Block data and objects up to ``TC_ENDBLOCKDATA`` (what writeObject/writeExternal or
        annotateClass wrote)."""
        inp = self.inp
        while True:
            at = inp.pos
            tc = inp.read_ubyte("Java serialization type code")
            if tc == _TC_ENDBLOCKDATA:
                return
            if tc == _TC_BLOCKDATA:
                inp.skip(inp.read_ubyte("block data length"), "block data")
            elif tc == _TC_BLOCKDATALONG:
                inp.skip(self.count(inp.read_int("block data length"), 1, "block data length", at), "block data")
            else:
                inp.pos = at
                self.object(depth)

    # -- class descriptors --------------------------------------------------------------

    def class_desc(self, depth: int) -> _ClassDesc | None:
        """``classDesc``: a new (proxy) descriptor, a back reference to one, or null."""
        inp = self.inp
        at = inp.pos
        tc = inp.read_ubyte("Java class descriptor type code")
        if tc == _TC_NULL:
            return None
        if tc == _TC_REFERENCE:
            desc = self.handle(at)
            if not isinstance(desc, _ClassDesc) or not desc.complete:
                raise self.corrupt("back reference to something that is not a class descriptor", at)
            return desc
        if tc not in (_TC_CLASSDESC, _TC_PROXYCLASSDESC):
            raise self.corrupt(f"type code 0x{tc:02x} where a class descriptor belongs", at)
        depth = self.deeper(depth, at)
        if tc == _TC_PROXYCLASSDESC:
            desc = _ClassDesc("<proxy>", _SC_SERIALIZABLE)
            self.handles.append(desc)
            for _ in range(self.count(inp.read_int("proxy interface count"), 2, "proxy interface count", at)):
                inp.read_utf("proxy interface")
        else:
            desc = _ClassDesc(inp.read_utf("Java class name"))
            inp.skip(8, "serialVersionUID")
            self.handles.append(desc)
            desc.flags = inp.read_ubyte("class descriptor flags")
            if desc.flags & _SC_SERIALIZABLE and desc.flags & _SC_EXTERNALIZABLE:
                raise self.corrupt(f"class {desc.name} is both Serializable and Externalizable", at)
            self.fields(desc, depth)
        self.annotation(depth)
        parent = self.class_desc(depth)
        if parent is not None:
            if parent.hierarchy >= MAX_HIERARCHY:
                raise self.unsupported(f"a class hierarchy deeper than {MAX_HIERARCHY}", at)
            desc.parent, desc.hierarchy = parent, parent.hierarchy + 1
        desc.complete = True
        return desc

    def fields(self, desc: _ClassDesc, depth: int) -> None:
        inp = self.inp
        at = inp.pos
        for _ in range(self.count(inp.read_short("field count"), 3, "field count", at)):
            field_at = inp.pos
            code = inp.read_ubyte("field type code")
            inp.read_utf("field name")
            if code in _PRIMITIVE_SIZES:
                desc.primitive_bytes += _PRIMITIVE_SIZES[code]
            elif code in _OBJECT_CODES:
                desc.object_fields += 1
                type_at = inp.pos
                if inp.read_ubyte("field type") not in (_TC_STRING, _TC_LONGSTRING, _TC_REFERENCE):
                    raise self.corrupt("a field's type is not a string", type_at)
                inp.pos = type_at
                self.object(depth)
            else:
                raise self.corrupt(f"field type code 0x{code:02x}", field_at)

    # -- new objects and arrays ---------------------------------------------------------

    def new_object(self, depth: int, at: int) -> str:
        desc = self.class_desc(depth)
        if desc is None:
            raise self.corrupt("an object without a class descriptor", at)
        self.handles.append(_OTHER)
        if desc.flags & _SC_EXTERNALIZABLE:
            if not desc.flags & _SC_BLOCK_DATA:
                raise self.unsupported(f"{desc.name} is Externalizable written without block data (protocol 1): "
                                       "only its own code knows where it ends", at)
            self.annotation(depth)
            return desc.name
        hierarchy: list[_ClassDesc] = []
        cls: _ClassDesc | None = desc
        while cls is not None:
            hierarchy.append(cls)
            cls = cls.parent
        for cls in reversed(hierarchy):  # each class's data, top superclass first
            if not cls.flags & _SC_SERIALIZABLE:
                continue
            self.inp.skip(cls.primitive_bytes, f"{cls.name} primitive fields")
            for _ in range(cls.object_fields):
                self.object(depth)
            if cls.flags & _SC_WRITE_METHOD:
                self.annotation(depth)
        return desc.name

    def array(self, depth: int, at: int) -> str:
        inp = self.inp
        desc = self.class_desc(depth)
        if desc is None or len(desc.name) < 2 or desc.name[0] != "[":
            raise self.corrupt("an array whose class is not an array class", at)
        self.handles.append(_OTHER)
        code = ord(desc.name[1])
        size_at = inp.pos
        size = inp.read_int("array length")
        if code in _PRIMITIVE_SIZES:
            inp.skip(self.count(size, _PRIMITIVE_SIZES[code], "array length", size_at) * _PRIMITIVE_SIZES[code],
                     "array elements")
        elif code in _OBJECT_CODES:
            for _ in range(self.count(size, 1, "array length", size_at)):
                self.object(depth)
        else:
            raise self.corrupt(f"array class {desc.name!r}", at)
        return desc.name


def skip_java_stream(inp: DataInput, what: str) -> str | None:
    """Move ``inp`` past one whole ``ObjectOutputStream`` (header and one object) and return
    the class name of that object (``None`` for null or a back reference).

    Raises :class:`~pyref.errors.CorruptSavepointError` for bytes that are not such a
    stream, :class:`~pyref.errors.UnsupportedFormatError` for one whose end only the
    classes in it could find (an exception, protocol-1 ``Externalizable``) or too deep."""
    start = inp.pos
    if inp.read_bytes(4, f"{what} header") != JAVA_STREAM_MAGIC:
        raise inp.corrupt(f"{what}: no Java serialization stream", start, 4)
    walk = _Walk(inp, what)
    while inp.read_ubyte("Java serialization type code") == _TC_RESET:  # resets only before the object
        walk.handles.clear()
    inp.pos -= 1
    return walk.object(0)
