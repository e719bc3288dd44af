"""What a savepoint location names: one parser for paths and URLs, one resolution rule
(spec/format.md §2.1).

A location string is a URL when it starts with a scheme of two or more characters
followed by ``:/`` (``file:///sp``, ``s3://bucket/sp``); anything else is a local path,
so ``sp-2024-05-01T10:00`` is a relative directory, not a URL. URLs are parsed exactly
or refused: a query or fragment, a malformed percent escape or an unknown scheme is an
:class:`InvalidArgumentError`, never silently dropped.

A local location is resolved once, to the real absolute path of its directory
(symbolic links, ``.``, ``..``, a trailing ``/`` and relative paths all resolved), and
that identity is what writers, readers, the base guard of shallow derivations and
cleanup use: two names of one directory are one savepoint.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from .errors import InvalidArgumentError

#: URL schemes of object stores, served by obstore (S3, GCS, Azure Blob / ADLS Gen2).
OBJECT_STORE_SCHEMES = frozenset({"s3", "s3a", "s3n", "gs", "gcs", "az", "azure", "abfs", "abfss"})
#: URL schemes served by pyarrow.fs (HDFS).
ARROW_SCHEMES = frozenset({"hdfs", "viewfs"})
#: Every remote scheme; ``file`` URLs are local paths.
REMOTE_SCHEMES = OBJECT_STORE_SCHEMES | ARROW_SCHEMES
# Two characters at least: "C:/x" is a Windows drive, not a URL.
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]+):(/.*)", re.DOTALL)
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


@dataclass(frozen=True)
class Location:
    """A parsed location: ``scheme`` is ``""`` for a local path (then ``path`` is the
    resolved real path), else a remote scheme (then ``path`` is the URL without a
    trailing ``/``)."""

    scheme: str
    path: str

    @property
    def is_local(self) -> bool:
        return not self.scheme


def parse_location(location: str | os.PathLike[str]) -> Location:
    """The one parser of savepoint locations (see the module docstring)."""
    if not isinstance(location, (str, os.PathLike)):
        raise InvalidArgumentError(f"a savepoint location is a path or a URL string, got {type(location).__name__}")
    if isinstance(location, os.PathLike):  # a path object is never a URL
        return Location("", resolve_local(os.fsdecode(location)))
    match = _URL.fullmatch(location)
    if match is None:
        return Location("", resolve_local(location))
    scheme, rest = match.group(1).lower(), match.group(2)
    if "?" in rest or "#" in rest:
        raise InvalidArgumentError("a savepoint URL cannot have a query ('?') or a fragment ('#'); "
                                   "percent-encode them if they are part of the name", path=location)
    if scheme == "file":
        return Location("", resolve_local(_file_url_path(location, rest)))
    if scheme not in REMOTE_SCHEMES:
        raise InvalidArgumentError(f"unknown URL scheme {scheme!r}; use a local path, file://, or one of "
                                   f"{sorted(REMOTE_SCHEMES)} (write ./ before a relative path that looks like a URL)",
                                   path=location)
    if not rest.startswith("//") or len(rest.rstrip("/")) <= 2:
        raise InvalidArgumentError(f"a {scheme} URL is {scheme}://AUTHORITY/PATH", path=location)
    _decode(location, rest)  # refuses malformed escapes; pyarrow decodes them itself
    segments = rest[2:].rstrip("/").split("/")[1:]
    if any(s in ("", ".", "..") for s in segments):
        raise InvalidArgumentError("a savepoint URL cannot contain empty, '.' or '..' path segments", path=location)
    return Location(scheme, f"{match.group(1)}:{rest.rstrip('/')}")


def resolve_local(path: str) -> str:
    """The real absolute path of a local savepoint directory (which need not exist yet)."""
    if not path:
        raise InvalidArgumentError("empty savepoint location")
    if "\x00" in path:
        raise InvalidArgumentError("a savepoint path cannot contain a NUL character", path=repr(path))
    return os.path.realpath(path)


def _file_url_path(url: str, rest: str) -> str:
    """The local path of a ``file:`` URL: ``file:///p``, ``file://localhost/p`` or ``file:/p``."""
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        if authority not in ("", "localhost"):
            raise InvalidArgumentError(f"file URL names host {authority!r}; only local files are file URLs", path=url)
        rest = slash + path
    return _decode(url, rest)


def _decode(url: str, text: str) -> str:
    """``text`` with every ``%XX`` escape decoded (bytes that are not UTF-8 kept as the
    filesystem encoding keeps them); a ``%`` not followed by two hex digits is refused."""
    if "%" in _ESCAPE.sub("", text):
        raise InvalidArgumentError("malformed percent escape in URL ('%' must be followed by two hex digits)",
                                   path=url)
    return os.fsdecode(unquote_to_bytes(os.fsencode(text)))
