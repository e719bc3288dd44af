"""Debian's Chromium for the browser test of ``pyref report`` (tests/test_report_browser.py),
without root: ``apt-get download`` of chromium and of every package it needs that this
machine lacks, unpacked with ``dpkg -x`` into a cache shared by checkouts, and a launcher
that points the loader at the unpacked libraries.

    python3 scripts/fetch_chromium.py     # prints the launcher's path; quick once cached

Needs Debian's package lists (it runs ``apt-get update`` when they lack chromium, which
needs root) and network to Debian's mirror, nothing else. The cache is ``$PYREF_CHROMIUM_CACHE``, else ``$XDG_CACHE_HOME/pyref/chromium``
(``~/.cache/pyref/chromium``), one directory per Chromium version.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOTS = ["chromium", "chromium-common"]


def _run(*argv: str, cwd: str | None = None) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, cwd=cwd).stdout


def _installed(packages: list[str]) -> set[str]:
    done = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${Status}\n", *packages], capture_output=True, text=True)
    return {line.split()[0].split(":")[0] for line in done.stdout.splitlines()
            if line.endswith("install ok installed")}


def _candidates(packages: list[str]) -> dict[str, str]:
    """Each package's candidate version; a package without one (virtual) is left out."""
    found = {}
    for block in re.split(r"^(?=\S)", _run("apt-cache", "policy", *packages), flags=re.M):
        match = re.match(r"(\S+?)(?::\S+)?:\n(?:.*\n)*?\s+Candidate: (\S+)", block)
        if match and match.group(2) != "(none)":
            found[match.group(1)] = match.group(2)
    return found


def _dependencies(packages: list[str]) -> list[str]:
    """The first alternative of each Depends and Pre-Depends of ``packages``."""
    shown = _run("apt-cache", "show", "--no-all-versions", *packages)
    names = []
    for field in re.findall(r"^(?:Pre-)?Depends: (.*)$", shown, re.M):
        for clause in field.split(","):
            names.append(re.sub(r"\(.*?\)|:any", "", clause.split("|")[0]).strip())
    return names


def needed() -> list[str]:
    """chromium and the packages of its dependency closure that are not installed here
    (virtual packages without a candidate are taken as provided), a level at a time."""
    level, seen, wanted = list(ROOTS), set(), set()
    while level:
        seen.update(level)
        installed = _installed(level)
        new = [p for p in level if p not in installed]
        available = _candidates(new) if new else {}
        new = [p for p in new if p in available]
        wanted.update(new)
        level = sorted({d for d in _dependencies(new) if d not in seen}) if new else []
    return sorted(wanted)


def fetch(cache: pathlib.Path) -> pathlib.Path:
    version = _candidates(["chromium"]).get("chromium")
    if version is None:  # a fresh machine may have no package lists yet; updating them needs root
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True)
        version = _candidates(["chromium"]).get("chromium")
    if version is None:
        raise SystemExit("fetch_chromium: no chromium package in the apt lists (run apt-get update as root)")
    home = cache / re.sub(r"[^A-Za-z0-9.+-]", "_", version)
    launcher = home / "chromium"
    if launcher.exists():
        return launcher
    for stale in cache.iterdir():  # other versions: the mirror moved on
        if stale.is_dir() and (stale / "chromium").exists():
            shutil.rmtree(stale, ignore_errors=True)
    with tempfile.TemporaryDirectory(dir=cache) as work:
        packages = needed()
        _run("apt-get", "download", *packages, cwd=work)
        tree = pathlib.Path(work) / "tree"
        for deb in sorted(pathlib.Path(work).glob("*.deb")):
            _run("dpkg", "-x", str(deb), str(tree))
        # Every directory holding a shared library (pulseaudio keeps one in a subdirectory).
        libs = sorted({str(so.parent) for so in tree.rglob("*.so*") if ".so" in so.name})
        script = ("#!/bin/sh\n# Debian's Chromium unpacked by scripts/fetch_chromium.py: " + " ".join(packages) + "\n"
                  f'here=$(dirname "$0")\n'
                  f'LD_LIBRARY_PATH="{":".join(p.replace(str(tree), "$here/tree") for p in libs)}'
                  '${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/tree/usr/lib/chromium/chromium" "$@"\n')
        (pathlib.Path(work) / "chromium").write_text(script)
        os.chmod(pathlib.Path(work) / "chromium", 0o755)
        for leftover in pathlib.Path(work).glob("*.deb"):
            leftover.unlink()
        shutil.move(work, home)  # whole or not at all: a cut-short fetch leaves no launcher
        os.makedirs(work)  # TemporaryDirectory removes it on exit
    return launcher


def main() -> None:
    base = os.environ.get("PYREF_CHROMIUM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pyref", "chromium")
    cache = pathlib.Path(base)
    cache.mkdir(parents=True, exist_ok=True)
    try:
        launcher = fetch(cache)
    except subprocess.CalledProcessError as exc:
        sys.exit(f"fetch_chromium: {' '.join(exc.cmd[:3])}... failed: {exc.stderr.strip()[-2000:]}")
    print(launcher)


if __name__ == "__main__":
    main()
