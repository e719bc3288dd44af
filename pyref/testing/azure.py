"""A real Azure Blob API on this machine, for tests: Azurite, the Azure Storage emulator
Microsoft maintains, in a subprocess on 127.0.0.1, in memory, with the emulator's
well-known development account. :class:`pyref.testing.s3.FaultProxy` goes in front of it
as it does of the S3 server.

Azurite is a Node.js program: ``bash scripts/fetch_azurite.sh`` installs the version
``tools/azurite/package-lock.json`` pins into ``tools/azurite/node_modules`` (or set
``PYREF_AZURITE`` to an ``azurite-blob`` executable). Nothing here listens beyond loopback,
and Azurite's telemetry is off.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from email.utils import formatdate
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from .server_process import LocalServer, request

#: The emulator's development account (public: Azurite and every Azure SDK document it).
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
#: The REST API version requests to Azurite name (one it serves).
API_VERSION = "2021-08-06"
#: Where scripts/fetch_azurite.sh installs Azurite, relative to the checkout.
INSTALLED = Path(__file__).resolve().parents[2] / "tools" / "azurite" / "node_modules" / ".bin" / "azurite-blob"


def executable() -> Path | None:
    """The ``azurite-blob`` to run: ``$PYREF_AZURITE``, else the checkout's; None if neither exists."""
    configured = os.environ.get("PYREF_AZURITE")
    path = Path(configured) if configured else INSTALLED
    return path if path.is_file() else None


class AzuriteServer(LocalServer):
    """Azurite's Blob service on ``127.0.0.1:port`` in a subprocess; a context manager."""

    name = "Azurite"
    #: The request that completes a block blob upload (Put Block List), and one that uploads a part (Put Block).
    COMPLETE_UPLOAD = ("PUT", r"comp=blocklist")
    PART_UPLOAD = r"comp=block&"

    def command(self) -> list[str]:
        program = executable()
        if program is None:
            raise RuntimeError("Azurite is not installed: run `bash scripts/fetch_azurite.sh` (or set PYREF_AZURITE)")
        return [str(program), "--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--inMemoryPersistence",
                "--disableTelemetry", "--silent", "--skipApiVersionCheck"]

    def ping(self) -> None:
        signed_request(self.endpoint, "GET", f"/{ACCOUNT}?comp=list")

    def create_container(self, container: str) -> None:
        status, _ = signed_request(self.endpoint, "PUT", f"/{ACCOUNT}/{container}?restype=container")
        if status != 201:
            raise RuntimeError(f"cannot create container {container!r}: HTTP {status}")

    def incomplete_uploads(self, container: str, prefix: str) -> list[str]:
        """Names of the blobs under ``prefix`` with blocks uploaded and never committed."""
        committed = set(self._names(container, prefix))
        return [name for name in self._names(container, prefix, "&include=uncommittedblobs") if name not in committed]

    def _names(self, container: str, prefix: str, include: str = "") -> list[str]:
        status, body = signed_request(self.endpoint, "GET",
                                      f"/{ACCOUNT}/{container}?restype=container&comp=list{include}&prefix={prefix}/")
        if status != 200:
            raise RuntimeError(f"cannot list container {container!r}: HTTP {status}")
        return re.findall(r"<Name>([^<]+)</Name>", body.decode())

    def env(self, endpoint: str | None = None) -> dict[str, str]:
        """The environment obstore's Azure client reads to reach this server (or a proxy at
        ``endpoint``): the emulator mode, with its account and key."""
        return {"AZURE_STORAGE_USE_EMULATOR": "true", "AZURITE_BLOB_STORAGE_URL": endpoint or self.endpoint,
                "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT, "AZURE_STORAGE_ACCOUNT_KEY": ACCOUNT_KEY}


def signed_request(endpoint: str, method: str, path: str, body: bytes = b"",
                   headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """One request to ``endpoint`` (``path`` starts with the account) signed with the
    development account's Shared Key, as an Azure SDK signs it."""
    sent = {"x-ms-date": formatdate(usegmt=True), "x-ms-version": API_VERSION, **(headers or {})}
    sent["Authorization"] = f"SharedKey {ACCOUNT}:{_signature(method, path, sent, len(body))}"
    return request(endpoint, method, path, body, sent)


def _signature(method: str, path: str, headers: dict[str, str], length: int) -> str:
    """Shared Key's signature of a request (Azure Storage's "Authorize with Shared Key")."""
    lower = {k.lower(): v for k, v in headers.items()}
    standard = ["content-encoding", "content-language", "content-length", "content-md5", "content-type", "date",
                "if-modified-since", "if-match", "if-none-match", "if-unmodified-since", "range"]
    values = [str(length) if name == "content-length" and length else lower.get(name, "") for name in standard]
    canonical_headers = "".join(f"{k}:{lower[k]}\n" for k in sorted(lower) if k.startswith("x-ms-"))
    url = urlsplit(path)
    query = sorted(parse_qsl(url.query, keep_blank_values=True))
    resource = f"/{ACCOUNT}{url.path}" + "".join(f"\n{k.lower()}:{v}" for k, v in query)
    to_sign = "\n".join([method, *values, canonical_headers + resource])
    digest = hmac.new(base64.b64decode(ACCOUNT_KEY), to_sign.encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()
