"""Servers the tests start in subprocesses on 127.0.0.1 (moto's S3, Azurite): a free port,
a start that waits until the server answers, a stop that never leaves one behind."""

from __future__ import annotations

import http.client
import socket
import subprocess
import time
from abc import ABC, abstractmethod


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(endpoint: str, method: str, path: str, body: bytes = b"",
            headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """One HTTP request to ``endpoint`` (``http://127.0.0.1:port``): its status and body."""
    host, port = endpoint.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def end_process(process: subprocess.Popen, grace: float) -> None:
    """Wait ``grace`` seconds for ``process`` to exit (it was asked to), then kill it."""
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class LocalServer(ABC):
    """A server on ``127.0.0.1:port`` in a subprocess; a context manager."""

    #: What it is, for errors.
    name = "the server"

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen | None = None

    @abstractmethod
    def command(self) -> list[str]:
        """The program and arguments that serve on :attr:`port`."""

    @abstractmethod
    def ping(self) -> None:
        """One request to the server; OSError while it is not listening yet."""

    def start(self, timeout: float = 60.0) -> LocalServer:
        self._process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.ping()
                return self
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"{self.name} did not start on port {self.port}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            end_process(self._process, 10)
            self._process = None

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
