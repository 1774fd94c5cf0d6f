#!/usr/bin/env python3
"""Baton's LangGraph checkpointer next to LangGraph's own stores, in one run.

    python client/python/bench/framework_stores.py            # the full run (a few minutes)
    python client/python/bench/framework_stores.py --quick    # well under a minute (CI)
    python client/python/bench/framework_stores.py --check    # exit 1 when a target is missed

One compiled LangGraph ``StateGraph`` (a messages channel that grows by about 1 KB a step:
a user message in, a reply out) runs on ``BatonSaver``, LangGraph's ``PostgresSaver`` and
its ``SqliteSaver``. Each saver's ``put``, ``get_tuple`` and ``put_writes`` are timed by a
thin subclass, so the latencies are those of the calls LangGraph really makes.

- Latency: put and get p50/p99 with 1 LangGraph thread (the storage conversation below) and
  with 8 driven at once, for each store, with Baton/PostgresSaver and Baton/SqliteSaver.
- Storage: after a conversation of ``--steps`` steps (200) in a fresh database per store of
  one Postgres cluster: the growth of ``pg_database_size`` for Baton (baton-server on its
  own database) and PostgresSaver; for SqliteSaver the database's page count times its page
  size. No VACUUM, ANALYZE or CHECKPOINT is run, before or after; the throwaway cluster has
  autovacuum off, so the figures do not depend on when it would have woken.
- Optionally the Claude Agent SDK ``SessionStore``: ``baton_client.claude.BatonSessionStore``
  against the SDK's ``InMemorySessionStore`` (append a batch, load a whole session).

The bench starts what it needs (a throwaway Postgres cluster from the installed binaries or
databases on ``--postgres-url``, and ``baton-server`` from ``--server-bin`` or
``$BATON_SERVER_BIN``) and removes it all at exit, Ctrl-C included.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import ctypes.util
import importlib.metadata
import inspect
import json
import os
import platform
import random
import re
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import grpc
import psycopg
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from psycopg.rows import dict_row

from baton_client import Client, Settings
from baton_client.langgraph import BatonSaver

#: Baton's put and get p50 at most this many times PostgresSaver's.
LATENCY_TARGET = 2.0
#: Baton's storage for the conversation at most this fraction of PostgresSaver's.
STORAGE_TARGET = 0.2

BATON = "Baton"
POSTGRES = "PostgresSaver"
SQLITE = "SqliteSaver"
STORES = (BATON, POSTGRES, SQLITE)

#: Temp directories of this bench: ``{PREFIX}{random}``, holding ``owner`` (the pid).
PREFIX = "baton-fw-bench-"

STOP = threading.Event()


# -- helpers -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True) if sys.platform == "linux" else None
PR_SET_PDEATHSIG = 1


def child_setup(user: tuple[int, int] | None = None) -> Callable[[], None]:
    """preexec_fn: drop to ``user`` (uid, gid), then ask for SIGTERM when this process dies
    (after the uid change, which would clear it), so no child outlives a killed bench."""

    def setup() -> None:
        if user is not None:
            os.setgroups([])
            os.setgid(user[1])
            os.setuid(user[0])
        if _LIBC is not None:
            _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)

    return setup


def stop_process(process: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(sig)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale() -> None:
    """Removes the temp directories of earlier runs whose process is gone (a SIGKILL)."""
    tmp = Path(tempfile.gettempdir())
    for d in tmp.glob(f"{PREFIX}*"):
        try:
            owner = int((d / "owner").read_text().strip())
        except (OSError, ValueError):
            continue
        pidfile = d / "data" / "postmaster.pid"
        running = False
        with contextlib.suppress(OSError, ValueError, IndexError):
            running = pid_alive(int(pidfile.read_text().split()[0]))
        if not pid_alive(owner) and not running:
            shutil.rmtree(d, ignore_errors=True)


def make_dir(kind: str) -> Path:
    d = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-"))
    (d / "owner").write_text(str(os.getpid()))
    return d


# -- Postgres ----------------------------------------------------------------------------------


def find_pg_binary(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(
        Path("/usr/lib/postgresql").glob(f"*/bin/{name}"),
        key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0,
    )
    if not candidates:
        raise SystemExit(f"{name} not found on PATH or in /usr/lib/postgresql/*/bin: install PostgreSQL or pass --postgres-url")
    return str(candidates[-1])


class Cluster:
    """A throwaway Postgres cluster from the installed binaries (as the ``postgres`` user
    when run as root: initdb refuses root)."""

    def __init__(self, durable: bool) -> None:
        self.durable = durable
        self.process: subprocess.Popen[bytes] | None = None
        self.dir = make_dir("pg")
        self.data = self.dir / "data"
        self.port = free_port()
        self.user: tuple[int, int] | None = None

    def start(self) -> None:
        initdb, postgres = find_pg_binary("initdb"), find_pg_binary("postgres")
        self.data.mkdir()
        if os.geteuid() == 0:
            import pwd

            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise SystemExit("running as root needs a `postgres` user for the throwaway cluster (or pass --postgres-url)")
            self.user = (pw.pw_uid, pw.pw_gid)
            for p in (self.dir, self.data):
                os.chown(p, *self.user)
        done = subprocess.run(
            [initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"],
            capture_output=True,
            preexec_fn=child_setup(self.user),
        )
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr.decode(errors='replace')}")
        args = [postgres, "-D", str(self.data), "-p", str(self.port), "-h", "127.0.0.1", "-k", str(self.dir)]
        args += ["-c", "max_connections=200", "-c", "shared_buffers=128MB", "-c", "autovacuum=off"]
        if not self.durable:
            args += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        with open(self.dir / "postgres.log", "ab") as log:
            self.process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                preexec_fn=child_setup(self.user),
                start_new_session=True,  # Ctrl-C reaches the bench, which stops the cluster itself
            )
        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(self.admin_url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log_text = (self.dir / "postgres.log").read_text(errors="replace")
                    raise RuntimeError(f"the throwaway Postgres did not start:\n{log_text}")
                time.sleep(0.1)

    @property
    def admin_url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        # SIGINT: fast shutdown (clients disconnected, clean stop).
        stop_process(self.process, signal.SIGINT, timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)


def database_url(admin_url: str, name: str) -> str:
    parts = urlsplit(admin_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


class Databases:
    """Databases created for this run on the admin URL's server, dropped at exit."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.tag = uuid.uuid4().hex[:8]
        self.created: list[str] = []
        self.admin = psycopg.connect(admin_url, autocommit=True)

    def create(self, kind: str) -> str:
        name = f"bench_{kind}_{self.tag}"
        self.admin.execute(f'CREATE DATABASE "{name}"')
        self.created.append(name)
        return name

    def size(self, name: str) -> int:
        row = self.admin.execute("SELECT pg_database_size(%s)", (name,)).fetchone()
        return int(row[0]) if row else 0

    def setting(self, name: str) -> str:
        row = self.admin.execute(f"SHOW {name}").fetchone()
        return str(row[0]) if row else "?"

    def drop_all(self) -> None:
        for name in self.created:
            with contextlib.suppress(psycopg.Error):
                self.admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.admin.close()


