#!/usr/bin/env python3
"""Baton's LangGraph checkpointer next to LangGraph's own stores, in one run.

    python client/python/bench/framework_stores.py --server-bin target/release/baton-server
    python client/python/bench/framework_stores.py --quick      # well under a minute (CI)
    python client/python/bench/framework_stores.py --check      # exit 1 when a target is missed

One compiled LangGraph ``StateGraph`` (a messages channel that grows by about 1 KB a step:
a user message in, a reply out) runs on ``BatonSaver``, LangGraph's ``PostgresSaver`` and its
``SqliteSaver``. Each saver's ``put``, ``get_tuple`` and ``put_writes`` are timed by a thin
subclass of its own class, so the latencies are those of the calls LangGraph really makes.

- Latency: put and get p50/p99 with 1 LangGraph thread (the conversation storage is measured
  on) and with 8 at once, for each store, with Baton/PostgresSaver and Baton/SqliteSaver.
- Storage: after a 1-thread conversation of ``--steps`` steps (200), each store in a database
  of its own in one Postgres cluster: the growth of ``pg_database_size`` for Baton
  (baton-server on its own database) and PostgresSaver; for SqliteSaver its page count
  times its page size. No VACUUM, ANALYZE or CHECKPOINT runs before or after; the throwaway
  cluster has autovacuum off, so the figures do not depend on when it would have woken.
- Diagnostics: the RPCs Baton's saver makes (client time, server time from baton-server's
  metrics, bytes sent), the statements each store runs (pg_stat_statements), CPU per step of
  the bench, baton-server and Postgres, and a cold read (a fresh saver, as on another machine).
- Optionally the Claude Agent SDK ``SessionStore``: ``baton_client.claude.BatonSessionStore``
  against the SDK's ``InMemorySessionStore`` (append a batch, load a whole session).

The bench starts what it needs (a throwaway Postgres cluster from the installed binaries, or
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
import resource
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
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

#: Temp directories of this bench: ``{PREFIX}{kind}-{random}``, holding ``owner`` (the pid).
PREFIX = "baton-fw-bench-"

#: Set when the run is interrupted: the conversations stop at their next step.
STOP = threading.Event()


# -- small helpers ---------------------------------------------------------------------------


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
    for unit in ("B", "KB", "MB"):
        if abs(n) < 1024:
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.2f} GB"


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True) if sys.platform == "linux" else None
PR_SET_PDEATHSIG = 1


def child_setup(user: tuple[int, int] | None = None) -> Callable[[], None]:
    """preexec_fn: drop to ``user`` (uid, gid), then ask for SIGTERM when the bench dies
    (after the uid change, which clears it), so that no child outlives a killed bench."""

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


def make_dir(kind: str) -> Path:
    d = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-"))
    (d / "owner").write_text(str(os.getpid()))
    return d


def sweep_stale() -> None:
    """Removes the temp directories of earlier runs whose process is gone (killed outright)."""
    for d in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        try:
            owner = int((d / "owner").read_text().strip())
        except (OSError, ValueError):
            continue
        running = False
        with contextlib.suppress(OSError, ValueError, IndexError):
            running = pid_alive(int((d / "data" / "postmaster.pid").read_text().split()[0]))
        if not pid_alive(owner) and not running:
            shutil.rmtree(d, ignore_errors=True)


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the command name (which may hold spaces): state is field 3.
    return text[text.rindex(")") + 2 :].split()


def process_cpu(pid: int | None, children: bool = False) -> float | None:
    """CPU seconds of a process (user + system, every thread); with ``children``, plus its
    reaped children's and its live children's (a postmaster and its backends)."""
    if pid is None or not Path("/proc").is_dir():
        return None
    f = _stat(pid)
    if f is None:
        return None
    # utime, stime, cutime, cstime are fields 14-17: 11-14 here.
    total = int(f[11]) + int(f[12])
    if children:
        total += int(f[13]) + int(f[14])
        for p in Path("/proc").iterdir():
            if p.name.isdigit():
                c = _stat(int(p.name))
                if c is not None and c[1] == str(pid):
                    total += int(c[11]) + int(c[12])
    return total / _TICK


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# -- Postgres --------------------------------------------------------------------------------


def find_pg_binary(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(
        Path("/usr/lib/postgresql").glob(f"*/bin/{name}"),
        key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0,
    )
    if not candidates:
        raise SystemExit(
            f"{name} is not on PATH nor in /usr/lib/postgresql/*/bin: install PostgreSQL or pass --postgres-url"
        )
    return str(candidates[-1])


class Cluster:
    """A throwaway Postgres cluster from the installed binaries, on a free port (as the
    ``postgres`` user when the bench runs as root: initdb refuses root)."""

    def __init__(self, durable: bool, stats: bool) -> None:
        self.durable = durable
        self.stats = stats
        self.process: subprocess.Popen[bytes] | None = None
        self.dir = make_dir("pg")
        self.data = self.dir / "data"
        self.port = free_port()

    def start(self) -> None:
        initdb, postgres = find_pg_binary("initdb"), find_pg_binary("postgres")
        self.data.mkdir()
        user = None
        if os.geteuid() == 0:
            import pwd

            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise SystemExit(
                    "as root, the throwaway cluster needs a `postgres` user (or pass --postgres-url)"
                ) from None
            user = (pw.pw_uid, pw.pw_gid)
            for p in (self.dir, self.data):
                os.chown(p, *user)
        done = subprocess.run(
            [initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"],
            capture_output=True,
            preexec_fn=child_setup(user),
        )
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr.decode(errors='replace')}")
        args = [postgres, "-D", str(self.data), "-p", str(self.port), "-h", "127.0.0.1", "-k", str(self.dir)]
        args += ["-c", "max_connections=200", "-c", "shared_buffers=128MB", "-c", "autovacuum=off"]
        if self.stats:
            args += ["-c", "shared_preload_libraries=pg_stat_statements"]
        if not self.durable:
            args += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        with open(self.dir / "postgres.log", "ab") as log:
            self.process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                preexec_fn=child_setup(user),
                start_new_session=True,  # Ctrl-C reaches the bench only, which stops the cluster
            )
        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(self.admin_url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log_text = (self.dir / "postgres.log").read_text(errors="replace")
                    raise RuntimeError(f"the throwaway Postgres did not start:\n{log_text}") from None
                time.sleep(0.1)

    @property
    def admin_url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def stop(self) -> None:
        stop_process(self.process, signal.SIGINT, timeout=30)  # fast shutdown
        shutil.rmtree(self.dir, ignore_errors=True)


def database_url(admin_url: str, name: str) -> str:
    return urlunsplit(urlsplit(admin_url)._replace(path=f"/{name}"))


class Databases:
    """The databases of this run on the admin URL's server (dropped at exit), and what the
    server says about them."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.tag = uuid.uuid4().hex[:8]
        self.created: list[str] = []
        self.admin = psycopg.connect(admin_url, autocommit=True)
        self.stats = False

    def create(self, kind: str) -> str:
        name = f"bench_{kind}_{self.tag}"
        self.admin.execute(f'CREATE DATABASE "{name}"')
        self.created.append(name)
        return name

    def url(self, name: str) -> str:
        return database_url(self.admin_url, name)

    def size(self, name: str) -> int:
        row = self.admin.execute("SELECT pg_database_size(%s)", (name,)).fetchone()
        return int(row[0]) if row else 0

    def setting(self, name: str) -> str:
        row = self.admin.execute(f"SHOW {name}").fetchone()
        return str(row[0]) if row else "?"

    def enable_stats(self, create: bool) -> str:
        """pg_stat_statements in the admin database when the server has it loaded: created
        there if ``create`` (the throwaway cluster), else used only if already installed."""
        try:
            if create:
                self.admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            elif not self.admin.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'").fetchone():
                return "no pg_stat_statements (not installed in the admin database; the bench installs nothing there)"
            self.admin.execute("SELECT pg_stat_statements_reset()")
            self.stats = True
            return "pg_stat_statements on"
        except psycopg.Error as e:
            return f"no pg_stat_statements ({str(e).strip().splitlines()[0]})"

    def reset_stats(self) -> None:
        if self.stats:
            self.admin.execute("SELECT pg_stat_statements_reset()")

    def statements(self, name: str) -> list[tuple[str, int, float]]:
        """(query, calls, total ms) of each statement run in database ``name`` since the reset."""
        if not self.stats:
            return []
        rows = self.admin.execute(
            "SELECT query, calls, total_exec_time FROM pg_stat_statements "
            "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = %s) ORDER BY total_exec_time DESC",
            (name,),
        ).fetchall()
        return [(str(q), int(c), float(t)) for q, c, t in rows]

    def table_sizes(self, name: str) -> dict[str, int]:
        """Each table's size with its indexes and TOAST (pg_total_relation_size)."""
        with psycopg.connect(self.url(name)) as conn:
            rows = conn.execute(
                "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind IN ('r', 'p', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
            ).fetchall()
        return {str(t): int(s) for t, s in rows}

    def stored_values(self, name: str, table: str, column: str) -> tuple[int, int, int] | None:
        """Rows, the column's bytes (octet_length) and its bytes on disk (pg_column_size: after
        TOAST's compression) over the whole table."""
        try:
            with psycopg.connect(self.url(name)) as conn:
                row = conn.execute(
                    f"SELECT count(*), coalesce(sum(octet_length({column})), 0), "
                    f"coalesce(sum(pg_column_size({column})), 0) FROM {table}"
                ).fetchone()
        except psycopg.Error:
            return None
        return (int(row[0]), int(row[1]), int(row[2])) if row else None

    def drop_all(self) -> None:
        for name in self.created:
            with contextlib.suppress(psycopg.Error):
                self.admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.admin.close()


