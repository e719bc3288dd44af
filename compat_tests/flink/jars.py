"""The jars of a real Flink release, fetched from PyPI and cached per version.

PyPI's ``apache-flink-libraries`` distribution carries a whole Flink ``lib/`` (flink-dist,
the table planner and runtime, connectors and logging jars): Flink 2.2+ as a py2.py3 wheel (``pyflink/lib/``), older releases
as an sdist (``deps/lib/``) whose metadata step fails under pip, so the file is fetched
directly from the simple index and checked against the sha256 the index gives for it.
No Maven is involved.

Extracted jars live in ``$PYREF_FLINK_CACHE/<version>/lib`` (default
``~/.cache/pyref-flink``), so CI can cache that directory between runs. A directory in
``$PYREF_FLINK_ARCHIVES`` (``os.pathsep``-separated) that already holds the archive is
used instead of downloading it; the archive is still checked against the index.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import pathlib
import shutil
import tarfile
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import dataclass

from compat_tests._build import sha256_file

INDEX_URL = "https://pypi.org/simple/apache-flink-libraries/"
#: The releases the corpus covers: the newest patch release of each minor version since 1.13 (1.13.6 is the
#: oldest release PyPI's apache-flink-libraries has).
FLINK_VERSIONS = ("1.13.6", "1.14.6", "1.15.4", "1.16.3", "1.17.2", "1.18.1", "1.19.3", "1.20.3", "2.0.2", "2.1.3", "2.2.1", "2.3.0")
#: The jars a DataStream or SQL job (Table API bridge, planner, table runtime, CEP the planner links) on the local mini cluster
#: needs (up to 1.16, the shaded ZooKeeper and Curator too; 1.14's Scala-suffixed flink-dist_2.11 and
#: flink-table_2.11, the latter holding its whole Table API, bridge and planner; 1.13's flink-table_2.12 holds the
#: Table API and bridge, its planner is flink-table-blink_2.12; 1.15 to 1.20's flink-scala_2.12, the Scala API's
#: serializers with the Scala library and compiler, which flink-dist held before); the connector and format jars are not kept.
DIST_JARS = ("flink-dist-", "flink-dist_")
KEPT_JARS = (*DIST_JARS, "log4j-", "flink-table-api-java-uber-", "flink-table-planner-loader-", "flink-cep-",
             "flink-table-runtime-", "flink-shaded-zookeeper-", "flink-table_", "flink-table-blink_", "flink-scala_")
#: Written last into a version's directory: its presence, naming :data:`KEPT_JARS`, means the extraction
#: completed (a cache extracted with other kept jars is extracted again: adding 1.14's prefixes re-extracted
#: every cached version once).
MANIFEST = "pyref-flink.json"
TIMEOUT = 60.0
#: Seconds to wait before each new attempt of a request that failed (a network blip is not a missing release).
RETRY_DELAYS = (5.0, 20.0, 60.0)


class FlinkJarsUnavailable(RuntimeError):
    """The jars of a Flink release are not cached and cannot be fetched (offline, or not allowed)."""


@dataclass(frozen=True)
class Release:
    version: str
    filename: str
    url: str
    sha256: str


def cache_root() -> pathlib.Path:
    return pathlib.Path(os.environ.get("PYREF_FLINK_CACHE") or pathlib.Path.home() / ".cache" / "pyref-flink")


def lib_dir(version: str) -> pathlib.Path:
    return cache_root() / version / "lib"


def cached_lib(version: str) -> pathlib.Path | None:
    """The extracted ``lib/`` of ``version`` if it is complete in the cache, else None."""
    lib = lib_dir(version)
    try:
        manifest = json.loads((lib.parent / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    complete = manifest.get("kept") == list(KEPT_JARS) and any(p.name.startswith(DIST_JARS) for p in lib.glob("*.jar"))
    return lib if complete else None


def _retried(attempt, what: str):
    """``attempt()``, tried again after each of :data:`RETRY_DELAYS` when the network or the
    transfer fails; :class:`FlinkJarsUnavailable` naming ``what`` when every attempt failed."""
    for delay in (*RETRY_DELAYS, None):
        try:
            return attempt()
        except (OSError, http.client.HTTPException, FlinkJarsUnavailable) as e:
            if delay is None:
                raise FlinkJarsUnavailable(f"{what} failed {len(RETRY_DELAYS) + 1} times, last: {e}") from e
            print(f"pyref-flink: {what} failed ({e}); trying again in {delay:g} s", flush=True)
            time.sleep(delay)


def find_release(version: str, index_url: str = INDEX_URL) -> Release:
    """The file of ``version`` on the simple index: the wheel if there is one, else the sdist."""
    request = urllib.request.Request(index_url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})

    def read_index():
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return json.load(response)

    index = _retried(read_index, f"reading the package index {index_url}")
    candidates = []
    for f in index.get("files", []):
        name = f["filename"]
        stem = name.replace("-", "_")
        if stem == f"apache_flink_libraries_{version}.tar.gz":
            candidates.append((1, f))
        elif stem == f"apache_flink_libraries_{version}_py2.py3_none_any.whl":
            candidates.append((0, f))
    if not candidates:
        raise FlinkJarsUnavailable(f"apache-flink-libraries {version} is not on {index_url}")
    f = min(candidates, key=lambda c: c[0])[1]
    sha256 = f.get("hashes", {}).get("sha256")
    if not sha256:
        raise FlinkJarsUnavailable(f"the index gives no sha256 for {f['filename']}")
    return Release(version, f["filename"], f["url"], sha256)


def _local_archive(release: Release) -> pathlib.Path | None:
    for directory in filter(None, os.environ.get("PYREF_FLINK_ARCHIVES", "").split(os.pathsep)):
        path = pathlib.Path(directory) / release.filename
        if path.is_file():
            return path
    return None


def _download(release: Release, target: pathlib.Path) -> None:
    """Fetch the release's file, checked against the index's sha256 (a cut transfer is tried again)."""

    def attempt() -> None:
        h = hashlib.sha256()
        with urllib.request.urlopen(release.url, timeout=TIMEOUT) as response, open(target, "wb") as out:
            for block in iter(lambda: response.read(1 << 20), b""):
                h.update(block)
                out.write(block)
        if h.hexdigest() != release.sha256:
            raise FlinkJarsUnavailable(f"{release.filename}: sha256 {h.hexdigest()} is not the index's "
                                       f"{release.sha256}")

    _retried(attempt, f"downloading {release.url}")


def _kept(name: str) -> str | None:
    """The jar's file name if ``name`` is an archive member to keep (a jar of the release's lib/)."""
    parent, _, base = name.rpartition("/")
    if parent.endswith(("deps/lib", "pyflink/lib")) and base.endswith(".jar") and base.startswith(KEPT_JARS):
        return base
    return None


def _extract(archive: pathlib.Path, lib: pathlib.Path) -> list[str]:
    names = []
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                base = _kept(info.filename)
                if base:
                    with z.open(info) as src, open(lib / base, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                    names.append(base)
    else:
        with tarfile.open(archive, "r:gz") as t:
            for member in t:
                base = _kept(member.name) if member.isfile() else None
                if base:
                    with t.extractfile(member) as src, open(lib / base, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                    names.append(base)
    return sorted(names)


def ensure_lib(version: str, *, download: bool = True) -> pathlib.Path:
    """The directory of ``version``'s jars, fetching and extracting them on first use.

    With ``download=False`` only the cache is consulted (raises :class:`FlinkJarsUnavailable`
    when the version is not there)."""
    lib = cached_lib(version)
    if lib is not None:
        return lib
    if not download:
        raise FlinkJarsUnavailable(f"Flink {version} jars are not in {cache_root()} (set PYREF_FLINK_CACHE, "
                                   f"or fetch them: python -m compat_tests.flink.jars {version})")
    release = find_release(version)
    version_dir = cache_root() / version
    version_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=version_dir.parent, prefix=f".{version}-") as tmp:
        tmp_path = pathlib.Path(tmp)
        archive = _local_archive(release)
        if archive is None:
            archive = tmp_path / release.filename
            _download(release, archive)
        elif sha256_file(archive) != release.sha256:
            raise FlinkJarsUnavailable(f"{archive}: sha256 is not the index's {release.sha256}")
        staged = tmp_path / "version"
        (staged / "lib").mkdir(parents=True)
        jars = _extract(archive, staged / "lib")
        if not any(j.startswith(DIST_JARS) for j in jars):
            raise FlinkJarsUnavailable(f"{release.filename} holds no flink-dist jar")
        (staged / MANIFEST).write_text(json.dumps(
            {"version": version, "archive": release.filename, "url": release.url, "sha256": release.sha256,
             "kept": list(KEPT_JARS), "jars": jars}, indent=2) + "\n", encoding="utf-8")
        if cached_lib(version) is not None:  # another process extracted it meanwhile
            return lib_dir(version)
        if version_dir.exists():
            shutil.rmtree(version_dir)
        staged.rename(version_dir)
    return lib_dir(version)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Fetch and cache the jars of Flink releases from PyPI.")
    parser.add_argument("versions", nargs="*", default=list(FLINK_VERSIONS))
    args = parser.parse_args(argv)
    for version in args.versions:
        print(version, ensure_lib(version))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