def table_sizes(url: str) -> dict[str, int]:
    """Each table's size with its indexes and TOAST (pg_total_relation_size)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
    return {str(name): int(size) for name, size in rows}


# -- baton-server ------------------------------------------------------------------------------


def health(address: str) -> bool:
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


class BatonServer:
    def __init__(self, binary: str, database_url: str, workdir: Path) -> None:
        self.binary = binary
        self.database_url = database_url
        self.workdir = workdir
        self.port = free_port()
        self.metrics_port = free_port()
        self.log = workdir / "baton-server.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> None:
        args = [
            self.binary,
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
            "--retention-interval",
            "0s",
            "--metrics-listen",
            f"127.0.0.1:{self.metrics_port}",
        ]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                preexec_fn=child_setup(),
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"baton-server exited with {self.process.returncode}:\n{self.log.read_text()}")
            if health(self.address):
                return
            time.sleep(0.05)
        raise RuntimeError(f"baton-server did not answer on {self.address} in {timeout}s:\n{self.log.read_text()}")

    def stop(self) -> None:
        stop_process(self.process)

    def metrics(self) -> dict[tuple[str, str], float]:
        """``baton_request_duration_seconds`` sum and count by RPC: {(rpc, "sum"|"count"): value}."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return {}
        found: dict[tuple[str, str], float] = {}
        for m in re.finditer(r'^baton_request_duration_seconds_(sum|count)\{[^}]*rpc="([^"]+)"[^}]*\}\s+(\S+)$', text, re.M):
            found[(m.group(2), m.group(1))] = float(m.group(3))
        return found


def server_version(binary: str) -> str:
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
        return done.stdout.strip() or done.stderr.strip() or f"exit {done.returncode}"
    except OSError as e:
        return f"cannot run: {e}"


# -- timing ------------------------------------------------------------------------------------


