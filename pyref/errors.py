"""The typed errors every pyref operation raises.

Each error names where the problem is: the file, the state and the byte range
when they are known, so that a message alone tells an operator what broke.
The hierarchy is small on purpose; callers catch :class:`SavepointError` for
"anything wrong with this savepoint" or one subclass for a specific remedy.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any


class SavepointError(Exception):
    """Base class of every error pyref raises about a savepoint or its use."""

    #: Exit code the ``pyref`` command line uses for this kind of error.
    exit_code = 1

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        state: str | None = None,
        byte_range: tuple[int, int] | None = None,
    ) -> None:
        self.reason = message
        self.path = path
        self.state = state
        self.byte_range = byte_range
        super().__init__(self._format())

    def _format(self) -> str:
        where = []
        if self.path is not None:
            where.append(f"file={self.path}")
        if self.state is not None:
            where.append(f"state={self.state}")
        if self.byte_range is not None:
            start, end = self.byte_range
            where.append(f"bytes={start}..{end}")
        return f"{self.reason} [{', '.join(where)}]" if where else self.reason


@contextmanager
def locating(*, path: str | None = None, state: str | None = None,
             byte_range: tuple[int, int] | None = None) -> Iterator[None]:
    """Errors raised inside name ``path``, ``state`` and ``byte_range`` where they named none:
    a cell decoder knows the bytes it was given, not the state or the file they came from."""
    try:
        yield
    except SavepointError as exc:
        if exc.path is None and exc.byte_range is None:  # a range of other bytes would not be of this file
            exc.path, exc.byte_range = path, byte_range
        exc.state = exc.state if exc.state is not None else state
        exc.args = (exc._format(),)
        raise


class CorruptSavepointError(SavepointError):
    """The bytes on disk are not a valid savepoint: bad checksum, truncated
    file, malformed structure, or a reference that does not resolve."""

    exit_code = 3


class SavepointNotFoundError(SavepointError, FileNotFoundError):
    """No committed savepoint exists at the path (no manifest)."""

    exit_code = 4


class UnsupportedFormatError(SavepointError):
    """The savepoint is valid but needs something this reader lacks: a newer
    major format version, an unknown required feature, an unknown codec or an
    unregistered serializer."""

    exit_code = 5


class IncompatibleSerializerError(SavepointError):
    """A new serializer cannot read the state written with the stored one."""

    exit_code = 6


class InvalidArgumentError(SavepointError, ValueError):
    """The caller asked for something impossible (parallelism out of range,
    unknown operator or state, duplicate name, wrong value type...)."""

    exit_code = 2


def unknown_names(what: str, unknown: Iterable[str], known: Iterable[str], **context: Any) -> InvalidArgumentError:
    """The error for names (``what``: "operators", "states"...) a caller gave that match
    nothing: it lists the ones there are, so a typo is seen and fixed at once."""
    return InvalidArgumentError(f"no such {what}: {sorted(unknown)}; the {what} are {', '.join(known) or 'none'}",
                                **context)


class ConcurrentWriteError(SavepointError):
    """Another process changed the savepoint while this one worked: a writer committed
    or holds the commit lock too long, ``pyref clean`` deleted this writer's files, or
    the savepoint being read was replaced while reading."""

    exit_code = 7


class StorageError(SavepointError, OSError):
    """The storage failed (I/O error, permission denied, disk full, too many open
    files...): a statement about the disk or the store, not about the savepoint's
    bytes, which may be intact. Retrying later may succeed."""

    exit_code = 8


class MissingDependencyError(SavepointError, ImportError):
    """An optional package a command needs is not installed (pyspark for the Spark
    commands, obstore for object stores); the message names the extra to install."""

    exit_code = 9
