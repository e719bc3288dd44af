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
import http.client
import os
import subprocess
import re
import time
from email.utils import formatdate
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from .s3 import free_port

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


class AzuriteServer:
    """Azurite's Blob service on ``127.0.0.1:port`` in a subprocess; a context manager."""

    #: The request that completes a block blob upload (Put Block List), and one that uploads a part (Put Block).
    COMPLETE_UPLOAD = ("PUT", r"comp=blocklist")
    PART_UPLOAD = r"comp=block&"

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> AzuriteServer:
        program = executable()
        if program is None:
            raise RuntimeError("Azurite is not installed: run `bash scripts/fetch_azurite.sh` (or set PYREF_AZURITE)")
        self._process = subprocess.Popen(
            [str(program), "--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--inMemoryPersistence",
             "--disableTelemetry", "--silent", "--skipApiVersionCheck"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            try:
                signed_request(self.endpoint, "GET", f"/{ACCOUNT}?comp=list")
                return self
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"Azurite did not start on port {self.port}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None

    def create_container(self, container: str) -> None:
        status, _ = signed_request(self.endpoint, "PUT", f"/{ACCOUNT}/{container}?restype=container")
        if status != 201:
            raise RuntimeError(f"cannot create container {container!r}: HTTP {status}")

    def incomplete_uploads(self, container: str, prefix: str) -> list[str]:
        """Names of the blobs under ``prefix`` with blocks uploaded and never committed."""
        status, body = signed_request(self.endpoint, "GET", f"/{ACCOUNT}/{container}?restype=container&comp=list"
                                      f"&include=uncommittedblobs&prefix={prefix}/")
        if status != 200:
            raise RuntimeError(f"cannot list container {container!r}: HTTP {status}")
        committed = set(self.committed(container, prefix))
        return [name for name in re.findall(r"<Name>([^<]+)</Name>", body.decode()) if name not in committed]

    def committed(self, container: str, prefix: str) -> list[str]:
        status, body = signed_request(self.endpoint, "GET", f"/{ACCOUNT}/{container}?restype=container&comp=list"
                                      f"&prefix={prefix}/")
        if status != 200:
            raise RuntimeError(f"cannot list container {container!r}: HTTP {status}")
        return re.findall(r"<Name>([^<]+)</Name>", body.decode())

    def env(self, endpoint: str | None = None) -> dict[str, str]:
        """The environment obstore's Azure client reads to reach this server (or a proxy at
        ``endpoint``): the emulator mode, with its account and key."""
        return {"AZURE_STORAGE_USE_EMULATOR": "true", "AZURITE_BLOB_STORAGE_URL": endpoint or self.endpoint,
                "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT, "AZURE_STORAGE_ACCOUNT_KEY": ACCOUNT_KEY}

    def __enter__(self) -> AzuriteServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def signed_request(endpoint: str, method: str, path: str, body: bytes = b"",
                   headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """One request to ``endpoint`` (``path`` starts with the account) signed with the
    development account's Shared Key, as an Azure SDK signs it."""
    sent = {"x-ms-date": formatdate(usegmt=True), "x-ms-version": API_VERSION, **(headers or {})}
    sent["Authorization"] = f"SharedKey {ACCOUNT}:{_signature(method, path, sent, len(body))}"
    host, port = endpoint.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


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
