"""HDFS (``hdfs://``, ``viewfs://``) through pyarrow.fs, and ``file://`` URLs for testing
the same code path on pyarrow's local filesystem.

pyarrow's HDFS client can neither create a file only if it is absent nor rename
without replacing, and HDFS has no lock a writer could take through it: the commit
writes the manifest aside and renames it into place after comparing the current
manifest with the one the writer started from, which is best effort against a
racing writer (spec/format.md §10.6).
"""

from __future__ import annotations

import contextlib
import uuid
from urllib.parse import quote

from ..errors import InvalidArgumentError, SavepointNotFoundError
from ..location import ARROW_SCHEMES, parse_location
from .base import (
    MANIFEST_NAME,
    FileStat,
    OutputFile,
    SavepointIO,
    UrlSavepointIO,
    changed_since_start,
    check_relative_path,
    listed_name,
    typed_os_error,
    typed_os_errors,
)
from .local import confined_path, confined_sibling


class _ArrowOutput(OutputFile):
    def __init__(self, stream, rel: str) -> None:
        self.path = rel
        self._stream = stream

    def write(self, data: bytes) -> None:
        self._stream.write(data)

    def tell(self) -> int:
        return self._stream.tell()

    def close(self) -> None:
        if not self._stream.closed:
            self._stream.close()


class ArrowIO(UrlSavepointIO):
    """A savepoint directory on a filesystem pyarrow.fs reaches."""

    def __init__(self, uri: str) -> None:
        import pyarrow.fs as pafs

        parsed = parse_location(uri)
        if parsed.scheme not in ("", *ARROW_SCHEMES):
            raise InvalidArgumentError(f"{parsed.scheme}:// is served by ObjectStoreIO (conditional writes), not "
                                       "pyarrow.fs; use open_io", path=uri)
        self._local = parsed.is_local
        if parsed.is_local:  # a file:// URL: pyarrow's local filesystem, at the resolved path
            self.fs, self.root, self.location = pafs.LocalFileSystem(), parsed.path, f"file://{quote(parsed.path)}"
        else:
            with typed_os_errors("cannot reach the store", parsed.path):
                self.fs, root = pafs.FileSystem.from_uri(parsed.path)
            self.root, self.location = root.rstrip("/"), parsed.path

    def sibling(self, name: str) -> SavepointIO:
        if self._local:  # a base name that is a link leads nowhere else, as LocalIO
            confined_sibling(self.root, name)
        return super().sibling(name)

    def _full(self, rel: str) -> str:
        check_relative_path(rel)
        if self._local:  # no link out of the directory, as LocalIO (pyarrow follows them)
            confined_path(self.root, rel, self.describe(rel))
        return f"{self.root}/{rel}"

    def stat(self, rel: str) -> FileStat | None:
        import pyarrow.fs as pafs

        with typed_os_errors("cannot stat the file", self.describe(rel)):
            info = self.fs.get_file_info(self._full(rel))
        if info.type == pafs.FileType.NotFound:
            return None
        return FileStat(info.size, None if info.mtime is None else info.mtime.timestamp())

    def read_range(self, rel: str, offset: int, length: int) -> bytes:
        try:
            f = self.fs.open_input_file(self._full(rel))
        except FileNotFoundError:
            raise SavepointNotFoundError("file does not exist", path=self.describe(rel)) from None
        except OSError as exc:
            raise typed_os_error(exc, "cannot open the file", self.describe(rel)) from None
        with f, typed_os_errors(f"cannot read bytes {offset}..{offset + length}", self.describe(rel)):
            return self._whole(rel, offset, length, f.read_at(length, offset))

    def create(self, rel: str) -> OutputFile:
        full = self._full(rel)
        with typed_os_errors("cannot create the file", self.describe(rel)):
            self.fs.create_dir(full.rsplit("/", 1)[0], recursive=True)
            if self.size(rel) is not None:
                raise FileExistsError(self.describe(rel))
            return _ArrowOutput(self.fs.open_output_stream(full), rel)

    def delete(self, rel: str) -> None:
        with typed_os_errors("cannot delete the file", self.describe(rel)), contextlib.suppress(FileNotFoundError):
            self.fs.delete_file(self._full(rel))

    def list_files(self, rel_dir: str) -> list[str]:
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self._full(rel_dir) if rel_dir else self.root, allow_not_found=True)
        with typed_os_errors("cannot list the directory", self.describe(rel_dir)):
            infos = self.fs.get_file_info(selector)
        return sorted(listed_name(rel_dir, i.base_name) for i in infos if i.type == pafs.FileType.File)

    def commit_file(self, rel: str, data: bytes, expected_previous: bytes | None) -> None:
        # HDFS has no conditional rename: the check narrows the race, it cannot close it (§10.5).
        if self.read_if_present(rel) != expected_previous:
            raise changed_since_start(rel, self.describe(rel))
        self.replace_file(rel, data)

    def replace_file(self, rel: str, data: bytes) -> None:
        full = self._full(rel)
        with typed_os_errors("cannot write the file", self.describe(rel)):
            self.fs.create_dir(full.rsplit("/", 1)[0], recursive=True)
            # Write aside, then rename over the old file: readers never see a partial one.
            tmp = f"{full}.{uuid.uuid4().hex}.tmp"
            with self.fs.open_output_stream(tmp) as f:
                f.write(data)
            self.fs.move(tmp, full)

    def _open(self, location: str) -> ArrowIO:
        return ArrowIO(location)