# -- baton-server ----------------------------------------------------------------------------


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
    """baton-server on a free port, with the flags the client tests use, and its metrics."""

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

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self, timeout: float = 60) -> None:
        args = [self.binary, "--listen", self.address, "--database-url", self.database_url]
        args += ["--log-level", "warn", "--rate-limit", "0", "--auth-failure-rate", "0", "--retention-interval", "0s"]
        args += ["--metrics-listen", f"127.0.0.1:{self.metrics_port}"]
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
        pattern = r'^baton_request_duration_seconds_(sum|count)\{[^}]*rpc="([^"]+)"[^}]*\}\s+(\S+)$'
        for m in re.finditer(pattern, text, re.M):
            found[(m.group(2), m.group(1))] = float(m.group(3))
        return found


def server_version(binary: str) -> str:
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
        return done.stdout.strip() or done.stderr.strip() or f"exit {done.returncode}"
    except OSError as e:
        return f"cannot run: {e}"


# -- timing ----------------------------------------------------------------------------------


class Recorder:
    """Latency samples by (phase, store, op); ``phase`` None: not recorded."""

    def __init__(self) -> None:
        self.samples: dict[tuple[str, str, str], list[float]] = defaultdict(list)
        self.phase: str | None = None
        self.lock = threading.Lock()

    def add(self, store: str, op: str, seconds: float) -> None:
        phase = self.phase
        if phase is not None:
            with self.lock:
                self.samples[(phase, store, op)].append(seconds)

    def get(self, phase: str, store: str, op: str) -> list[float]:
        return self.samples.get((phase, store, op), [])


