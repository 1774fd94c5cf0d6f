"""The synchronous client."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Generic, TypeVar

import grpc
from google.protobuf.message import Message

from baton_client import _rpc as R
from baton_client._blobs import batches, make_blob
from baton_client._config import Settings, load_settings
from baton_client._errors import BatonError, Unavailable, from_rpc_error, is_transient
from baton_client._proto.baton.v1 import (
    admin_pb2,
    brief_pb2,
    checkpoint_pb2,
    event_pb2,
    items_pb2,
    memory_pb2,
    model_pb2,
    search_pb2,
    session_pb2,
    thread_pb2,
)
from baton_client._rpc import DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_RETRY, DEFAULT_TIMEOUT, DEFAULT_WATCH_RETRY, RetryPolicy

T = TypeVar("T")

__all__ = ["Client", "Pages", "Watch"]

#: A stream that lived this long before breaking counts as a fresh start for the
#: reconnect budget.
_HEALTHY_STREAM_SECONDS = 30.0


class Pages(Generic[T]):
    """The items of a paged list, fetched page by page as you iterate.

    Follows ``next_page_token`` to the end, or stops after ``limit`` items. After (or
    during) the iteration, ``response`` is the last page's reply: its ``as_of_revision``,
    and for ``list_memory`` its ``caps`` and ``record_revisions``, for ``search`` its
    ``partial``, for ``list_checkpoints`` its ``head_checkpoint_id``, for ``read_items``
    its ``log``.

    ``by_page()`` gives the replies themselves instead, each whole (for ``list_item_logs``
    with a delimiter, its ``common_prefixes`` beside its ``logs``).
    """

    def __init__(self, fetch: Callable[[Any], Any], rpc: R.Rpc, request: Any, limit: int | None) -> None:
        self.response: Any = None
        self._fetch = fetch
        self._rpc = rpc
        self._request = request
        self._limit = limit
        self._started = False
        self._items = self._run()

    def by_page(self) -> Iterator[Any]:
        """Every page's reply in turn, following ``next_page_token`` to the end (``limit``
        does not apply). Either this or the items: not both."""
        if self._started:
            raise RuntimeError("by_page(): the items of this listing are being iterated already")
        self._started = True
        return self._replies()

    def _replies(self) -> Iterator[Any]:
        while True:
            reply = self._fetch(self._request)
            self.response = reply
            yield reply
            token = R.has_next_page(reply)
            if not token:
                return
            self._request.page_token = token

    def _run(self) -> Iterator[T]:
        if self._started:
            raise RuntimeError("by_page() was called on this listing: iterate its pages")
        self._started = True
        if self._limit == 0:
            return
        count = 0
        assert self._rpc.items is not None
        while True:
            reply = self._fetch(self._request)
            self.response = reply
            for item in getattr(reply, self._rpc.items):
                yield item
                count += 1
                if self._limit is not None and count >= self._limit:
                    return
            token = R.has_next_page(reply)
            if not token:
                return
            self._request.page_token = token

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        return next(self._items)

    def to_list(self) -> list[T]:
        """Every remaining item."""
        return list(self)


class Watch:
    """Events as they happen, resumed across reconnects without a gap or a duplicate.

    An iterator of ``baton.v1.Event``. On a transient failure (UNAVAILABLE, a connection
    reset, the stream ending) it reconnects with backoff and asks, per project, for the
    events after the last revision it delivered. Other errors (OUT_OF_RANGE after a
    compaction, PERMISSION_DENIED, ...) are raised, as is a transient failure once the
    reconnect budget (``Client(watch_retry=...)``) is spent. A watch of every project
    (no cursors) cannot resume without a gap, so it raises its first failure instead.

    ``close()`` (from any thread) ends the iteration; ``cursors`` is the position to
    resume from later (project -> last delivered revision).
    """

    def __init__(
        self,
        method: Callable[..., Any],
        request: event_pb2.WatchRequest,
        metadata: Sequence[tuple[str, str]],
        policy: RetryPolicy,
    ) -> None:
        self._method = method
        self._metadata = tuple(metadata)
        self._policy = policy
        self._all = len(request.cursors) == 0
        self._cursors: dict[str, int] = {}
        for cursor in request.cursors:
            self._cursors[cursor.project] = cursor.after_revision
        self._kinds = list(request.kinds)
        self._call: Any = None
        self._closed = threading.Event()
        self._failures = 0
        self._opened_at = 0.0
        #: How many times the stream was reopened after a failure.
        self.reconnects = 0

    @property
    def cursors(self) -> dict[str, int]:
        """Project -> the revision of the last event delivered (or the starting cursor)."""
        return dict(self._cursors)

    def _next_request(self) -> event_pb2.WatchRequest:
        if self._all:
            return event_pb2.WatchRequest(kinds=self._kinds)
        return event_pb2.WatchRequest(
            cursors=[event_pb2.WatchCursor(project=p, after_revision=r) for p, r in self._cursors.items()],
            kinds=self._kinds,
        )

    def __iter__(self) -> Watch:
        return self

    def __next__(self) -> model_pb2.Event:
        while True:
            if self._closed.is_set():
                raise StopIteration
            if self._call is None:
                self._call = self._method(self._next_request(), metadata=self._metadata)
                self._opened_at = time.monotonic()
            error: BatonError
            try:
                event: model_pb2.Event = next(self._call)
            except StopIteration:
                error = Unavailable("the watch stream ended")
            except grpc.RpcError as e:
                if self._closed.is_set():
                    raise StopIteration from None
                error = from_rpc_error(e)
            else:
                last = self._cursors.get(event.project)
                if last is not None and event.revision <= last:
                    continue  # delivered before a reconnect
                self._cursors[event.project] = event.revision
                self._failures = 0
                return event
            self._call = None
            self._after_failure(error)

    def _after_failure(self, error: BatonError) -> None:
        if not is_transient(error):
            raise error
        if self._all:
            error.add_note("a watch of every project cannot resume without a gap: name projects in cursors")
            raise error
        if time.monotonic() - self._opened_at > _HEALTHY_STREAM_SECONDS:
            self._failures = 0
        if self._failures + 1 >= self._policy.attempts:
            raise error
        delay = self._policy.backoff(self._failures)
        self._failures += 1
        self.reconnects += 1
        if self._closed.wait(delay):
            raise StopIteration

    def close(self) -> None:
        """Stops the watch; the iteration ends (a blocked ``next`` returns at once)."""
        self._closed.set()
        call = self._call
        if call is not None:
            call.cancel()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Client:
    """A synchronous Baton client over one gRPC channel.

    ``server``, ``token`` and ``ca_cert`` override the config file and the environment
    (see :func:`baton_client.load_settings`); ``settings`` replaces all three.

    Every RPC is a method taking either a ready request message as its only positional
    argument or the request's fields as keyword arguments (``client.get_session(
    session_id=...)``), plus ``timeout`` (seconds; default: the client's). Unary methods
    return the reply message; ``list_*``, ``read_items``, ``search`` and ``watch`` return
    iterators. Errors are :class:`~baton_client.BatonError` subclasses.

    Retries on UNAVAILABLE (``retry``): reads; writes, each of which carries an
    idempotency key (``write.request_id``: a fresh uuid4 unless you set one, the same on
    every retry, so a retried write is answered with the stored reply and
    ``result.replayed`` set), except ``put_thread_checkpoint`` and ``put_thread_writes``,
    which the server matches by their keys (a checkpoint's key; a write's task and index)
    and which get no request id unless you set one; ``heartbeat`` and ``put_chunks``, which
    are safe to repeat.
    The admin calls that change things (``prune``, ``compact_events``, ``purge``,
    ``create_token``, ``revoke_token``) are never retried.
    """

    def __init__(
        self,
        server: str | None = None,
        token: str | None = None,
        ca_cert: str | os.PathLike[str] | None = None,
        *,
        settings: Settings | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        retry: RetryPolicy = DEFAULT_RETRY,
        watch_retry: RetryPolicy = DEFAULT_WATCH_RETRY,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        interceptors: Sequence[Any] = (),
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        self.settings = settings if settings is not None else load_settings(server, token, ca_cert)
        self.timeout = timeout
        self.retry = retry
        self.watch_retry = watch_retry
        creds = R.credentials(self.settings)
        opts = R.channel_options(max_message_bytes, options)
        if creds is None:
            channel = grpc.insecure_channel(self.settings.target, options=opts)
        else:
            channel = grpc.secure_channel(self.settings.target, creds, options=opts)
        self._raw_channel = channel
        self.channel: grpc.Channel = grpc.intercept_channel(channel, *interceptors) if interceptors else channel
        #: The raw generated stubs (``stubs.sessions.StartSession(...)``), for anything the
        #: methods do not cover. Pass ``metadata=client.metadata`` for the token.
        self.stubs = R.Stubs(self.channel)
        self.metadata: tuple[tuple[str, str], ...] = R.auth_metadata(self.settings)

    # -- plumbing -------------------------------------------------------------------------

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Closes the channel (calls in flight are cancelled)."""
        self._raw_channel.close()

    def __repr__(self) -> str:
        return f"Client({self.settings.server!r})"

    def _timeout(self, timeout: float | None) -> float | None:
        return self.timeout if timeout is None else timeout

    def _invoke(self, rpc: R.Rpc, request: Any, timeout: float | None) -> Any:
        method = self.stubs.method(rpc)
        deadline = self._timeout(timeout)
        retry = 0
        while True:
            try:
                return method(request, timeout=deadline, metadata=self.metadata)
            except grpc.RpcError as e:
                error = from_rpc_error(e)
                if rpc.retried and error.code == grpc.StatusCode.UNAVAILABLE and retry + 1 < self.retry.attempts:
                    time.sleep(self.retry.backoff(retry))
                    retry += 1
                    continue
                raise error from None

    def _call(self, rpc: R.Rpc, request: Message | None, fields: dict[str, Any], timeout: float | None) -> Any:
        return self._invoke(rpc, R.build_request(rpc, request, fields), timeout)

    def _pages(
        self,
        rpc: R.Rpc,
        request: Message | None,
        fields: dict[str, Any],
        timeout: float | None,
        limit: int | None,
        page_size: int | None,
    ) -> Any:
        built = R.first_page_request(rpc, R.build_request(rpc, request, fields), limit, page_size)
        return Pages(lambda r: self._invoke(rpc, r, timeout), rpc, built, limit)

    # -- sessions -------------------------------------------------------------------------

    def start_session(
        self, request: session_pb2.StartSessionRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> session_pb2.StartSessionResponse:
        """StartSession: starts a session in a project (created on first use). Write."""
        return self._call(R.START_SESSION, request, fields, timeout)

    def get_session(
        self, request: session_pb2.GetSessionRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> session_pb2.GetSessionResponse:
        """GetSession (``session_id``). Read."""
        return self._call(R.GET_SESSION, request, fields, timeout)

    def list_sessions(
        self,
        request: session_pb2.ListSessionsRequest | None = None,
        /,
        *,
        limit: int | None = None,
        page_size: int | None = None,
        timeout: float | None = None,
        **fields: Any,
    ) -> Pages[model_pb2.Session]:
        """ListSessions: a project's sessions, newest first, every page. Read."""
        return self._pages(R.LIST_SESSIONS, request, fields, timeout, limit, page_size)

    def update_session(
        self, request: session_pb2.UpdateSessionRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> session_pb2.UpdateSessionResponse:
        """UpdateSession: goal, branch, summary, metadata (last-write-wins). Write."""
        return self._call(R.UPDATE_SESSION, request, fields, timeout)

    def heartbeat(
        self, request: session_pb2.HeartbeatRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> session_pb2.HeartbeatResponse:
        """Heartbeat: liveness (``session_id``, ``status``, ``tool_count``). Safe to retry."""
        return self._call(R.HEARTBEAT, request, fields, timeout)

    def end_session(
        self, request: session_pb2.EndSessionRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> session_pb2.EndSessionResponse:
        """EndSession: completed (or crashed), with summary and git head. Write."""
        return self._call(R.END_SESSION, request, fields, timeout)

    def resume_session(
        self, request: session_pb2.ResumeSessionRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> session_pb2.ResumeSessionResponse:
        """ResumeSession: claims a crashed or idle session and starts its successor. Write."""
        return self._call(R.RESUME_SESSION, request, fields, timeout)

    # -- checkpoints ----------------------------------------------------------------------

    def create_checkpoint(
        self,
        request: checkpoint_pb2.CreateCheckpointRequest | None = None,
        /,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> checkpoint_pb2.CreateCheckpointResponse:
        """CreateCheckpoint: stores a checkpoint and moves the session's head to it. Write."""
        return self._call(R.CREATE_CHECKPOINT, request, fields, timeout)

    def get_checkpoint(
        self, request: checkpoint_pb2.GetCheckpointRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> checkpoint_pb2.GetCheckpointResponse:
        """GetCheckpoint (``checkpoint_id``, ``include_payload``); DataLoss when corrupt. Read."""
        return self._call(R.GET_CHECKPOINT, request, fields, timeout)

    def list_checkpoints(
        self,
        request: checkpoint_pb2.ListCheckpointsRequest | None = None,
        /,
        *,
        limit: int | None = None,
        page_size: int | None = None,
        timeout: float | None = None,
        **fields: Any,
    ) -> Pages[model_pb2.Checkpoint]:
        """ListCheckpoints: a session's checkpoints in tree order, every page. Read."""
        return self._pages(R.LIST_CHECKPOINTS, request, fields, timeout, limit, page_size)

    def missing_chunks(
        self, request: checkpoint_pb2.MissingChunksRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> checkpoint_pb2.MissingChunksResponse:
        """MissingChunks: which of these chunk digests the project lacks. Read."""
        return self._call(R.MISSING_CHUNKS, request, fields, timeout)

    def put_chunks(
        self, request: checkpoint_pb2.PutChunksRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> checkpoint_pb2.PutChunksResponse:
        """PutChunks: stores content-addressed chunks (1 MiB each, 8 MiB a call). Safe to retry."""
        return self._call(R.PUT_CHUNKS, request, fields, timeout)

    def get_chunks(
        self, request: checkpoint_pb2.GetChunksRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> checkpoint_pb2.GetChunksResponse:
        """GetChunks: reads chunks back, each verified (DataLoss when damaged). Read."""
        return self._call(R.GET_CHUNKS, request, fields, timeout)

    def upload_blob(
        self,
        project: str,
        data: bytes,
        *,
        role: str = "transcript",
        content_type: str = "",
        agent_session_id: str = "",
        cwd: str = "",
        timeout: float | None = None,
    ) -> model_pb2.BlobRef:
        """Uploads a blob's chunks the project lacks (MissingChunks, then PutChunks in
        batches) and returns the BlobRef to put in ``create_checkpoint(blobs=[...])``."""
        ref, chunks = make_blob(
            data, role=role, content_type=content_type, agent_session_id=agent_session_id, cwd=cwd
        )
        if chunks:
            missing = set(self.missing_chunks(project=project, digests=list(ref.chunks), timeout=timeout).missing)
            todo = [c for c in chunks if c.digest in missing]
            for batch in batches(todo):
                self.put_chunks(project=project, chunks=batch, timeout=timeout)
        return ref

    # -- memory ---------------------------------------------------------------------------

    def put_memory(
        self, request: memory_pb2.PutMemoryRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> memory_pb2.PutMemoryResponse:
        """PutMemory: replace a set, add/remove items, append history, upsert a note. Write."""
        return self._call(R.PUT_MEMORY, request, fields, timeout)

    def list_memory(
        self,
        request: memory_pb2.ListMemoryRequest | None = None,
        /,
        *,
        limit: int | None = None,
        page_size: int | None = None,
        timeout: float | None = None,
        **fields: Any,
    ) -> Pages[model_pb2.MemoryEntry]:
        """ListMemory: a project's memory entries, every page (``response.caps``,
        ``response.record_revisions`` on the iterator). Read."""
        return self._pages(R.LIST_MEMORY, request, fields, timeout, limit, page_size)

    def delete_memory(
        self, request: memory_pb2.DeleteMemoryRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> memory_pb2.DeleteMemoryResponse:
        """DeleteMemory: one entry (``entry_id``) or a whole record (``record``). Write."""
        return self._call(R.DELETE_MEMORY, request, fields, timeout)

    def set_memory_caps(
        self, request: memory_pb2.SetMemoryCapsRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> memory_pb2.SetMemoryCapsResponse:
        """SetMemoryCaps: caps per category for a project. Write."""
        return self._call(R.SET_MEMORY_CAPS, request, fields, timeout)

    # -- brief ----------------------------------------------------------------------------

    def get_brief(
        self, request: brief_pb2.GetBriefRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> brief_pb2.GetBriefResponse:
        """GetBrief: the warmup brief, ranked sections within ``budget_chars``. Read."""
        return self._call(R.GET_BRIEF, request, fields, timeout)

    # -- events ---------------------------------------------------------------------------

    def list_events(
        self,
        request: event_pb2.ListEventsRequest | None = None,
        /,
        *,
        limit: int | None = None,
        page_size: int | None = None,
        timeout: float | None = None,
        **fields: Any,
    ) -> Pages[model_pb2.Event]:
        """ListEvents: a project's events after ``after_revision``, every page. Read.

        ``page_size`` is sent as the request's ``limit`` field (its page size); ``limit``
        here stops the iteration after that many events, as for every list.
        """
        return self._pages(R.LIST_EVENTS, request, fields, timeout, limit, page_size)

    def list_conflicts(
        self,
        request: event_pb2.ListConflictsRequest | None = None,
        /,
        *,
        limit: int | None = None,
        page_size: int | None = None,
        timeout: float | None = None,
        **fields: Any,
    ) -> Pages[model_pb2.Conflict]:
        """ListConflicts: a project's conflicts, oldest first, every page. Read.

        ``page_size`` is sent as the request's ``limit`` field, as for ``list_events``.
        """
        return self._pages(R.LIST_CONFLICTS, request, fields, timeout, limit, page_size)

    def watch(self, request: event_pb2.WatchRequest | None = None, /, **fields: Any) -> Watch:
        """Watch: events after each cursor, then live ones, resumed across reconnects.

        ``cursors`` may be a mapping ``{project: after_revision}`` besides a list of
        ``WatchCursor``. See :class:`Watch`. The stream has no deadline.
        """
        cursors = fields.get("cursors")
        if isinstance(cursors, Mapping):
            fields["cursors"] = [event_pb2.WatchCursor(project=p, after_revision=r) for p, r in cursors.items()]
        built = R.build_request(R.WATCH, request, fields)
        return Watch(self.stubs.method(R.WATCH), built, self.metadata, self.watch_retry)

    # -- search ---------------------------------------------------------------------------

    def search(
        self,
        request: search_pb2.SearchRequest | None = None,
        /,
        *,
        limit: int | None = None,
        page_size: int | None = None,
        timeout: float | None = None,
        **fields: Any,
    ) -> Pages[search_pb2.SearchHit]:
        """Search: full text over memory, checkpoints and sessions (``query``), every page. Read."""
        return self._pages(R.SEARCH, request, fields, timeout, limit, page_size)

    # -- admin ----------------------------------------------------------------------------

    def prune(
        self, request: admin_pb2.PruneRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> admin_pb2.PruneResponse:
        """Prune: removes old checkpoints by the retention rules (admin). Not retried."""
        return self._call(R.PRUNE, request, fields, timeout)

    def compact_events(
        self, request: admin_pb2.CompactEventsRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> admin_pb2.CompactEventsResponse:
        """CompactEvents: deletes a project's events below a revision (admin). Not retried."""
        return self._call(R.COMPACT_EVENTS, request, fields, timeout)

    def purge(
        self, request: admin_pb2.PurgeRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> admin_pb2.PurgeResponse:
        """Purge: overwrites a leaked value everywhere a project stores it (admin). Not retried."""
        return self._call(R.PURGE, request, fields, timeout)

    def create_token(
        self, request: admin_pb2.CreateTokenRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> admin_pb2.CreateTokenResponse:
        """CreateToken (``name``, ``role``, ``project``): the secret is in the reply, once.
        Not retried."""
        return self._call(R.CREATE_TOKEN, request, fields, timeout)

    def list_tokens(
        self,
        request: admin_pb2.ListTokensRequest | None = None,
        /,
        *,
        limit: int | None = None,
        timeout: float | None = None,
        **fields: Any,
    ) -> Pages[admin_pb2.AccessToken]:
        """ListTokens: every access token (never their secrets). Read."""
        return self._pages(R.LIST_TOKENS, request, fields, timeout, limit, None)

    def revoke_token(
        self, request: admin_pb2.RevokeTokenRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> admin_pb2.RevokeTokenResponse:
        """RevokeToken (``name``). Not retried."""
        return self._call(R.REVOKE_TOKEN, request, fields, timeout)

    def get_stats(
        self, request: admin_pb2.GetStatsRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> admin_pb2.GetStatsResponse:
        """GetStats: per-project counts (``project``, or every project). Read."""
        return self._call(R.GET_STATS, request, fields, timeout)

    # -- threads --------------------------------------------------------------------------

    def open_thread(
        self, request: thread_pb2.OpenThreadRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> thread_pb2.OpenThreadResponse:
        """OpenThread: the session of a thread's namespace, created when there is none. Write."""
        return self._call(R.OPEN_THREAD, request, fields, timeout)

    def put_thread_checkpoint(
        self,
        request: thread_pb2.PutThreadCheckpointRequest | None = None,
        /,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> thread_pb2.PutThreadCheckpointResponse:
        """PutThreadCheckpoint: stores a checkpoint under the orchestrator's key. Write."""
        return self._call(R.PUT_THREAD_CHECKPOINT, request, fields, timeout)

    def get_thread_checkpoint(
        self,
        request: thread_pb2.GetThreadCheckpointRequest | None = None,
        /,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> thread_pb2.GetThreadCheckpointResponse:
        """GetThreadCheckpoint: one checkpoint by key, or the newest. Read."""
        return self._call(R.GET_THREAD_CHECKPOINT, request, fields, timeout)

    def list_thread_checkpoints(
        self,
        request: thread_pb2.ListThreadCheckpointsRequest | None = None,
        /,
        *,
        limit: int | None = None,
        page_size: int | None = None,
        timeout: float | None = None,
        **fields: Any,
    ) -> Pages[thread_pb2.ThreadCheckpoint]:
        """ListThreadCheckpoints: newest first, filtered by metadata, every page. Read."""
        return self._pages(R.LIST_THREAD_CHECKPOINTS, request, fields, timeout, limit, page_size)

    def put_thread_writes(
        self,
        request: thread_pb2.PutThreadWritesRequest | None = None,
        /,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> thread_pb2.PutThreadWritesResponse:
        """PutThreadWrites: a task's pending writes on a checkpoint. Write."""
        return self._call(R.PUT_THREAD_WRITES, request, fields, timeout)

    def delete_threads(
        self, request: thread_pb2.DeleteThreadsRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> thread_pb2.DeleteThreadsResponse:
        """DeleteThreads: every namespace of these threads. Write."""
        return self._call(R.DELETE_THREADS, request, fields, timeout)

    def delete_thread_runs(
        self,
        request: thread_pb2.DeleteThreadRunsRequest | None = None,
        /,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> thread_pb2.DeleteThreadRunsResponse:
        """DeleteThreadRuns: the checkpoints whose metadata ``run_id`` is one of these. Write."""
        return self._call(R.DELETE_THREAD_RUNS, request, fields, timeout)

    def copy_thread(
        self, request: thread_pb2.CopyThreadRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> thread_pb2.CopyThreadResponse:
        """CopyThread: a thread to a new thread key. Write."""
        return self._call(R.COPY_THREAD, request, fields, timeout)

    def prune_threads(
        self, request: thread_pb2.PruneThreadsRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> thread_pb2.PruneThreadsResponse:
        """PruneThreads: keeps each namespace's newest ``keep_latest`` checkpoints. Write."""
        return self._call(R.PRUNE_THREADS, request, fields, timeout)

    # -- item logs ------------------------------------------------------------------------

    def append_items(
        self, request: items_pb2.AppendItemsRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> items_pb2.AppendItemsResponse:
        """AppendItems: items, in order, to a log (made by its first append); an item whose
        key the log holds is skipped. Can replace the log's summary. Write."""
        return self._call(R.APPEND_ITEMS, request, fields, timeout)

    def read_items(
        self,
        request: items_pb2.ReadItemsRequest | None = None,
        /,
        *,
        limit: int | None = None,
        page_size: int | None = None,
        timeout: float | None = None,
        **fields: Any,
    ) -> Pages[model_pb2.Item]:
        """ReadItems: a log's items, oldest first (all, the newest ``last``, those after
        ``after_seq``), every page; ``response.log`` is absent when there is no such log. Read."""
        return self._pages(R.READ_ITEMS, request, fields, timeout, limit, page_size)

    def pop_item(
        self, request: items_pb2.PopItemRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> items_pb2.PopItemResponse:
        """PopItem: removes and returns a log's newest item (``item`` absent: none). Write."""
        return self._call(R.POP_ITEM, request, fields, timeout)

    def list_item_logs(
        self,
        request: items_pb2.ListItemLogsRequest | None = None,
        /,
        *,
        limit: int | None = None,
        page_size: int | None = None,
        timeout: float | None = None,
        **fields: Any,
    ) -> Pages[items_pb2.ItemLog]:
        """ListItemLogs: the logs whose keys start with ``prefix``, in key order, every page.
        Read. With a ``delimiter``, ``by_page()`` gives each reply with its ``common_prefixes``."""
        return self._pages(R.LIST_ITEM_LOGS, request, fields, timeout, limit, page_size)

    def delete_item_logs(
        self, request: items_pb2.DeleteItemLogsRequest | None = None, /, *, timeout: float | None = None, **fields: Any
    ) -> items_pb2.DeleteItemLogsResponse:
        """DeleteItemLogs: logs by ``keys`` and under ``prefixes``, with their items (``more``:
        a prefix holds more, call again). Write."""
        return self._call(R.DELETE_ITEM_LOGS, request, fields, timeout)
