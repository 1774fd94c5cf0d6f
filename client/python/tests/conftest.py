"""Real servers for the tests: ``$BATON_SERVER_BIN`` on a free port, on SQLite (a fresh
database in a temp dir) and, when ``BATON_TEST_POSTGRES_URL`` is set, on that Postgres.

Every test uses its own project key, so a server (and a Postgres database) is shared by
the whole session. The shared servers have an admin token from the start (so they require
tokens); ``admin`` is a client with it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from baton_client import Client, Settings

SERVER_BIN_ENV = "BATON_SERVER_BIN"
POSTGRES_ENV = "BATON_TEST_POSTGRES_URL"


def server_bin() -> str:
    path = os.environ.get(SERVER_BIN_ENV, "")
    if not path:
        pytest.fail(
            f"{SERVER_BIN_ENV} is not set: point it at a built baton-server binary, e.g. "
            f"{SERVER_BIN_ENV}=target/debug/baton-server pytest client/python/tests",
            pytrace=False,
        )
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"{SERVER_BIN_ENV}={path!r} is not an executable file", pytrace=False)
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def backends() -> list[str]:
    return ["sqlite", "postgres"] if os.environ.get(POSTGRES_ENV) else ["sqlite"]


def _health(address: str) -> bool:
    """grpc.health.v1.Health/Check answers SERVING (field 1 = 1), without a dependency."""
    with grpc.insecure_channel(address) as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=lambda _: b"",
            response_deserializer=lambda raw: raw,
        )
        try:
            return bool(check(None, timeout=1.0) == b"\x08\x01")
        except grpc.RpcError:
            return False


class Server:
    """One baton-server process; restartable on the same port and database."""

    def __init__(self, database_url: str, workdir: Path, *extra_args: str) -> None:
        self.bin = server_bin()
        self.database_url = database_url
        self.workdir = workdir
        self.port = free_port()
        self.extra_args = extra_args
        self.process: subprocess.Popen[bytes] | None = None
        self.log = workdir / f"server-{self.port}.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def start(self, timeout: float = 20.0) -> None:
        args = [
            self.bin,
            "--listen",
            self.address,
            "--database-url",
            self.database_url,
            "--log-level",
            "warn",
            "--rate-limit",
            "0",
            "--auth-failure-rate",
            "0",
            "--watch-poll",
            "200ms",
            "--retention-interval",
            "0s",
            *self.extra_args,
        ]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"baton-server exited with {self.process.returncode}:\n{self.log.read_text()}")
            if _health(self.address):
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"baton-server did not answer on {self.address} in {timeout}s:\n{self.log.read_text()}")

    def stop(self, kill: bool = False) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def restart(self, kill: bool = True) -> None:
        self.stop(kill=kill)
        self.start()

    def create_token(self, role: str, project: str | None = None) -> str:
        """``baton-server token create`` against the database; returns the secret."""
        name = f"pytest-{role}-{uuid.uuid4().hex[:12]}"
        args = [self.bin, "token", "create", "--name", name, "--role", role, "--database-url", self.database_url]
        if project:
            args += ["--project", project]
        done = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=self.workdir)
        if done.returncode != 0:
            raise RuntimeError(f"token create failed: {done.stderr}")
        return done.stdout.split()[0]

    def client(self, token: str | None, **kwargs: object) -> Client:
        return Client(settings=Settings(server=self.url, token=token), **kwargs)  # type: ignore[arg-type]


def database_url(backend: str, workdir: Path) -> str:
    if backend == "postgres":
        return os.environ[POSTGRES_ENV]
    return f"sqlite://{workdir / 'baton.db'}"


@pytest.fixture(scope="session", params=backends())
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def server(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The shared server of a backend, with an admin token (``server.admin_token``)."""
    workdir = tmp_path_factory.mktemp(f"baton-{backend}")
    srv = Server(database_url(backend, workdir), workdir)
    srv.admin_token = srv.create_token("admin")  # type: ignore[attr-defined]
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def admin_token(server: Server) -> str:
    return str(server.admin_token)  # type: ignore[attr-defined]


@pytest.fixture
def admin(server: Server, admin_token: str) -> Iterator[Client]:
    with server.client(admin_token) as client:
        yield client


@pytest.fixture
def project() -> str:
    return f"github.com/pytest/{uuid.uuid4().hex}"


@pytest.fixture
def own_server(backend: str, tmp_path: Path) -> Iterator[Server]:
    """A server of its own (to stop and restart), on a fresh SQLite database or the
    Postgres one; it has an admin token (``own_server.admin_token``)."""
    srv = Server(database_url(backend, tmp_path), tmp_path)
    srv.admin_token = srv.create_token("admin")  # type: ignore[attr-defined]
    srv.start()
    yield srv
    srv.stop()
