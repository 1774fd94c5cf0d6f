"""What the sync and async clients share: the RPC table, requests, retries, channel setup."""

from __future__ import annotations

import os
import random
import ssl
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import grpc
from google.protobuf.message import Message

from baton_client._config import Settings
from baton_client._proto.baton.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    brief_pb2,
    brief_pb2_grpc,
    checkpoint_pb2,
    checkpoint_pb2_grpc,
    event_pb2,
    event_pb2_grpc,
    items_pb2,
    items_pb2_grpc,
    memory_pb2,
    memory_pb2_grpc,
    search_pb2,
    search_pb2_grpc,
    session_pb2,
    session_pb2_grpc,
    thread_pb2,
    thread_pb2_grpc,
)

#: Default per-call deadline in seconds (watches have none).
DEFAULT_TIMEOUT = 30.0
#: Largest message sent or received: an 8 MiB checkpoint (state + payload) or an 8 MiB
#: PutChunks/GetChunks batch with room for framing, with margin for a raised server limit.
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024

Retry = Literal["read", "write", "safe", "never"]


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter for calls that are safe to repeat.

    ``attempts`` counts the first try: 4 means up to 3 retries. The n-th retry waits
    ``min(max_backoff, initial_backoff * multiplier**n)`` seconds, scaled by a random factor
    in ``[1 - jitter, 1 + jitter]``.
    """

    attempts: int = 4
    initial_backoff: float = 0.1
    max_backoff: float = 2.0
    multiplier: float = 2.0
    jitter: float = 0.2

    def backoff(self, retry: int) -> float:
        base = min(self.max_backoff, self.initial_backoff * self.multiplier**retry)
        return max(0.0, base * random.uniform(1 - self.jitter, 1 + self.jitter))


#: Unary calls: a few retries on UNAVAILABLE.
DEFAULT_RETRY = RetryPolicy()
#: Watches: reconnects after a broken stream; the count is of consecutive failures (it
#: starts over once an event arrives or a stream has lived for a while).
DEFAULT_WATCH_RETRY = RetryPolicy(attempts=12, initial_backoff=0.2, max_backoff=5.0)


@dataclass(frozen=True)
class Rpc:
    """One RPC: where it is, what it takes, whether it may be retried, how it pages."""

    service: str
    method: str
    request: type[Any]
    retry: Retry
    #: The repeated field a paged reply lists its items in.
    items: str | None = None
    #: The request field that sets the page size, and its largest value.
    page_size_field: str = "page_size"
    max_page_size: int = 1000
    #: A write the server matches by the keys it carries (a checkpoint's key, a pending
    #: write's task and index): sent again, it stores nothing new and answers with what is
    #: stored, so it needs no ``write.request_id`` and none is added (the server then keeps
    #: no copy of its reply).
    keyed: bool = False

    @property
    def has_write_options(self) -> bool:
        return self.retry == "write"

    @property
    def retried(self) -> bool:
        return self.retry != "never"


S, C, M, B, E, Q, A, T = "sessions", "checkpoints", "memory", "brief", "events", "search", "admin", "threads"
L = "items"

START_SESSION = Rpc(S, "StartSession", session_pb2.StartSessionRequest, "write")
GET_SESSION = Rpc(S, "GetSession", session_pb2.GetSessionRequest, "read")
LIST_SESSIONS = Rpc(S, "ListSessions", session_pb2.ListSessionsRequest, "read", items="sessions")
UPDATE_SESSION = Rpc(S, "UpdateSession", session_pb2.UpdateSessionRequest, "write")
HEARTBEAT = Rpc(S, "Heartbeat", session_pb2.HeartbeatRequest, "safe")
END_SESSION = Rpc(S, "EndSession", session_pb2.EndSessionRequest, "write")
RESUME_SESSION = Rpc(S, "ResumeSession", session_pb2.ResumeSessionRequest, "write")

CREATE_CHECKPOINT = Rpc(C, "CreateCheckpoint", checkpoint_pb2.CreateCheckpointRequest, "write")
GET_CHECKPOINT = Rpc(C, "GetCheckpoint", checkpoint_pb2.GetCheckpointRequest, "read")
LIST_CHECKPOINTS = Rpc(C, "ListCheckpoints", checkpoint_pb2.ListCheckpointsRequest, "read", items="checkpoints")
MISSING_CHUNKS = Rpc(C, "MissingChunks", checkpoint_pb2.MissingChunksRequest, "read")
PUT_CHUNKS = Rpc(C, "PutChunks", checkpoint_pb2.PutChunksRequest, "safe")
GET_CHUNKS = Rpc(C, "GetChunks", checkpoint_pb2.GetChunksRequest, "read")

PUT_MEMORY = Rpc(M, "PutMemory", memory_pb2.PutMemoryRequest, "write")
LIST_MEMORY = Rpc(M, "ListMemory", memory_pb2.ListMemoryRequest, "read", items="entries")
DELETE_MEMORY = Rpc(M, "DeleteMemory", memory_pb2.DeleteMemoryRequest, "write")
SET_MEMORY_CAPS = Rpc(M, "SetMemoryCaps", memory_pb2.SetMemoryCapsRequest, "write")

GET_BRIEF = Rpc(B, "GetBrief", brief_pb2.GetBriefRequest, "read")

LIST_EVENTS = Rpc(
    E, "ListEvents", event_pb2.ListEventsRequest, "read", items="events", page_size_field="limit", max_page_size=10000
)
LIST_CONFLICTS = Rpc(
    E,
    "ListConflicts",
    event_pb2.ListConflictsRequest,
    "read",
    items="conflicts",
    page_size_field="limit",
    max_page_size=10000,
)
WATCH = Rpc(E, "Watch", event_pb2.WatchRequest, "read")

SEARCH = Rpc(Q, "Search", search_pb2.SearchRequest, "read", items="hits", max_page_size=100)

PRUNE = Rpc(A, "Prune", admin_pb2.PruneRequest, "never")
COMPACT_EVENTS = Rpc(A, "CompactEvents", admin_pb2.CompactEventsRequest, "never")
PURGE = Rpc(A, "Purge", admin_pb2.PurgeRequest, "never")
CREATE_TOKEN = Rpc(A, "CreateToken", admin_pb2.CreateTokenRequest, "never")
LIST_TOKENS = Rpc(A, "ListTokens", admin_pb2.ListTokensRequest, "read", items="tokens")
REVOKE_TOKEN = Rpc(A, "RevokeToken", admin_pb2.RevokeTokenRequest, "never")
GET_STATS = Rpc(A, "GetStats", admin_pb2.GetStatsRequest, "read")

OPEN_THREAD = Rpc(T, "OpenThread", thread_pb2.OpenThreadRequest, "write")
PUT_THREAD_CHECKPOINT = Rpc(T, "PutThreadCheckpoint", thread_pb2.PutThreadCheckpointRequest, "write", keyed=True)
GET_THREAD_CHECKPOINT = Rpc(T, "GetThreadCheckpoint", thread_pb2.GetThreadCheckpointRequest, "read")
LIST_THREAD_CHECKPOINTS = Rpc(
    T, "ListThreadCheckpoints", thread_pb2.ListThreadCheckpointsRequest, "read", items="checkpoints"
)
PUT_THREAD_WRITES = Rpc(T, "PutThreadWrites", thread_pb2.PutThreadWritesRequest, "write", keyed=True)
DELETE_THREADS = Rpc(T, "DeleteThreads", thread_pb2.DeleteThreadsRequest, "write")
DELETE_THREAD_RUNS = Rpc(T, "DeleteThreadRuns", thread_pb2.DeleteThreadRunsRequest, "write")
COPY_THREAD = Rpc(T, "CopyThread", thread_pb2.CopyThreadRequest, "write")
PRUNE_THREADS = Rpc(T, "PruneThreads", thread_pb2.PruneThreadsRequest, "write")

APPEND_ITEMS = Rpc(L, "AppendItems", items_pb2.AppendItemsRequest, "write")
READ_ITEMS = Rpc(L, "ReadItems", items_pb2.ReadItemsRequest, "read", items="items")
POP_ITEM = Rpc(L, "PopItem", items_pb2.PopItemRequest, "write")
LIST_ITEM_LOGS = Rpc(L, "ListItemLogs", items_pb2.ListItemLogsRequest, "read", items="logs")
DELETE_ITEM_LOGS = Rpc(L, "DeleteItemLogs", items_pb2.DeleteItemLogsRequest, "write")


class Stubs:
    """The raw generated stubs on one channel, one per service."""

    def __init__(self, channel: Any) -> None:
        self.sessions = session_pb2_grpc.SessionServiceStub(channel)  # type: ignore[no-untyped-call]
        self.checkpoints = checkpoint_pb2_grpc.CheckpointServiceStub(channel)  # type: ignore[no-untyped-call]
        self.memory = memory_pb2_grpc.MemoryServiceStub(channel)  # type: ignore[no-untyped-call]
        self.brief = brief_pb2_grpc.BriefServiceStub(channel)  # type: ignore[no-untyped-call]
        self.events = event_pb2_grpc.EventServiceStub(channel)  # type: ignore[no-untyped-call]
        self.search = search_pb2_grpc.SearchServiceStub(channel)  # type: ignore[no-untyped-call]
        self.admin = admin_pb2_grpc.AdminServiceStub(channel)  # type: ignore[no-untyped-call]
        self.threads = thread_pb2_grpc.ThreadServiceStub(channel)  # type: ignore[no-untyped-call]
        self.items = items_pb2_grpc.ItemLogServiceStub(channel)  # type: ignore[no-untyped-call]

    def method(self, rpc: Rpc) -> Any:
        return getattr(getattr(self, rpc.service), rpc.method)


def build_request(rpc: Rpc, request: Message | None, fields: dict[str, Any]) -> Any:
    """The request to send: ``request`` (copied) or one made from keyword ``fields``.

    Writes get a fresh ``write.request_id`` (uuid4) unless one is set, so that retrying
    them is safe: the server answers a repeated id with the stored reply. Keyed writes
    (``Rpc.keyed``) are safe to retry by their own keys and get none.
    """
    if request is not None:
        if fields:
            raise TypeError(
                f"{rpc.method}: pass either a {rpc.request.__name__} or keyword fields, not both "
                f"(got {', '.join(sorted(fields))})"
            )
        if not isinstance(request, rpc.request):
            raise TypeError(f"{rpc.method} takes a {rpc.request.__name__}, not {type(request).__name__}")
        built = rpc.request()
        built.CopyFrom(request)
    else:
        try:
            built = rpc.request(**fields)
        except ValueError as e:  # protobuf's "has no field" error
            raise TypeError(f"{rpc.method}: {e}") from None
    if rpc.has_write_options and not rpc.keyed and not built.write.request_id:
        built.write.request_id = str(uuid.uuid4())
    return built


def first_page_request(rpc: Rpc, request: Any, limit: int | None, page_size: int | None) -> Any:
    """Sets the page size (``page_size`` argument, else at most ``limit``)."""
    if limit is not None and limit < 0:
        raise ValueError("limit must be >= 0")
    if rpc.page_size_field not in request.DESCRIPTOR.fields_by_name:
        if page_size is not None:
            raise TypeError(f"{rpc.method} is not paged: it takes no page_size")
        return request
    size = page_size
    if size is None and limit is not None and not getattr(request, rpc.page_size_field):
        size = max(1, min(limit, rpc.max_page_size))
    if size is not None:
        setattr(request, rpc.page_size_field, size)
    return request


def has_next_page(reply: Any) -> str:
    return str(getattr(reply, "next_page_token", "") or "")


# ---------------------------------------------------------------------------------------------
# Channels


def channel_options(max_message_bytes: int, extra: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    options: dict[str, Any] = {
        "grpc.max_send_message_length": max_message_bytes,
        "grpc.max_receive_message_length": max_message_bytes,
        "grpc.primary_user_agent": "baton-client-python",
    }
    options.update(dict(extra))
    return list(options.items())


def _system_roots() -> bytes:
    paths = ssl.get_default_verify_paths()
    candidates = [os.environ.get("SSL_CERT_FILE"), paths.cafile, paths.openssl_cafile]
    for name in candidates:
        if name and Path(name).is_file():
            return Path(name).read_bytes()
    # gRPC's own bundle (what it uses when given no roots).
    import grpc as _grpc

    bundled = Path(_grpc.__file__).parent / "_cython" / "_credentials" / "roots.pem"
    return bundled.read_bytes() if bundled.is_file() else b""


def credentials(settings: Settings) -> grpc.ChannelCredentials | None:
    """TLS credentials for an ``https://`` server (system roots plus ``ca_cert``), else None."""
    if not settings.tls:
        return None
    if settings.ca_cert is None:
        return grpc.ssl_channel_credentials()
    try:
        extra = settings.ca_cert.read_bytes()
    except OSError as e:
        raise ValueError(f"ca_cert {settings.ca_cert}: {e}") from e
    roots = _system_roots()
    return grpc.ssl_channel_credentials(root_certificates=roots + b"\n" + extra)


def auth_metadata(settings: Settings) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {settings.token}"),) if settings.token else ()
