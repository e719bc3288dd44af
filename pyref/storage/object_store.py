"""Object stores (S3, GCS, Azure Blob / ADLS Gen2) through obstore, with the commit
protocol of spec/format.md §10.5.

Object stores have no rename and no lock, but they write one object atomically and
can make that write conditional: ``_manifest`` is created only if absent
(``If-None-Match: *`` on S3 and Azure, generation 0 on GCS) and replaced only if it
is still the version the writer read when it started (its ETag, or its generation
on GCS). So a racing writer is refused with :class:`ConcurrentWriteError`, whatever
the store. Chunks are read by ranged GETs of exactly their bytes; data files are
written by multipart upload, which the store shows only once it is complete.

Credentials and endpoints come from each store's usual environment (``AWS_*``,
``GOOGLE_*``, ``AZURE_*`` variables, instance metadata), never from a savepoint.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from datetime import timedelta

from ..errors import (
    CorruptSavepointError,
    InvalidArgumentError,
    MissingDependencyError,
    SavepointError,
    SavepointNotFoundError,
    StorageError,
)
from ..location import OBJECT_STORE_SCHEMES, parse_location
from .base import MANIFEST_NAME, FileStat, OutputFile, UrlSavepointIO, changed_since_start, check_relative_path

#: How obstore retries a failing request: server errors (500, 503 SlowDown), dropped
#: connections and timeouts, with exponential backoff and jitter, and never longer than
#: ``retry_timeout`` after the first attempt. spec/format.md §10.5 counts on that bound:
#: a manifest write ends (published or failed) within minutes.
RETRY = {
    "max_retries": 10,
    "retry_timeout": timedelta(minutes=3),
    "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=15), "base": 2},
}
#: Multipart upload part size, and how many parts upload at once per file: a writer's
#: upload buffers stay within PART_BYTES * (UPLOAD_CONCURRENCY + 1).
PART_BYTES = 8 << 20
UPLOAD_CONCURRENCY = 4
#: Ranged GETs a reader keeps in flight (each waits on the network, not on a core).
READ_CONCURRENCY = 16
#: obstore's URL schemes for ours (it reads s3a:// itself, not s3n:// or gcs://).
_NATIVE_SCHEME = {"s3n": "s3", "gcs": "gs"}


def _obstore():
    try:
        import obstore
        import obstore.store  # noqa: F401  (from_url)
    except ImportError as exc:
        raise MissingDependencyError(
            f"object stores need obstore: pip install 'pyref-savepoint[object-store]' ({exc})") from None
    return obstore


#: Where a store's client turns for credentials when the environment has none: AWS's and
#: GCP's instance metadata services (obstore's error then names only that request).
_METADATA_SERVICES = ("169.254.169.254", "metadata.google.internal")


#: The error codes in a store's 404 body that say the bucket or container itself is missing
#: (S3 and GCS's XML API, Azure), not the object.
_MISSING_BUCKET_CODES = ("<Code>NoSuchBucket</Code>", "<Code>ContainerNotFound</Code>")


def _missing_bucket(exc: BaseException) -> bool:
    return any(code in str(exc) for code in _MISSING_BUCKET_CODES)


def _message(exc: BaseException) -> str:
    """The first line of obstore's message (the rest is a debug dump of the request)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if any(host in first for host in _METADATA_SERVICES):
        first += (" (no credentials in the environment, so the instance metadata service was asked: set the "
                  "store's, e.g. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for S3, GOOGLE_APPLICATION_CREDENTIALS "
                  "for GCS, AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY for Azure)")
    if _missing_bucket(exc):
        first = f"the bucket (container) does not exist: {first}"
    elif "builder error" in first and re.search(r"Error performing \w+ http://", first):
        first += " (the client refuses plain HTTP unless allowed: AWS_ALLOW_HTTP=true for an http:// S3 endpoint)"
    return first


def _is_not_found(exc: BaseException) -> bool:
    """The object is not there (its bucket is: a missing bucket is the store's error, not a missing file)."""
    from obstore.exceptions import NotFoundError

    return isinstance(exc, (FileNotFoundError, NotFoundError)) and not _missing_bucket(exc)


