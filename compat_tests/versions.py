"""Print the interpreter and the dependency versions a test run uses (first line of every tox cell)."""

from __future__ import annotations

import platform
from importlib import metadata

DISTRIBUTIONS = ("protobuf", "pyarrow", "numpy", "google-crc32c", "pyspark", "obstore", "moto", "pytest", "hypothesis")


def describe() -> str:
    parts = [f"Python {platform.python_version()}"]
    for dist in DISTRIBUTIONS:
        try:
            parts.append(f"{dist}=={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist}: not installed")
    return ", ".join(parts)


if __name__ == "__main__":
    print(describe())