def instrument(saver: Any, store: str, recorder: Recorder) -> Any:
    """Times the saver's put, get_tuple and put_writes: a subclass of the saver's own class
    with those three wrapped becomes the instance's class (nothing else changes)."""
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

    methods = {"put": put, "get_tuple": get_tuple, "put_writes": put_writes}
    saver.__class__ = type(f"Timed{base.__name__}", (base,), methods)
    return saver


def payload_bytes(request: Any) -> int:
    """The bytes a request carries for the store: chunk data, a checkpoint's payload, pending
    writes' values (ByteSize would serialize the request again: 0.2 ms for 200 KB)."""
    kind = request.DESCRIPTOR.name
    if kind == "PutChunksRequest":
        return sum(len(c.data) for c in request.chunks)
    if kind == "PutThreadCheckpointRequest":
        return len(request.payload) + len(request.metadata_json)
    if kind == "PutThreadWritesRequest":
        return sum(len(w.value) for w in request.writes)
    return 0


class RpcTimer:
    """Client-side time (request sent to reply decoded) and payload bytes of each Baton RPC."""

    def __init__(self) -> None:
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)
        self.sent: dict[str, int] = defaultdict(int)
        self.on = False
        self.lock = threading.Lock()

    def wrap(self, client: Client) -> Client:
        invoke = client._invoke

        def timed(rpc: Any, request: Any, timeout: float | None) -> Any:
            if not self.on:
                return invoke(rpc, request, timeout)
            size = payload_bytes(request)
            failed = False
            t = time.perf_counter()
            try:
                return invoke(rpc, request, timeout)
            except Exception:
                failed = True
                raise
            finally:
                took = time.perf_counter() - t
                with self.lock:
                    self.samples[rpc.method].append(took)
                    self.sent[rpc.method] += size
                    self.errors[rpc.method] += failed

        client._invoke = timed  # type: ignore[method-assign]
        return client


# -- the graph and its conversation ----------------------------------------------------------

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
    """``size`` bytes of word salad, which compresses about as well as English prose."""
    out: list[str] = []
    n = 0
    while n < size:
        w = rng.choice(WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:size]


def message_overhead() -> int:
    """Serialized bytes a user message and a reply add to the channel besides their text."""
    serde = JsonPlusSerializer()
    pair = [HumanMessage(content="", id=str(uuid.uuid4())), AIMessage(content="", id=str(uuid.uuid4()))]
    return len(serde.dumps_typed(pair)[1]) - len(serde.dumps_typed([])[1])


class Conversation:
    """What each step sends and answers: ``bytes_per_step`` serialized in all, the text
    shared half and half by the user's message and the reply; the same in every store."""

    def __init__(self, bytes_per_step: int, durability: str) -> None:
        self.text_bytes = max(2, bytes_per_step - message_overhead())
        self.durability = durability

    def texts(self, thread_id: str, step: int) -> tuple[str, str]:
        rng = random.Random(f"{thread_id}/{step}")
        half = self.text_bytes // 2
        return text_of(rng, half), text_of(rng, self.text_bytes - half)


