"""A real ``redis-server`` subprocess for the tests, on 127.0.0.1 and a free port.

Tests talk to real Redis, never a fake (STYLE.md rule 7). The binary is found by
:func:`find_redis_server`; ``scripts/setup`` makes sure one exists.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import redis

ENV_BINARY = "SEASONS_TEST_REDIS_SERVER"
HOST = "127.0.0.1"
START_TIMEOUT = 10.0

# Every server started and not yet closed, so that none outlives the test run.
_live: weakref.WeakSet[RedisServer] = weakref.WeakSet()


def find_redis_server() -> str:
    """Path of a ``redis-server`` binary: ``$SEASONS_TEST_REDIS_SERVER``, else ``redis-server``
    on PATH (Redis 7.0 or later: ``scripts/setup`` checks the version)."""
    named = os.environ.get(ENV_BINARY)
    if named:
        return named
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    raise RuntimeError(
        "no redis-server found: set $SEASONS_TEST_REDIS_SERVER to a Redis 7 binary, put "
        "redis-server on PATH, or run scripts/setup (it installs redis-server as root, or says "
        "what to install)"
    )


@functools.cache
def debug_command_args(binary: str) -> tuple[str, ...]:
    """``--enable-debug-command local`` (Redis 7+), so that tests can compare whole data sets
    with ``DEBUG DIGEST``; nothing for a server that does not say it is 7 or later."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    found = re.search(r"v=(\d+)\.", out)
    return ("--enable-debug-command", "local") if found and int(found.group(1)) >= 7 else ()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """One ``redis-server`` process without persistence.

    ``stop()``/``kill()`` end the process and ``start()`` brings it back on the same port (with an
    empty data set), for tests of Redis going away and coming back. Use as a context manager or call
    :meth:`close`; anything left running is killed at interpreter exit.
    """

    def __init__(
        self,
        port: int | None = None,
        args: Sequence[str] = (),
        binary: str | None = None,
        start: bool = True,
    ):
        self._fixed_port = port is not None
        self._port = port if port is not None else free_port()
        self._args = list(args)
        self._binary = binary or find_redis_server()
        self._dir = Path(tempfile.mkdtemp(prefix="seasons-redis-"))
        self._proc: subprocess.Popen[bytes] | None = None
        _live.add(self)
        if start:
            try:
                self.start()
            except BaseException:
                self.close()
                raise

    @property
    def port(self) -> int:
        return self._port

    @property
    def host(self) -> str:
        return HOST

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self._port}/0"

    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def client(self, **kwargs: Any) -> redis.Redis:
        """A new client on this server; the caller closes it."""
        return redis.Redis(host=HOST, port=self._port, **kwargs)

    def start(self) -> None:
        """Start the server (again, on the same port) and wait until it answers PING."""
        if self.running:
            return
        # A port picked by free_port() can be taken by someone else before redis binds it;
        # then pick another. A port the caller chose is kept.
        attempts = 1 if self._fixed_port else 3
        for attempt in range(attempts):
            try:
                self._spawn()
                return
            except _BindFailed:
                if attempt == attempts - 1:
                    raise RuntimeError(
                        f"redis-server could not bind a port: {self._log()}"
                    ) from None
                self._port = free_port()

    def stop(self) -> None:
        """End the server gracefully (SIGTERM) and reap it."""
        self._end(signal.SIGTERM)

    def kill(self) -> None:
        """End the server abruptly (SIGKILL) and reap it."""
        self._end(signal.SIGKILL)

    def close(self) -> None:
        """Stop the server for good and remove its directory."""
        self._end(signal.SIGKILL)
        shutil.rmtree(self._dir, ignore_errors=True)
        _live.discard(self)

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"RedisServer({self.url}, {state})"

    # -- internals --------------------------------------------------------------------------

    def _command(self) -> list[str]:
        return [
            self._binary,
            "--port", str(self._port),
            "--bind", HOST,
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self._dir),
            "--daemonize", "no",
            "--logfile", "",  # to stdout, which goes to server.log
            *debug_command_args(self._binary),
            *self._args,
        ]  # fmt: skip

    def _log_path(self) -> Path:
        return self._dir / "server.log"

    def _log(self) -> str:
        try:
            return self._log_path().read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def _spawn(self) -> None:
        with self._log_path().open("wb") as log_file:  # a fresh log per start
            proc = self._proc = subprocess.Popen(
                self._command(),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=self._dir,
            )
        deadline = time.monotonic() + START_TIMEOUT
        probe = redis.Redis(
            host=HOST, port=self._port, socket_timeout=0.5, socket_connect_timeout=0.5
        )
        try:
            while True:
                if proc.poll() is not None:
                    self._proc = None
                    output = self._log()
                    if "Address already in use" in output:
                        raise _BindFailed
                    raise RuntimeError(f"redis-server exited at start:\n{output}")
                # Whoever answers must be our process, not another server already on the port.
                with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
                    if probe.info("server").get("process_id") == proc.pid:
                        return
                if time.monotonic() > deadline:
                    self._end(signal.SIGKILL)
                    raise RuntimeError(
                        f"redis-server on port {self._port} did not answer PING within "
                        f"{START_TIMEOUT:.0f}s:\n{self._log()}"
                    )
                time.sleep(0.02)
        finally:
            probe.close()

    def _end(self, sig: signal.Signals) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        else:
            proc.wait()


class _BindFailed(Exception):
    pass


@atexit.register
def _close_all() -> None:
    for server in list(_live):
        server.close()