class Recorder:
    """Latency samples by operation; ``phase`` labels where they go (None: not recorded)."""

    def __init__(self) -> None:
        self.samples: dict[tuple[str, str, str], list[float]] = defaultdict(list)
        self.phase: str | None = None
        self.lock = threading.Lock()

    def add(self, store: str, op: str, seconds: float) -> None:
        phase = self.phase
        if phase is None:
            return
        with self.lock:
            self.samples[(phase, store, op)].append(seconds)

    def get(self, phase: str, store: str, op: str) -> list[float]:
        return self.samples.get((phase, store, op), [])


def instrument(saver: Any, store: str, recorder: Recorder) -> Any:
    """Times the saver's put, get_tuple and put_writes: a subclass of its own class with the
    three methods wrapped, swapped in as the instance's class (everything else untouched)."""
    base = type(saver)

    def put(self: Any, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        t = time.perf_counter()
        try:
            return base.put(self, config, checkpoint, metadata, new_versions)
        finally:
            recorder.add(store, "put", time.perf_counter() - t)

    def get_tuple(self: Any, config: Any) -> Any:
        t = time.perf_counter()
        try:
            return base.get_tuple(self, config)
        finally:
            recorder.add(store, "get", time.perf_counter() - t)

    def put_writes(self: Any, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        t = time.perf_counter()
        try:
            return base.put_writes(self, config, writes, task_id, task_path)
        finally:
            recorder.add(store, "writes", time.perf_counter() - t)

    saver.__class__ = type(f"Timed{base.__name__}", (base,), {"put": put, "get_tuple": get_tuple, "put_writes": put_writes})
    return saver


class RpcTimer:
    """Client-side time of each Baton RPC (the gRPC call, reply decoded), by RPC name."""

    def __init__(self) -> None:
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.on = False
        self.lock = threading.Lock()

    def wrap(self, client: Client) -> Client:
        invoke = client._invoke

        def timed(rpc: Any, request: Any, timeout: float | None) -> Any:
            t = time.perf_counter()
            try:
                return invoke(rpc, request, timeout)
            finally:
                if self.on:
                    with self.lock:
                        self.samples[rpc.method].append(time.perf_counter() - t)

        client._invoke = timed  # type: ignore[method-assign]
        return client


# -- the graph and its conversation --------------------------------------------------------

WORDS = (
    "the of and to in is that for it as with was on be by this are or from at which an have not "
    "but they his her one all there can were when we use your said each she do how their if will "
    "up other about out many then them these so some would make like him into time has look two "
    "more write go see number no way could people my than first water been call who oil its now "
    "find long down day did get come made may part order refund customer account invoice shipping "
    "address payment ticket support agent checkpoint graph state message reply request approve plan "
    "deploy build test error retry timeout database server client thread session memory project"
).split()


def text_of(rng: random.Random, size: int) -> str:
    """About ``size`` bytes of word salad: compresses about as well as English prose."""
    out: list[str] = []
    n = 0
    while n < size:
        w = rng.choice(WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:size]


def message_overhead() -> int:
    """Serialized bytes a user message and a reply add besides their text."""
    serde = JsonPlusSerializer()
    pair = [HumanMessage(content="", id=str(uuid.uuid4())), AIMessage(content="", id=str(uuid.uuid4()))]
    return len(serde.dumps_typed(pair)[1]) - len(serde.dumps_typed([])[1])


class Conversation:
    """What each step sends and answers: ``bytes_per_step`` serialized in all (the user's
    message and the reply share the text half and half)."""

    def __init__(self, bytes_per_step: int) -> None:
        self.text_bytes = max(2, bytes_per_step - message_overhead())

    def texts(self, seed: str, step: int) -> tuple[str, str]:
        rng = random.Random(f"{seed}/{step}")
        half = self.text_bytes // 2
        return text_of(rng, half), text_of(rng, self.text_bytes - half)


def build_graph(saver: Any, conversation: Conversation) -> Any:
    def respond(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        # The reply to step N of this thread: the same text in every store.
        step = (len(state["messages"]) - 1) // 2
        _, reply = conversation.texts(str(config["configurable"]["thread_id"]), step)
        return {"messages": [AIMessage(content=reply)]}

    builder = StateGraph(MessagesState)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    builder.add_edge("respond", END)
    return builder.compile(checkpointer=saver)


def converse(graph: Any, conversation: Conversation, thread_id: str, steps: int) -> int:
    """Runs ``steps`` turns of one LangGraph thread; returns the final state's serialized size."""
    config = {"configurable": {"thread_id": thread_id}}
    out: dict[str, Any] = {}
    for step in range(steps):
        if STOP.is_set():
            raise KeyboardInterrupt
        user, _ = conversation.texts(thread_id, step)
        out = graph.invoke({"messages": [HumanMessage(content=user)]}, config)
    return len(JsonPlusSerializer().dumps_typed(out.get("messages", []))[1])


# -- the stores ----------------------------------------------------------------------------------


class Store:
    name = ""

    def saver(self) -> Any:
        raise NotImplementedError

    def size(self) -> int:
        raise NotImplementedError

    def close(self) -> None:
        pass


class BatonStore(Store):
    name = BATON

    def __init__(self, server: BatonServer, timer: RpcTimer, size: Callable[[], int]) -> None:
        self.server = server
        self.size = size  # type: ignore[method-assign]
        self.timer = timer
        self.project = f"bench/framework-stores/{uuid.uuid4().hex[:8]}"
        self.clients: list[Client] = []

    def saver(self) -> Any:
        client = self.timer.wrap(Client(settings=Settings(server=f"http://{self.server.address}", token=None)))
        self.clients.append(client)
        return BatonSaver(self.project, client=client)

    def close(self) -> None:
        for c in self.clients:
            with contextlib.suppress(Exception):
                c.close()


class PostgresStore(Store):
    name = POSTGRES

    def __init__(self, url: str, dbname: str, databases: Databases) -> None:
        self.url = url
        self.dbname = dbname
        self.databases = databases
        self.conns: list[psycopg.Connection[Any]] = []
        with self._conn() as conn:
            PostgresSaver(conn).setup()

    def _conn(self) -> psycopg.Connection[Any]:
        # As PostgresSaver.from_conn_string connects.
        return psycopg.Connection.connect(self.url, autocommit=True, prepare_threshold=0, row_factory=dict_row)

    def saver(self) -> Any:
        conn = self._conn()
        self.conns.append(conn)
        return PostgresSaver(conn)

    def size(self) -> int:
        return self.databases.size(self.dbname)

    def close(self) -> None:
        for c in self.conns:
            with contextlib.suppress(Exception):
                c.close()


class SqliteStore(Store):
    name = SQLITE

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conns: list[sqlite3.Connection] = []
        self.saver().setup()

    def saver(self) -> Any:
        # As SqliteSaver.from_conn_string connects (its setup turns on WAL).
        conn = sqlite3.connect(str(self.path), check_same_thread=False)
        self.conns.append(conn)
        saver = SqliteSaver(conn)
        saver.setup()
        return saver

    def size(self) -> int:
        """page_count x page_size: the database's size with what the WAL holds, as the main
        file will be once the WAL is checkpointed (the -wal file itself is not counted)."""
        with contextlib.closing(sqlite3.connect(str(self.path))) as conn:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            page = conn.execute("PRAGMA page_size").fetchone()[0]
        return int(pages) * int(page)

    def close(self) -> None:
        for c in self.conns:
            with contextlib.suppress(Exception):
                c.close()


# -- the runs ------------------------------------------------------------------------------------


def warm(saver: Any) -> None:
    """Opens the saver's connection (a gRPC channel connects on its first call) unrecorded."""
    saver.get_tuple({"configurable": {"thread_id": f"warm-{uuid.uuid4().hex}", "checkpoint_ns": ""}})


def run_threads(
    store: Store,
    recorder: Recorder,
    conversation: Conversation,
    phase: str,
    threads: int,
    steps: int,
    shared: bool,
) -> tuple[float, int]:
    """``threads`` LangGraph threads of ``steps`` steps at once, each on a Python thread of
    its own; returns the wall time and the largest final state."""
    savers: list[Any] = []
    if shared:
        savers = [instrument(store.saver(), store.name, recorder)] * threads
    else:
        savers = [instrument(store.saver(), store.name, recorder) for _ in range(threads)]
    recorder.phase = None
    for s in set(map(id, savers)):
        warm(next(x for x in savers if id(x) == s))
    graphs = [build_graph(s, conversation) for s in savers]
    tag = uuid.uuid4().hex[:8]
    recorder.phase = phase
    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"bench-{store.name}") as pool:
            futures = [pool.submit(converse, g, conversation, f"{phase}-{tag}-{i}", steps) for i, g in enumerate(graphs)]
            sizes = [f.result() for f in futures]
    finally:
        recorder.phase = None
    return time.perf_counter() - started, max(sizes)


# -- the Claude Agent SDK session store ---------------------------------------------------------


def claude_section(server: BatonServer | None, quick: bool) -> tuple[list[str], dict[str, Any] | None]:
    """Appends of 10 ~500-byte transcript entries and loads of a 200-entry session."""
    try:
        from claude_agent_sdk._internal.session_store import InMemorySessionStore
    except Exception as e:  # noqa: BLE001 - any failure to import skips the section
        return [f"skipped: claude_agent_sdk is not importable ({type(e).__name__}: {e})"], None
    try:
        from baton_client.claude import BatonSessionStore
    except Exception as e:  # noqa: BLE001
        return [f"skipped: baton_client.claude.BatonSessionStore is not importable ({type(e).__name__}: {e})"], None
    if server is None:
        return ["skipped: no baton-server"], None

    project = f"bench/claude/{uuid.uuid4().hex[:8]}"
    url = f"http://{server.address}"

    def make_baton() -> Any:
        """The store's constructor: with an AsyncClient or a Client, whichever it takes."""
        from baton_client import AsyncClient

        params = inspect.signature(BatonSessionStore).parameters
        settings = Settings(server=url, token=None)
        attempts: list[dict[str, Any]] = []
        if "aclient" in params:
            attempts.append({"aclient": AsyncClient(settings=settings)})
        if "client" in params:
            attempts.append({"client": AsyncClient(settings=settings)})
            attempts.append({"client": Client(settings=settings)})
        if "server" in params:
            attempts.append({"server": url})
        errors = []
        for kwargs in attempts:
            for proj in ("project", "project_key"):
                if proj in params:
                    kwargs = {**kwargs, proj: project}
            try:
                return BatonSessionStore(**kwargs)
            except TypeError as e:
                errors.append(str(e))
        raise TypeError(f"cannot construct BatonSessionStore{inspect.signature(BatonSessionStore)}: {errors}")

    batches = 20  # of 10 entries: a 200-entry session
    loads = 10 if quick else 50

    def entry(rng: random.Random, i: int) -> dict[str, Any]:
        return {
            "type": "assistant" if i % 2 else "user",
            "uuid": str(uuid.UUID(int=rng.getrandbits(128))),
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            "message": {"role": "assistant" if i % 2 else "user", "content": text_of(rng, 400)},
        }

    async def measure(store: Any) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {"append": [], "load": []}
        rng = random.Random(7)
        # Warm-up: one session of its own, unrecorded.
        warm_key = {"project_key": "bench", "session_id": str(uuid.uuid4())}
        await store.append(warm_key, [entry(rng, i) for i in range(10)])
        await store.load(warm_key)
        key = {"project_key": "bench", "session_id": str(uuid.uuid4())}
        for b in range(batches):
            batch = [entry(rng, b * 10 + i) for i in range(10)]
            t = time.perf_counter()
            await store.append(key, batch)
            out["append"].append(time.perf_counter() - t)
        for _ in range(loads):
            t = time.perf_counter()
            got = await store.load(key)
            out["load"].append(time.perf_counter() - t)
            if got is None or len(got) != batches * 10:
                raise RuntimeError(f"load returned {0 if got is None else len(got)} entries, expected {batches * 10}")
        return out

    async def main() -> dict[str, dict[str, list[float]]]:
        baton = make_baton()
        try:
            return {"InMemorySessionStore": await measure(InMemorySessionStore()), BATON: await measure(baton)}
        finally:
            for closer in ("aclose", "close"):
                fn = getattr(baton, closer, None)
                if fn is not None:
                    result = fn()
                    if inspect.isawaitable(result):
                        await result
                    break

    try:
        results = asyncio.run(main())
    except Exception as e:  # noqa: BLE001 - report, do not fail the bench
        return [f"failed: {type(e).__name__}: {e}"], None
    lines = [
        f"{batches} appends of 10 entries (~500 B each), then {loads} loads of the {batches * 10}-entry session; asyncio, one session",
        f"{'operation':<10} {'stat':<5} {'Baton ms':>10} {'InMemory ms':>12} {'Baton/InMemory':>15}",
    ]
    for op in ("append", "load"):
        for q, label in ((0.5, "p50"), (0.99, "p99")):
            b = percentile(results[BATON][op], q) * 1e3
            m = percentile(results["InMemorySessionStore"][op], q) * 1e3
            lines.append(f"{op:<10} {label:<5} {b:>10.3f} {m:>12.4f} {ratio(b, m):>14.0f}x")
    return lines, results


# -- the report ----------------------------------------------------------------------------------


def header(args: argparse.Namespace, server_bin: str, pg_version: str, mode: str) -> list[str]:
    cmd = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])
    return [
        "Baton vs LangGraph's own checkpoint stores (client/python/bench/framework_stores.py)",
        f"command:   {cmd}",
        f"machine:   {os.cpu_count()} CPUs, {platform.machine()}, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}",
        f"versions:  langgraph {version('langgraph')}, langgraph-checkpoint {version('langgraph-checkpoint')}, "
        f"langgraph-checkpoint-postgres {version('langgraph-checkpoint-postgres')}, "
        f"langgraph-checkpoint-sqlite {version('langgraph-checkpoint-sqlite')}, langchain-core {version('langchain-core')}",
        f"           baton-client {version('baton-client')}, grpcio {version('grpcio')}, protobuf {version('protobuf')}, "
        f"psycopg {version('psycopg')}, SQLite {sqlite3.sqlite_version}, claude-agent-sdk {version('claude-agent-sdk')}",
        f"server:    {server_version(server_bin)} ({server_bin})",
        f"postgres:  {pg_version}",
        f"mode:      {mode}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short run for CI: 20 steps, fewer samples (well under a minute)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--server-bin", default=os.environ.get("BATON_SERVER_BIN", ""), help="baton-server binary (default $BATON_SERVER_BIN)")
    parser.add_argument("--postgres-url", default="", help="an existing server's admin URL (may CREATE DATABASE) instead of a throwaway cluster")
    parser.add_argument("--postgres-no-fsync", action="store_true", help="throwaway cluster with fsync, synchronous_commit, full_page_writes off")
    parser.add_argument("--steps", type=int, default=None, help="steps of the 1-thread conversation that storage is measured on (200; --quick 20)")
    parser.add_argument("--concurrent-steps", type=int, default=None, help="steps of each thread in the concurrent run (50; --quick 10)")
    parser.add_argument("--threads", type=int, default=8, help="LangGraph threads driven at once in the concurrent run (8)")
    parser.add_argument("--bytes-per-step", type=int, default=1024, help="serialized bytes each step adds to the messages channel (1024)")
    parser.add_argument("--shared-saver", action="store_true", help="one saver per store shared by all threads (default: one per thread)")
    parser.add_argument("--no-claude", action="store_true", help="skip the Claude Agent SDK SessionStore section")
    args = parser.parse_args(argv)
    steps = args.steps or (20 if args.quick else 200)
    csteps = args.concurrent_steps or (10 if args.quick else 50)
    if not args.server_bin:
        parser.error("name the baton-server binary: --server-bin PATH or BATON_SERVER_BIN=PATH")
    if not (os.path.isfile(args.server_bin) and os.access(args.server_bin, os.X_OK)):
        parser.error(f"--server-bin {args.server_bin!r} is not an executable file")

    # SIGTERM unwinds like Ctrl-C, so the cleanup below runs either way.
    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    sweep_stale()
    started = time.monotonic()
    out = print
    with contextlib.ExitStack() as cleanup:

        def later(fn: Callable[[], None]) -> None:
            def run() -> None:
                with contextlib.suppress(Exception):
                    fn()

            cleanup.callback(run)

        # Cleanup must not be cut short by a second Ctrl-C.
        cleanup.callback(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        later(lambda: STOP.set())
        workdir = make_dir("run")
        later(lambda: shutil.rmtree(workdir, ignore_errors=True))

        try:
            if args.postgres_url:
                admin_url = args.postgres_url
                cluster_note = f"existing server at {urlsplit(admin_url).hostname}:{urlsplit(admin_url).port or 5432}"
            else:
                cluster = Cluster(durable=not args.postgres_no_fsync)
                later(cluster.stop)
                cluster.start()
                admin_url = cluster.admin_url
                cluster_note = "throwaway cluster" + (" (fsync, synchronous_commit, full_page_writes off)" if args.postgres_no_fsync else " (durability defaults: fsync, synchronous_commit on)")
            databases = Databases(admin_url)
            later(databases.drop_all)
            baton_db = databases.create("baton")
            pgsaver_db = databases.create("pgsaver")
            pg_version = (
                f"{databases.setting('server_version')}, {cluster_note}, autovacuum {databases.setting('autovacuum')}, "
                f"fsync {databases.setting('fsync')}, synchronous_commit {databases.setting('synchronous_commit')}"
            )

            server = BatonServer(args.server_bin, database_url(admin_url, baton_db), workdir)
            later(server.stop)
            server.start()

            timer = RpcTimer()
            recorder = Recorder()
            stores: dict[str, Store] = {
                BATON: BatonStore(server, timer, lambda: databases.size(baton_db)),
                POSTGRES: PostgresStore(database_url(admin_url, pgsaver_db), pgsaver_db, databases),
                SQLITE: SqliteStore(workdir / "sqlite-saver.db"),
            }
            for s in stores.values():
                later(s.close)

            saver_mode = "one saver shared by all threads" if args.shared_saver else "one saver (own connection or gRPC channel) per LangGraph thread"
            mode = (
                f"sync savers (put, get_tuple, put_writes) timed by a subclass; {args.threads} concurrent LangGraph threads on a "
                f"ThreadPoolExecutor, {saver_mode}; default serde (JsonPlusSerializer), LangGraph's default durability"
            )
            for line in header(args, args.server_bin, pg_version, mode):
                out(line)
            conversation = Conversation(args.bytes_per_step)
            out(
                f"workload:  StateGraph(MessagesState) START -> respond -> END; each step invokes it with a user message and "
                f"the node answers: {args.bytes_per_step} B serialized a step ({conversation.text_bytes} B of text), "
                f"LangGraph makes 1 get_tuple, 3 puts, 2 put_writes a step"
            )
            out(
                f"runs:      1 thread x {steps} steps (storage is measured on it), then {args.threads} threads x {csteps} steps; "
                f"each store warmed up first (a 3-step thread, unrecorded)"
            )
            out("")

            # Warm-up: connections, the Baton project, the tables' first pages.
            recorder.phase = None
            for store in stores.values():
                run_threads(store, recorder, conversation, "warmup", 1, 3, False)

            # The conversation storage is measured on (1 thread), store after store.
            sizes: dict[str, tuple[int, int]] = {}
            walls: dict[tuple[str, str], float] = {}
            final_state = 0
            tables: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
            metrics_before: dict[tuple[str, str], float] = {}
            metrics_after: dict[tuple[str, str], float] = {}
            for name, store in stores.items():
                before = store.size()
                tb = table_sizes(database_url(admin_url, baton_db if name == BATON else pgsaver_db)) if name != SQLITE else {}
                if name == BATON:
                    metrics_before = server.metrics()
                    timer.on = True
                wall, final_state = run_threads(store, recorder, conversation, "1", 1, steps, args.shared_saver)
                if name == BATON:
                    timer.on = False
                    metrics_after = server.metrics()
                sizes[name] = (before, store.size())
                if name != SQLITE:
                    tables[name] = (tb, table_sizes(database_url(admin_url, baton_db if name == BATON else pgsaver_db)))
                walls[("1", name)] = wall
                out(f"  1 thread x {steps} steps on {name}: {wall:.1f} s")

            # The concurrent run.
            cphase = str(args.threads)
            for name, store in stores.items():
                wall, _ = run_threads(store, recorder, conversation, cphase, args.threads, csteps, args.shared_saver)
                walls[(cphase, name)] = wall
                out(f"  {args.threads} threads x {csteps} steps on {name}: {wall:.1f} s")
            out("")

            misses: list[str] = []
            # Latency table.
            out(f"Checkpoint latency (ms), as LangGraph calls the saver (put/get_tuple timed around the saver's own method)")
            cols = f"{'op':<6} {'threads':>7} {'stat':<4} {'n':>5} {BATON:>9} {POSTGRES:>14} {SQLITE:>12} {'Baton/PG':>9} {'Baton/SQLite':>12}  target"
            out(cols)
            out("-" * len(cols) + "------------")
            for op in ("put", "get", "writes"):
                for phase in ("1", cphase):
                    for q, label in ((0.5, "p50"), (0.99, "p99")):
                        v = {n: percentile(recorder.get(phase, n, op), q) * 1e3 for n in STORES}
                        n = len(recorder.get(phase, BATON, op))
                        r_pg, r_sq = ratio(v[BATON], v[POSTGRES]), ratio(v[BATON], v[SQLITE])
                        target = ""
                        if op in ("put", "get") and label == "p50":
                            ok = r_pg <= LATENCY_TARGET
                            target = f"Baton/PG <= {LATENCY_TARGET:g}x: {'PASS' if ok else 'MISS'}"
                            if not ok:
                                misses.append(f"{op} p50 at {phase} thread(s): Baton/PostgresSaver {r_pg:.2f}x > {LATENCY_TARGET:g}x")
                        out(
                            f"{op:<6} {phase:>7} {label:<4} {n:>5} {v[BATON]:>9.2f} {v[POSTGRES]:>14.2f} {v[SQLITE]:>12.2f} "
                            f"{r_pg:>8.2f}x {r_sq:>11.2f}x  {target}"
                        )
            out("(writes = put_writes: no target; n = Baton's samples, the other stores' counts are the same)")
            out("")

            # Storage table.
            out(
                f"Storage after the 1-thread conversation of {steps} steps (final state {fmt_bytes(final_state)} serialized): "
                "growth of pg_database_size (Baton: baton-server's database; PostgresSaver: its own), "
                "SqliteSaver: page_count x page_size; no VACUUM or CHECKPOINT"
            )
            cols = f"{'store':<14} {'before':>12} {'after':>12} {'growth':>12} {'per step':>10} {'x final state':>14}"
            out(cols)
            out("-" * len(cols))
            growth = {n: sizes[n][1] - sizes[n][0] for n in STORES}
            for n in STORES:
                b, a = sizes[n]
                out(
                    f"{n:<14} {fmt_bytes(b):>12} {fmt_bytes(a):>12} {fmt_bytes(growth[n]):>12} "
                    f"{fmt_bytes(growth[n] / steps):>10} {ratio(growth[n], final_state):>13.1f}x"
                )
            r = ratio(growth[BATON], growth[POSTGRES])
            ok = r <= STORAGE_TARGET
            if not ok:
                misses.append(f"storage: Baton/PostgresSaver {r:.3f} > {STORAGE_TARGET:g}")
            out(
                f"Baton/PostgresSaver {r:.3f} (target <= {STORAGE_TARGET:g}: {'PASS' if ok else 'MISS'}); "
                f"Baton/SqliteSaver {ratio(growth[BATON], growth[SQLITE]):.3f}"
            )
            for name, (tb, ta) in tables.items():
                grew = sorted(((ta.get(t, 0) - tb.get(t, 0), t) for t in ta), reverse=True)
                shown = ", ".join(f"{t} {fmt_bytes(g)}" for g, t in grew if g > 0)
                out(f"  {name} tables (with indexes and TOAST) grew: {shown or 'nothing'}")
            out("")

            # Where Baton's put and get time goes (1-thread run).
            out("Where Baton's time goes (1-thread run): the saver's call, the gRPC calls it makes (client side), the server's time to reply")
            out(f"{'rpc':<24} {'calls':>6} {'client p50 ms':>14} {'client mean':>12} {'server mean':>12} {'client-server':>14}")
            for rpc, samples in sorted(timer.samples.items()):
                c = metrics_after.get((rpc, "count"), 0) - metrics_before.get((rpc, "count"), 0)
                s = metrics_after.get((rpc, "sum"), 0) - metrics_before.get((rpc, "sum"), 0)
                server_mean = s / c * 1e3 if c else float("nan")
                cm = sum(samples) / len(samples) * 1e3
                out(f"{rpc:<24} {len(samples):>6} {percentile(samples, 0.5) * 1e3:>14.3f} {cm:>12.3f} {server_mean:>12.3f} {cm - server_mean:>14.3f}")
            per_step: dict[str, float] = {rpc: sum(v) / steps * 1e3 for rpc, v in timer.samples.items()}
            for op, rpcs in (("put", ("MissingChunks", "PutChunks", "PutThreadCheckpoint")), ("get", ("GetThreadCheckpoint", "GetChunks"))):
                saver_total = sum(recorder.get("1", BATON, op)) / steps * 1e3
                rpc_total = sum(per_step.get(r, 0.0) for r in rpcs)
                out(
                    f"{op}: {saver_total:.2f} ms a step in the saver, of which {rpc_total:.2f} ms in its RPCs ({', '.join(rpcs)}); "
                    f"{saver_total - rpc_total:.2f} ms in Python (serde, hashing, protobuf)"
                )
            out("")

            # The Claude Agent SDK session store.
            out("Claude Agent SDK SessionStore: baton_client.claude.BatonSessionStore vs InMemorySessionStore")
            if args.no_claude:
                out("  skipped: --no-claude")
            else:
                lines, _ = claude_section(server, args.quick)
                for line in lines:
                    out(f"  {line}")
            out("")

            out(f"targets: {'all met' if not misses else 'missed: ' + '; '.join(misses)}")
            out(f"wall time: {time.monotonic() - started:.1f} s")
            return 1 if (misses and args.check) else 0
        except KeyboardInterrupt:
            print("\ninterrupted: stopping baton-server and Postgres, removing the temp files", file=sys.stderr)
            return 130


if __name__ == "__main__":
    sys.exit(main())