@contextlib.contextmanager
def _typed(what: str, path: str) -> Iterator[None]:
    """obstore's errors as typed errors: anything but a savepoint error is the store failing."""
    try:
        yield
    except SavepointError:
        raise
    except Exception as exc:  # obstore raises its own classes, FileNotFoundError and ValueError
        raise StorageError(f"{what}: {_message(exc)}", path=path) from exc


class _ObjectOutput(OutputFile):
    """A data file uploaded in parts as it is written; the store shows it only after
    :meth:`close` completed the upload."""

    def __init__(self, io: ObjectStoreIO, rel: str) -> None:
        self.path = rel
        self._where = io.describe(rel)
        with _typed("cannot start the upload", self._where):
            self._file = _obstore().open_writer(io.store, rel, buffer_size=PART_BYTES,
                                                max_concurrency=UPLOAD_CONCURRENCY)
        self._pos = 0
        self._closed = False

    def write(self, data: bytes) -> None:
        with _typed(f"cannot upload at byte {self._pos}", self._where):
            self._file.write(data)
        self._pos += len(data)

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with _typed("cannot complete the upload", self._where):
            self._file.close()


class ObjectStoreIO(UrlSavepointIO):
    """A savepoint directory (a key prefix) on S3, GCS or Azure. Reads keep
    :data:`READ_CONCURRENCY` ranged GETs in flight to hide each request's latency.

    ``store_options`` go to ``obstore.store.from_url`` (endpoint, region, client
    options...) over what the environment says; a test passes its server's endpoint
    this way or through ``AWS_ENDPOINT_URL``.
    """

    def __init__(self, url: str, **store_options) -> None:
        parsed = parse_location(url)
        if parsed.scheme not in OBJECT_STORE_SCHEMES:
            raise InvalidArgumentError(f"not an object store URL (one of {sorted(OBJECT_STORE_SCHEMES)})", path=url)
        scheme, rest = parsed.path.split(":", 1)
        if "/" not in rest[2:]:
            raise InvalidArgumentError("a savepoint on an object store is a key prefix inside a bucket or container: "
                                       f"{scheme}://BUCKET/PATH", path=url)
        self.location = parsed.path
        self._store_options = store_options
        native = f"{_NATIVE_SCHEME.get(parsed.scheme, parsed.scheme)}:{rest}"
        with _typed("cannot configure the store", url):
            self.store = _obstore().store.from_url(native, **{"retry_config": RETRY, **store_options})
        self.read_concurrency = READ_CONCURRENCY
        #: Files as last read for a conditional replace (the manifest always), with the version
        #: the store gave them (ETag, generation).
        self._seen: dict[str, tuple[bytes, dict[str, str]]] = {}

    def stat(self, rel: str) -> FileStat | None:
        check_relative_path(rel)
        try:
            meta = _obstore().head(self.store, rel)
        except Exception as exc:
            if _is_not_found(exc):
                return None
            raise StorageError(f"cannot stat the file: {_message(exc)}", path=self.describe(rel)) from exc
        return FileStat(meta["size"], meta["last_modified"].timestamp())

    def read_range(self, rel: str, offset: int, length: int) -> bytes:
        check_relative_path(rel)
        if length == 0:
            if self.stat(rel) is None:
                raise SavepointNotFoundError("file does not exist", path=self.describe(rel))
            return b""
        try:
            data = _obstore().get_range(self.store, rel, start=offset, length=length)
        except Exception as exc:
            if _is_not_found(exc):
                raise SavepointNotFoundError("file does not exist", path=self.describe(rel)) from None
            found = self.stat(rel)  # a range past the end is refused (416): say how short the file is
            if found is not None and found.size < offset + length:
                raise self._short(rel, offset, length, found.size) from None
            raise StorageError(f"cannot read bytes {offset}..{offset + length}: {_message(exc)}",
                               path=self.describe(rel)) from exc
        return self._whole(rel, offset, length, bytes(data))

    def read_file(self, rel: str, *, keep_version: bool = False) -> bytes:
        """The whole file; with ``keep_version`` (always for the manifest) the version the store
        gave these bytes is kept for a later :meth:`commit_file`."""
        check_relative_path(rel)
        try:
            result = _obstore().get(self.store, rel)
            data = bytes(result.bytes())  # body and version from one response: never a mix
        except Exception as exc:
            if _is_not_found(exc):
                raise SavepointNotFoundError("file does not exist", path=self.describe(rel)) from None
            raise StorageError(f"cannot read the file: {_message(exc)}", path=self.describe(rel)) from exc
        if keep_version or rel == MANIFEST_NAME:
            meta = result.meta
            self._seen[rel] = (data, {k: meta[k] for k in ("e_tag", "version") if meta.get(k)})
        return self._whole(rel, 0, result.meta["size"], data)

    def create(self, rel: str) -> OutputFile:
        # Names carry 122 random bits; the check makes a clash an error rather than an overwrite.
        if self.stat(rel) is not None:
            raise CorruptSavepointError("cannot create the file: it exists", path=self.describe(rel))
        return _ObjectOutput(self, rel)

    def delete(self, rel: str) -> None:
        check_relative_path(rel)
        try:
            _obstore().delete(self.store, rel)
        except Exception as exc:
            if not _is_not_found(exc):
                raise StorageError(f"cannot delete the file: {_message(exc)}", path=self.describe(rel)) from exc

    def list_files(self, rel_dir: str) -> list[str]:
        if rel_dir:
            check_relative_path(rel_dir)
        with _typed("cannot list the directory", self.describe(rel_dir)):
            listed = _obstore().list_with_delimiter(self.store, rel_dir or None)
        return sorted(o["path"] for o in listed["objects"] if not rel_dir or o["path"].startswith(f"{rel_dir}/"))

    def replace_file(self, rel: str, data: bytes) -> None:
        check_relative_path(rel)
        with _typed("cannot write the file", self.describe(rel)):  # one PUT: the object appears whole
            _obstore().put(self.store, rel, data, use_multipart=False)

    def commit_file(self, rel: str, data: bytes, expected_previous: bytes | None) -> None:
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        check_relative_path(rel)
        where = self.describe(rel)
        mode = "create" if expected_previous is None else self._version_of(rel, expected_previous)
        try:
            _obstore().put(self.store, rel, data, mode=mode, use_multipart=False)
        except (AlreadyExistsError, PreconditionError):
            # A retried write whose first attempt landed is refused by its own condition.
            if self._current(rel) == data:
                return
            raise changed_since_start(rel, where) from None
        except Exception as exc:  # the request may have landed: the outcome is unknown
            raise StorageError(f"cannot write {rel} (it may or may not be published): {_message(exc)}",
                               path=where) from exc

    def _version_of(self, rel: str, expected: bytes) -> dict[str, str]:
        """The store's version of ``rel`` holding ``expected``, as this IO read it (the
        manifest, when the writer started), or as it is now if it still has those bytes."""
        seen = self._seen.get(rel)
        if seen is None or seen[0] != expected:
            if self._current(rel) != expected:
                raise changed_since_start(rel, self.describe(rel))
        _, version = self._seen[rel]  # _current() read it
        if not version:
            raise StorageError(f"the store gave {rel} no ETag or version, so it cannot be replaced "
                               "conditionally (spec/format.md §10.5)", path=self.describe(rel))
        return version

    def absence_hint(self) -> str:
        # A HEAD's 404 has no body to say whether the bucket is missing; a listing's has.
        try:
            _obstore().list_with_delimiter(self.store, None)
        except Exception as exc:
            if _missing_bucket(exc):
                return "; the bucket (container) does not exist"
        return ""

    def _current(self, rel: str) -> bytes | None:
        """``rel`` as it is now (None: absent), its version kept for a conditional write."""
        try:
            return self.read_file(rel, keep_version=True)
        except SavepointNotFoundError:
            return None

    def _open(self, location: str) -> ObjectStoreIO:
        return ObjectStoreIO(location, **self._store_options)
