"""A real S3 API on this machine, for tests and benchmarks: moto's S3 server in a
subprocess on 127.0.0.1, and a proxy in front of it that counts the bytes each
request fetched and injects the failures a real store returns (500, 503 SlowDown,
a lost response), so that clients meet them through their own retry logic.

Needs the ``test`` extra (``moto[server]``). Nothing here listens beyond loopback.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .server_process import LocalServer, free_port, request

__all__ = ["TEST_CREDENTIALS", "Exchange", "Fault", "FaultProxy", "S3Server", "free_port", "request"]

#: Credentials of the test server: moto accepts any; the clients need some to sign with.
TEST_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "pyref-test", "AWS_SECRET_ACCESS_KEY": "pyref-test",
                    "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true", "AWS_EC2_METADATA_DISABLED": "true"}
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te",
                         "trailer", "content-length"})


class S3Server(LocalServer):
    """moto's S3 server on ``127.0.0.1:port`` in a subprocess; a context manager."""

    name = "moto's S3 server"
    #: The request that completes a multipart upload, and one that uploads a part.
    COMPLETE_UPLOAD = ("POST", r"uploadId=")
    PART_UPLOAD = r"partNumber=\d+"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]

    def ping(self) -> None:
        request(self.endpoint, "GET", "/")

    def create_bucket(self, bucket: str) -> None:
        status, _ = request(self.endpoint, "PUT", f"/{bucket}")
        if status != 200:
            raise RuntimeError(f"cannot create bucket {bucket!r}: HTTP {status}")

    def incomplete_uploads(self, bucket: str, prefix: str) -> list[str]:
        """Keys of the multipart uploads begun under ``prefix`` and neither completed nor aborted."""
        status, body = request(self.endpoint, "GET", f"/{bucket}?uploads&prefix={prefix}/")
        if status != 200:
            raise RuntimeError(f"cannot list the uploads of bucket {bucket!r}: HTTP {status}")
        return re.findall(r"<Key>([^<]+)</Key>", body.decode())

    def env(self, endpoint: str | None = None) -> dict[str, str]:
        """The environment a client reads to reach this server (or a proxy at ``endpoint``)."""
        return {**TEST_CREDENTIALS, "AWS_ENDPOINT_URL": endpoint or self.endpoint}


@dataclass
class Fault:
    """Answer the next ``times`` requests whose method is ``method`` and whose path
    matches ``path`` with ``status``, either instead of forwarding them or, with
    ``after_forwarding``, after the server did what they asked (a lost response)."""

    method: str
    path: str
    status: int = 503
    code: str = "SlowDown"
    times: int = 1
    after_forwarding: bool = False
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        return self.hits < self.times and method == self.method and re.search(self.path, path) is not None


@dataclass
class Exchange:
    """One request the proxy saw."""

    method: str
    path: str
    range: str | None
    status: int
    body_bytes: int


@dataclass
class FaultProxy:
    """An HTTP proxy on 127.0.0.1 in front of ``upstream`` that logs every exchange and
    applies :class:`Fault` rules; a context manager."""

    upstream: str
    faults: list[Fault] = field(default_factory=list)
    log: list[Exchange] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        #: Exchanges being served: a client may have every byte of a response before the
        #: proxy logs it, so :meth:`counting` waits for them.
        self._served = threading.Condition(self._lock)
        self._in_flight = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="pyref-s3-proxy", daemon=True)

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def inject(self, *faults: Fault) -> None:
        with self._lock:
            self.faults.extend(faults)

    def fault_for(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(method, path):
                    fault.hits += 1
                    return fault
        return None

    def record(self, exchange: Exchange) -> None:
        with self._lock:
            self.log.append(exchange)

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        with self._lock:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._served:
                self._in_flight -= 1
                self._served.notify_all()

    def fetched(self, path: str = "", method: str = "GET") -> int:
        """Body bytes of the successful responses to ``method`` requests whose path contains ``path``."""
        with self._lock:
            return sum(e.body_bytes for e in self.log if e.method == method and path in e.path and e.status < 300)

    @contextlib.contextmanager
    def counting(self) -> Iterator[list[Exchange]]:
        """The exchanges made inside the block."""
        with self._lock:
            start = len(self.log)
        seen: list[Exchange] = []
        yield seen
        with self._served:
            self._served.wait_for(lambda: not self._in_flight, timeout=30)
            seen.extend(self.log[start:])


def _error_body(status: int, code: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
            f"<Message>injected by the test proxy (HTTP {status})</Message></Error>").encode()


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    host, port = proxy.upstream.removeprefix("http://").split(":")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet: the exchange log says what happened
            pass

        def _forward(self) -> None:
            with proxy.serving():
                self._serve()

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            fault = proxy.fault_for(self.command, self.path)
            if fault is not None and not fault.after_forwarding:
                return self._fail(fault)
            conn = http.client.HTTPConnection(host, int(port), timeout=300)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                conn.request(self.command, self.path, body=body, headers=headers)
                response = conn.getresponse()
                if fault is not None:  # the server did it; the client hears of a failure
                    response.read()
                    return self._fail(fault)
                self.send_response(response.status)
                for k, v in response.getheaders():
                    if k.lower() not in _HOP_BY_HOP:
                        self.send_header(k, v)
                upstream_length = response.getheader("Content-Length")
                # A chunked answer (Azurite's listings) is passed on whole, with its length.
                whole = response.read() if upstream_length is None and self.command != "HEAD" else None
                self.send_header("Content-Length", str(len(whole)) if whole is not None else upstream_length or "0")
                self.end_headers()
                sent = 0
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client may hang up
                    if whole is not None:
                        self.wfile.write(whole)
                        sent = len(whole)
                    while whole is None and self.command != "HEAD" and (part := response.read(1 << 20)):
                        self.wfile.write(part)
                        sent += len(part)
                self._record(response.status, sent)
            finally:
                conn.close()

        def _fail(self, fault: Fault) -> None:
            body = _error_body(fault.status, fault.code)
            self.send_response(fault.status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            self._record(fault.status, 0)

        def _record(self, status: int, body_bytes: int) -> None:
            proxy.record(Exchange(self.command, self.path, self.headers.get("Range"), status, body_bytes))

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    return Handler