def build_graph(saver: Any, conversation: Conversation) -> Any:
    def respond(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        step = (len(state["messages"]) - 1) // 2
        _, reply = conversation.texts(str(config["configurable"]["thread_id"]), step)
        return {"messages": [AIMessage(content=reply)]}

    builder = StateGraph(MessagesState)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    builder.add_edge("respond", END)
    return builder.compile(checkpointer=saver)


def converse(graph: Any, conversation: Conversation, thread_id: str, steps: int) -> int:
    """``steps`` turns of one LangGraph thread; returns the final state's serialized size."""
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    out: dict[str, Any] = {}
    for step in range(steps):
        if STOP.is_set():
            raise KeyboardInterrupt
        user, _ = conversation.texts(thread_id, step)
        out = graph.invoke({"messages": [HumanMessage(content=user)]}, config, durability=conversation.durability)
    return len(JsonPlusSerializer().dumps_typed(out.get("messages", []))[1])


# -- the stores ------------------------------------------------------------------------------


class Store:
    """One store: savers for it (each on a connection of its own) and its size."""

    name = ""
    #: The Postgres database it lives in (None: SQLite).
    database: str | None = None

    def saver(self) -> Any:
        raise NotImplementedError

    def fresh(self, saver: Any) -> Any:
        """A new saver on ``saver``'s connection, with nothing cached (another process)."""
        raise NotImplementedError

    def size(self) -> int:
        raise NotImplementedError

    def close(self) -> None:
        for c in getattr(self, "conns", []):
            with contextlib.suppress(Exception):
                c.close()


class BatonStore(Store):
    name = BATON

    def __init__(self, server: BatonServer, timer: RpcTimer, databases: Databases, database: str) -> None:
        self.server = server
        self.timer = timer
        self.databases = databases
        self.database = database
        self.project = f"bench/framework-stores/{uuid.uuid4().hex[:8]}"
        self.conns: list[Client] = []

    def saver(self) -> Any:
        client = Client(settings=Settings(server=f"http://{self.server.address}", token=None))
        self.conns.append(self.timer.wrap(client))
        return BatonSaver(self.project, client=client)

    def fresh(self, saver: Any) -> Any:
        return BatonSaver(self.project, client=saver.client)

    def size(self) -> int:
        return self.databases.size(self.database or "")


class PostgresStore(Store):
    name = POSTGRES

    def __init__(self, databases: Databases, database: str) -> None:
        self.databases = databases
        self.database = database
        self.conns: list[psycopg.Connection[Any]] = []
        PostgresSaver(self._connect()).setup()

    def _connect(self) -> psycopg.Connection[Any]:
        # As PostgresSaver.from_conn_string connects.
        conn = psycopg.Connection.connect(
            self.databases.url(self.database or ""), autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
        self.conns.append(conn)
        return conn

    def saver(self) -> Any:
        return PostgresSaver(self._connect())

    def fresh(self, saver: Any) -> Any:
        return PostgresSaver(saver.conn)

    def size(self) -> int:
        return self.databases.size(self.database or "")


class SqliteStore(Store):
    name = SQLITE

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conns: list[sqlite3.Connection] = []
        self.saver()

    def saver(self) -> Any:
        # As SqliteSaver.from_conn_string connects; its setup turns WAL on.
        conn = sqlite3.connect(str(self.path), check_same_thread=False)
        self.conns.append(conn)
        saver = SqliteSaver(conn)
        saver.setup()
        return saver

    def fresh(self, saver: Any) -> Any:
        fresh = SqliteSaver(saver.conn)
        fresh.setup()
        return fresh

    def size(self) -> int:
        """page_count x page_size: the database with what its WAL holds, as the main file
        will be once the WAL is checkpointed (the -wal file itself is not counted)."""
        with contextlib.closing(sqlite3.connect(str(self.path))) as conn:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            page = conn.execute("PRAGMA page_size").fetchone()[0]
        return int(pages) * int(page)


def statement_label(query: str, width: int = 96) -> str:
    """A statement, short: a SELECT's column list is left out for what it reads from."""
    text = " ".join(query.split())
    m = re.match(r"(?is)(select)\s.*?\s(from\s.*)", text)
    if m and len(text) > width:
        text = f"{m.group(1)} ... {m.group(2)}"
    return text if len(text) <= width else text[: width - 3] + "..."


# -- the runs --------------------------------------------------------------------------------


@dataclass
class Cpu:
    """CPU seconds used during a run: the bench process, baton-server, the Postgres cluster."""

    bench: float = 0.0
    server: float | None = None
    postgres: float | None = None


@dataclass
class Run:
    wall: float
    final_state: int
    cpu: Cpu
    savers: list[Any] = field(default_factory=list)
    threads: list[str] = field(default_factory=list)


def run_threads(
    store: Store,
    recorder: Recorder,
    conversation: Conversation,
    phase: str,
    threads: int,
    steps: int,
    shared: bool,
    pids: tuple[int | None, int | None],
) -> Run:
    """``threads`` LangGraph threads of ``steps`` steps at once, each on a Python thread of
    its own (savers: one per thread, or one shared)."""
    if shared:
        savers = [instrument(store.saver(), store.name, recorder)] * threads
    else:
        savers = [instrument(store.saver(), store.name, recorder) for _ in range(threads)]
    recorder.phase = None
    for s in {id(s): s for s in savers}.values():
        # Opens the connection (a gRPC channel connects on its first call), unrecorded.
        s.get_tuple({"configurable": {"thread_id": f"warm-{uuid.uuid4().hex}", "checkpoint_ns": ""}})
    graphs = [build_graph(s, conversation) for s in savers]
    tag = uuid.uuid4().hex[:8]
    thread_ids = [f"{phase}-{tag}-{i}" for i in range(threads)]
    server_pid, pg_pid = pids
    cpu0 = (self_cpu(), process_cpu(server_pid), process_cpu(pg_pid, children=True))
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"bench-{store.name}")
    recorder.phase = phase
    started = time.perf_counter()
    try:
        futures = [pool.submit(converse, g, conversation, t, steps) for g, t in zip(graphs, thread_ids, strict=True)]
        sizes = [f.result() for f in futures]
    except BaseException:
        # Interrupted, or a conversation failed: the others stop at their next step.
        STOP.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        recorder.phase = None
    pool.shutdown()
    wall = time.perf_counter() - started
    cpu1 = (self_cpu(), process_cpu(server_pid), process_cpu(pg_pid, children=True))
    used = Cpu(
        bench=cpu1[0] - cpu0[0],
        server=None if cpu0[1] is None or cpu1[1] is None else cpu1[1] - cpu0[1],
        postgres=None if cpu0[2] is None or cpu1[2] is None else cpu1[2] - cpu0[2],
    )
    return Run(wall, max(sizes), used, savers, thread_ids)


def cold_gets(store: Store, saver: Any, thread_id: str, n: int) -> list[float]:
    """Reads of a thread's latest checkpoint by a fresh saver each time (nothing cached:
    another process resuming the thread), on a connection already open."""
    config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    took = []
    for _ in range(n):
        fresh = store.fresh(saver)
        t = time.perf_counter()
        found = type(fresh).get_tuple(fresh, config)
        took.append(time.perf_counter() - t)
        if found is None:
            raise RuntimeError(f"{store.name}: no checkpoint for thread {thread_id}")
    return took


# -- the Claude Agent SDK session store ------------------------------------------------------


def claude_section(server: BatonServer, quick: bool) -> list[str]:
    """Appends of 10 ~500-byte transcript entries (sessions of 200 entries) and loads of a
    whole session, on Baton's store and on the SDK's in-memory one."""
    try:
        from claude_agent_sdk._internal.session_store import InMemorySessionStore
    except Exception as e:  # whatever stops the import skips the section
        return [f"skipped: claude_agent_sdk is not importable ({type(e).__name__}: {e})"]
    try:
        from baton_client.claude import BatonSessionStore
    except Exception as e:
        return [f"skipped: baton_client.claude.BatonSessionStore is not importable ({type(e).__name__}: {e})"]

    from baton_client import AsyncClient

    project = f"bench/claude/{uuid.uuid4().hex[:8]}"
    settings = Settings(server=f"http://{server.address}", token=None)
    made: list[Any] = []

    def make_baton() -> Any:
        """The store on this server, with whichever client its constructor takes (called in
        the event loop: an AsyncClient's channel belongs to it)."""
        params = inspect.signature(BatonSessionStore).parameters
        makers: list[tuple[str, Callable[[], Any]]] = []
        if "aclient" in params:
            makers.append(("aclient", lambda: AsyncClient(settings=settings)))
        if "client" in params:
            wants_sync = re.search(r"(?<!Async)Client", str(params["client"].annotation)) is not None
            pair = [("client", lambda: AsyncClient(settings=settings)), ("client", lambda: Client(settings=settings))]
            makers.extend(reversed(pair) if wants_sync else pair)
        if "server" in params:
            makers.append(("server", lambda: settings.server))
        errors = []
        for name, make in makers or [("", lambda: None)]:
            kwargs: dict[str, Any] = {}
            if name:
                kwargs[name] = make()
                if not isinstance(kwargs[name], str):
                    made.append(kwargs[name])
            for p in ("project", "project_key"):
                if p in params:
                    kwargs[p] = project
            try:
                return BatonSessionStore(**kwargs)
            except TypeError as e:
                errors.append(str(e))
        raise TypeError(f"cannot construct BatonSessionStore{inspect.signature(BatonSessionStore)}: {errors}")

    sessions = 1 if quick else 5
    batches, per_batch = 20, 10
    loads = 10 if quick else 50

    def entry(rng: random.Random, i: int) -> dict[str, Any]:
        role = "assistant" if i % 2 else "user"
        return {
            "type": role,
            "uuid": str(uuid.UUID(int=rng.getrandbits(128))),
            "parentUuid": None,
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            "sessionId": "bench",
            "message": {"role": role, "content": text_of(rng, 310)},
        }

    async def measure(store: Any) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {"append": [], "load": []}
        rng = random.Random(7)
        warm_key = {"project_key": "bench", "session_id": str(uuid.uuid4())}
        await store.append(warm_key, [entry(rng, i) for i in range(per_batch)])
        await store.load(warm_key)
        keys = [{"project_key": "bench", "session_id": str(uuid.uuid4())} for _ in range(sessions)]
        for key in keys:
            for b in range(batches):
                batch = [entry(rng, b * per_batch + i) for i in range(per_batch)]
                t = time.perf_counter()
                await store.append(key, batch)
                out["append"].append(time.perf_counter() - t)
        for n in range(loads):
            t = time.perf_counter()
            got = await store.load(keys[n % sessions])
            out["load"].append(time.perf_counter() - t)
            if got is None or len(got) != batches * per_batch:
                raise RuntimeError(f"load returned {0 if got is None else len(got)} entries, not {batches * per_batch}")
        return out

    async def main() -> dict[str, dict[str, list[float]]]:
        try:
            memory = await measure(InMemorySessionStore())
            baton = make_baton()
            try:
                return {"memory": memory, BATON: await measure(baton)}
            finally:
                for closer in ("aclose", "close"):
                    fn = getattr(baton, closer, None)
                    if fn is not None:
                        result = fn()
                        if inspect.isawaitable(result):
                            await result
                        break
        finally:
            for client in made:
                with contextlib.suppress(Exception):
                    result = client.close()
                    if inspect.isawaitable(result):
                        await result

    try:
        results = asyncio.run(main())
    except Exception as e:  # reported; the rest of the bench stands
        return [f"failed: {type(e).__name__}: {e}"]
    entry_bytes = len(json.dumps(entry(random.Random(1), 0)).encode())
    lines = [
        f"asyncio: {sessions} session(s) of {batches} appends of {per_batch} entries (~{entry_bytes} B of JSON each), "
        f"then {loads} loads of a {batches * per_batch}-entry session",
        f"{'op':<7} {'stat':<4} {'n':>4} {'Baton ms':>9} {'InMemory ms':>12} {'Baton/InMemory':>15}",
    ]
    for op in ("append", "load"):
        for q, label in ((0.5, "p50"), (0.99, "p99")):
            b = percentile(results[BATON][op], q) * 1e3
            m = percentile(results["memory"][op], q) * 1e3
            n = len(results[BATON][op])
            lines.append(f"{op:<7} {label:<4} {n:>4} {b:>9.3f} {m:>12.4f} {ratio(b, m):>14,.0f}x")
    return lines


# -- the bench -------------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace, cleanup: Callable[[Callable[[], object]], None]) -> None:
        self.args = args
        self.steps: int = args.steps or (20 if args.quick else 200)
        self.csteps: int = args.concurrent_steps or self.steps
        self.cold_reads = 10 if args.quick else 50
        self.recorder = Recorder()
        self.timer = RpcTimer()
        self.misses: list[str] = []
        self.workdir = make_dir("run")
        cleanup(lambda: shutil.rmtree(self.workdir, ignore_errors=True))

        self.cluster: Cluster | None = None
        if args.postgres_url:
            admin_url = args.postgres_url
            where = urlsplit(admin_url)
            self.pg_note = f"existing server at {where.hostname}:{where.port or 5432}"
        else:
            self.cluster = Cluster(durable=not args.postgres_no_fsync, stats=not args.no_pg_stats)
            cleanup(self.cluster.stop)
            self.cluster.start()
            admin_url = self.cluster.admin_url
            self.pg_note = "throwaway cluster"
        self.db = Databases(admin_url)
        cleanup(self.db.drop_all)
        if args.no_pg_stats:
            self.pg_note += ", pg_stat_statements off (--no-pg-stats)"
        else:
            self.pg_note += ", " + self.db.enable_stats(create=self.cluster is not None)
        baton_db = self.db.create("baton")
        saver_db = self.db.create("pgsaver")

        self.server = BatonServer(args.server_bin, self.db.url(baton_db), self.workdir)
        cleanup(self.server.stop)
        self.server.start()

        self.stores: dict[str, Store] = {
            BATON: BatonStore(self.server, self.timer, self.db, baton_db),
            POSTGRES: PostgresStore(self.db, saver_db),
            SQLITE: SqliteStore(self.workdir / "sqlite-saver.db"),
        }
        for s in self.stores.values():
            cleanup(s.close)
        self.conversation = Conversation(args.bytes_per_step, args.durability)
        self.pids = (self.server.pid, self.cluster.pid if self.cluster else None)

    # -- output --

    def header(self) -> list[str]:
        a = self.args
        db = self.db
        cmd = " ".join(shlex.quote(x) for x in [sys.executable, *sys.argv])
        saver_mode = (
            "one saver shared by the threads"
            if a.shared_saver
            else "a saver (own connection / gRPC channel) per LangGraph thread"
        )
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
            f"server:    {server_version(a.server_bin)} ({a.server_bin}), on its own database of the cluster below",
            f"postgres:  {db.setting('server_version')}, {self.pg_note}; fsync {db.setting('fsync')}, "
            f"synchronous_commit {db.setting('synchronous_commit')}, autovacuum {db.setting('autovacuum')}",
            f"mode:      sync savers from a ThreadPoolExecutor, one Python thread per LangGraph thread, {saver_mode}; "
            f"put/get_tuple/put_writes timed by a subclass; default serde; durability {a.durability}",
            f"workload:  StateGraph(MessagesState): START -> respond -> END, invoked with a user message, the node "
            f"answers; {a.bytes_per_step} B serialized a step ({self.conversation.text_bytes} B of word-salad text); "
            "LangGraph calls get_tuple 1x, put 3x, put_writes 2x a step",
            f"runs:      each store: a 3-step warm-up (unrecorded); then 1 thread x {self.steps} steps (storage measured "
            f"on it), store after store; then {a.threads} threads x {self.csteps} steps, store after store",
        ]

    def latency_table(self, cphase: str) -> list[str]:
        cols = (
            f"{'op':<6} {'threads':>7} {'stat':<4} {'n':>5} {BATON:>9} {POSTGRES:>14} {SQLITE:>12} "
            f"{'Baton/PG':>9} {'Baton/SQLite':>12}  target (Baton/PG)"
        )
        lines = [
            "Checkpoint latency, ms (timed around each saver's own put / get_tuple / put_writes)",
            cols,
            "-" * len(cols),
        ]
        for op in ("put", "get", "writes"):
            for phase in ("1", cphase):
                for q, label in ((0.5, "p50"), (0.99, "p99")):
                    v = {n: percentile(self.recorder.get(phase, n, op), q) * 1e3 for n in STORES}
                    count = len(self.recorder.get(phase, BATON, op))
                    r_pg, r_sq = ratio(v[BATON], v[POSTGRES]), ratio(v[BATON], v[SQLITE])
                    target = ""
                    if op in ("put", "get") and label == "p50":
                        ok = r_pg <= LATENCY_TARGET
                        target = f"<= {LATENCY_TARGET:g}x {'PASS' if ok else 'MISS'}"
                        if not ok:
                            self.misses.append(
                                f"{op} p50, {phase} thread(s): Baton/PostgresSaver {r_pg:.2f}x > {LATENCY_TARGET:g}x"
                            )
                    lines.append(
                        f"{op:<6} {phase:>7} {label:<4} {count:>5} {v[BATON]:>9.2f} {v[POSTGRES]:>14.2f} {v[SQLITE]:>12.2f} "
                        f"{r_pg:>8.2f}x {r_sq:>11.2f}x  {target}"
                    )
        lines.append("writes = put_writes (no target); n = samples per store (the same for each)")
        return lines

    def cold_table(self, cold: dict[str, list[float]], final_state: int) -> list[str]:
        lines = [
            f"Cold read, ms: get_tuple of the {self.steps}-step thread's latest checkpoint ({fmt_bytes(final_state)} of "
            f"messages) by a fresh saver each time (nothing cached: another process resuming it), {len(cold[BATON])} reads; "
            "no target"
        ]
        for q, label in ((0.5, "p50"), (0.99, "p99")):
            v = {n: percentile(cold[n], q) * 1e3 for n in STORES}
            lines.append(
                f"  {label}: {BATON} {v[BATON]:.2f}, {POSTGRES} {v[POSTGRES]:.2f}, {SQLITE} {v[SQLITE]:.2f}; "
                f"Baton/PG {ratio(v[BATON], v[POSTGRES]):.2f}x, Baton/SQLite {ratio(v[BATON], v[SQLITE]):.2f}x"
            )
        return lines

    def storage_table(
        self,
        sizes: dict[str, tuple[int, int]],
        tables: dict[str, tuple[dict[str, int], dict[str, int]]],
        values: dict[str, tuple[str, tuple[int, int, int] | None]],
        final_state: int,
    ) -> list[str]:
        lines = [
            f"Storage after the 1-thread conversation of {self.steps} steps (final state {fmt_bytes(final_state)} serialized): "
            "growth of pg_database_size (Baton: baton-server's database; PostgresSaver: its own), SqliteSaver: "
            "page_count x page_size; no VACUUM or CHECKPOINT, autovacuum as above"
        ]
        cols = f"{'store':<14} {'before':>12} {'after':>12} {'growth':>12} {'per step':>10} {'/ final state':>14}"
        lines += [cols, "-" * len(cols)]
        growth = {n: sizes[n][1] - sizes[n][0] for n in STORES}
        for n in STORES:
            b, a = sizes[n]
            lines.append(
                f"{n:<14} {fmt_bytes(b):>12} {fmt_bytes(a):>12} {fmt_bytes(growth[n]):>12} "
                f"{fmt_bytes(growth[n] / self.steps):>10} {ratio(growth[n], final_state):>13.1f}x"
            )
        r = ratio(growth[BATON], growth[POSTGRES])
        ok = r <= STORAGE_TARGET
        if not ok:
            self.misses.append(f"storage: Baton/PostgresSaver {r:.3f} > {STORAGE_TARGET:g}")
        lines.append(
            f"Baton/PostgresSaver {r:.3f} (target <= {STORAGE_TARGET:g}: {'PASS' if ok else 'MISS'}); "
            f"Baton/SqliteSaver {ratio(growth[BATON], growth[SQLITE]):.3f}"
        )
        for name, (before, after) in tables.items():
            grew = sorted(((after.get(t, 0) - before.get(t, 0), t) for t in after), reverse=True)
            shown = ", ".join(f"{t} {fmt_bytes(g)}" for g, t in grew if g > 0)
            lines.append(f"  {name}: tables grew (with indexes and TOAST): {shown or 'nothing'}")
        for name, (where, found) in values.items():
            if found is not None:
                rows, raw, stored = found
                sent = ""
                if name == BATON and self.timer.sent.get("PutChunks"):
                    sent = (
                        f"; the 1-thread run's PutChunks carried {fmt_bytes(self.timer.sent['PutChunks'])} uncompressed"
                    )
                lines.append(
                    f"  {name}: {where} (the channel values over the inline limit, warm-up included): {rows} rows, "
                    f"{fmt_bytes(raw)} in the column, {fmt_bytes(stored)} on disk (pg_column_size){sent}"
                )
        return lines

    def baton_breakdown(self, before: dict[tuple[str, str], float], after: dict[tuple[str, str], float]) -> list[str]:
        steps = self.steps
        lines = [
            "Where Baton's time goes (1-thread run): RPCs the saver made, timed in the client (request built to reply "
            "decoded) and by baton-server (its request-duration metric); the difference is the client's gRPC stack "
            "(protobuf, HTTP/2), the loopback and the server's transport. payload: chunk data, checkpoint payload "
            "and metadata, or write values per call",
            f"{'rpc':<22} {'calls':>6} {'errors':>6} {'payload':>10} {'client p50':>11} {'client mean':>12} "
            f"{'server mean':>12} {'difference':>11}",
        ]
        for rpc, samples in sorted(self.timer.samples.items()):
            c = after.get((rpc, "count"), 0) - before.get((rpc, "count"), 0)
            s = after.get((rpc, "sum"), 0) - before.get((rpc, "sum"), 0)
            server_mean = s / c * 1e3 if c else float("nan")
            mean = sum(samples) / len(samples) * 1e3
            lines.append(
                f"{rpc:<22} {len(samples):>6} {self.timer.errors[rpc]:>6} {fmt_bytes(self.timer.sent[rpc] / len(samples)):>10} "
                f"{percentile(samples, 0.5) * 1e3:>9.3f}ms {mean:>10.3f}ms {server_mean:>10.3f}ms {mean - server_mean:>9.3f}ms"
            )
        per_step = {rpc: sum(v) / steps * 1e3 for rpc, v in self.timer.samples.items()}
        for op, rpcs in (
            ("put", ("MissingChunks", "PutChunks", "PutThreadCheckpoint")),
            ("get", ("GetThreadCheckpoint", "GetChunks")),
            ("writes", ("PutThreadWrites",)),
        ):
            in_saver = sum(self.recorder.get("1", BATON, op)) / steps * 1e3
            in_rpcs = sum(per_step.get(r, 0.0) for r in rpcs)
            lines.append(
                f"  {op}: {in_saver:.2f} ms a step in the saver = {in_rpcs:.2f} ms in {'/'.join(rpcs)} "
                f"+ {in_saver - in_rpcs:.2f} ms else (serde, hashing, protobuf, put_writes' waits for its checkpoint)"
            )
        if self.timer.errors.get("PutThreadWrites"):
            lines.append(
                f"  {self.timer.errors['PutThreadWrites']} PutThreadWrites answered NOT_FOUND (LangGraph handed the writes over "
                "before their checkpoint was stored); the saver slept and sent them again"
            )
        return lines

    def statements_table(self, stmts: dict[str, list[tuple[str, int, float]]]) -> list[str]:
        if not any(stmts.values()):
            return []
        steps = self.steps
        lines = [
            "Postgres statements in the 1-thread run (pg_stat_statements: time inside Postgres, the commit's WAL flush "
            "under COMMIT when the client sends one)"
        ]
        for name, rows in stmts.items():
            calls = sum(c for _, c, _ in rows)
            total = sum(t for _, _, t in rows)
            lines.append(f"  {name}: {calls / steps:.1f} statements and {total / steps:.2f} ms a step; the costliest:")
            for q, c, t in rows[:6]:
                lines.append(f"    {c / steps:>5.1f}/step {t / c:>7.3f} ms  {statement_label(q)}")
        return lines

    def cpu_table(self, runs: dict[tuple[str, str], Run], cphase: str) -> list[str]:
        lines = [
            "CPU per step, ms (bench: this Python process, savers and LangGraph included; server: baton-server; "
            "postgres: the cluster's processes); wall s"
        ]
        for (phase, name), r in runs.items():
            steps = self.steps if phase == "1" else self.csteps * self.args.threads
            part = [f"bench {r.cpu.bench / steps * 1e3:.2f}"]
            if name == BATON:
                part.append(f"server {r.cpu.server / steps * 1e3:.2f}" if r.cpu.server is not None else "server n/a")
            if name != SQLITE:
                part.append(
                    f"postgres {r.cpu.postgres / steps * 1e3:.2f}" if r.cpu.postgres is not None else "postgres n/a"
                )
            lines.append(f"  {phase:>2} thread(s) {name:<14} wall {r.wall:6.1f} s; " + ", ".join(part))
        return lines

    # -- the run --

    def run(self, out: Callable[[str], None]) -> int:
        a = self.args
        for line in self.header():
            out(line)
        out("")
        for store in self.stores.values():
            run_threads(store, self.recorder, self.conversation, "warmup", 1, 3, False, self.pids)

        runs: dict[tuple[str, str], Run] = {}
        sizes: dict[str, tuple[int, int]] = {}
        tables: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
        values: dict[str, tuple[str, tuple[int, int, int] | None]] = {}
        stmts: dict[str, list[tuple[str, int, float]]] = {}
        cold: dict[str, list[float]] = {}
        metrics: tuple[dict[tuple[str, str], float], dict[tuple[str, str], float]] = ({}, {})
        final_state = 0
        for name, store in self.stores.items():
            before = store.size()
            tables_before = self.db.table_sizes(store.database) if store.database else {}
            self.db.reset_stats()
            if name == BATON:
                metrics_before = self.server.metrics()
                self.timer.on = True
            run = run_threads(store, self.recorder, self.conversation, "1", 1, self.steps, a.shared_saver, self.pids)
            self.timer.on = False
            if name == BATON:
                metrics = (metrics_before, self.server.metrics())
            sizes[name] = (before, store.size())
            if store.database:
                stmts[name] = self.db.statements(store.database)
                tables[name] = (tables_before, self.db.table_sizes(store.database))
                table, column = ("chunks", "data") if name == BATON else ("checkpoint_blobs", "blob")
                values[name] = (f"{table}.{column}", self.db.stored_values(store.database, table, column))
            runs[("1", name)] = run
            final_state = run.final_state
            out(f"  1 thread x {self.steps} steps on {name}: {run.wall:.1f} s")
            cold[name] = cold_gets(store, run.savers[0], run.threads[0], self.cold_reads)

        cphase = str(a.threads)
        for name, store in self.stores.items():
            run = run_threads(
                store, self.recorder, self.conversation, cphase, a.threads, self.csteps, a.shared_saver, self.pids
            )
            runs[(cphase, name)] = run
            out(f"  {a.threads} threads x {self.csteps} steps on {name}: {run.wall:.1f} s")
        out("")

        for section in (
            self.latency_table(cphase),
            self.cold_table(cold, final_state),
            self.storage_table(sizes, tables, values, final_state),
            self.baton_breakdown(*metrics),
            self.statements_table(stmts),
            self.cpu_table(runs, cphase),
        ):
            if section:
                for line in section:
                    out(line)
                out("")

        out("Claude Agent SDK SessionStore: baton_client.claude.BatonSessionStore vs the SDK's InMemorySessionStore")
        lines = ["skipped: --no-claude"] if a.no_claude else claude_section(self.server, a.quick)
        for line in lines:
            out(f"  {line}")
        out("")

        out(f"targets: {'all met' if not self.misses else 'MISSED ' + '; '.join(self.misses)}")
        return 1 if (self.misses and a.check) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--quick", action="store_true", help="a short run for CI: 20 steps, fewer reads (well under a minute)")
    add("--check", action="store_true", help="exit 1 when a target is missed")
    add(
        "--server-bin", default=os.environ.get("BATON_SERVER_BIN", ""), help="baton-server (default: $BATON_SERVER_BIN)"
    )
    add(
        "--postgres-url",
        default="",
        help="admin URL of an existing Postgres (it may CREATE DATABASE) instead of a throwaway cluster",
    )
    add(
        "--postgres-no-fsync",
        action="store_true",
        help="throwaway cluster with fsync, synchronous_commit, full_page_writes off",
    )
    add("--no-pg-stats", action="store_true", help="no pg_stat_statements (the statements section is left out)")
    add(
        "--steps",
        type=int,
        default=None,
        help="steps of the 1-thread conversation, storage measured after it (200; --quick 20)",
    )
    add(
        "--concurrent-steps",
        type=int,
        default=None,
        help="steps of each thread of the concurrent run (default: --steps)",
    )
    add("--threads", type=int, default=8, help="LangGraph threads driven at once in the concurrent run (8)")
    add("--bytes-per-step", type=int, default=1024, help="serialized bytes a step adds to the messages channel (1024)")
    add(
        "--durability",
        choices=("async", "sync", "exit"),
        default="async",
        help="LangGraph's durability (its default: async)",
    )
    add(
        "--shared-saver",
        action="store_true",
        help="one saver per store shared by the threads (default: one per thread)",
    )
    add("--no-claude", action="store_true", help="skip the Claude Agent SDK SessionStore section")
    args = parser.parse_args(argv)
    if not args.server_bin:
        parser.error("name the baton-server binary: --server-bin PATH or BATON_SERVER_BIN=PATH")
    if not (os.path.isfile(args.server_bin) and os.access(args.server_bin, os.X_OK)):
        parser.error(f"--server-bin {args.server_bin!r} is not an executable file")

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM unwinds like Ctrl-C: the cleanup runs either way

    previous = signal.signal(signal.SIGTERM, on_term), signal.getsignal(signal.SIGINT)
    sweep_stale()
    started = time.monotonic()
    with contextlib.ExitStack() as stack:

        def cleanup(fn: Callable[[], object]) -> None:
            def run() -> None:
                with contextlib.suppress(Exception):
                    fn()

            stack.callback(run)

        # Registered first, run last: the signals as they were, once everything is cleaned up.
        cleanup(lambda: signal.signal(signal.SIGINT, previous[1]))
        cleanup(lambda: signal.signal(signal.SIGTERM, previous[0]))

        try:
            code = Bench(args, cleanup).run(lambda line: print(line, flush=True))
            print(f"wall time: {time.monotonic() - started:.1f} s", flush=True)
            return code
        except KeyboardInterrupt:
            print("\ninterrupted: stopping baton-server and Postgres, removing the temp files", file=sys.stderr)
            return 130
        finally:
            # Before the cleanup: conversations still running stop at their next step, and
            # a second Ctrl-C does not cut the cleanup short.
            STOP.set()
            signal.signal(signal.SIGINT, signal.SIG_IGN)


if __name__ == "__main__":
    sys.exit(main())
