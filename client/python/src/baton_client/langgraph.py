"""LangGraph's checkpoint store on Baton: :class:`BatonSaver`.

>>> from baton_client.langgraph import BatonSaver
>>> saver = BatonSaver(project="acme/support-bot")      # doctest: +SKIP
>>> graph = builder.compile(checkpointer=saver)           # doctest: +SKIP

A LangGraph thread's namespace is a Baton session (ThreadService), each checkpoint is
stored under LangGraph's own id with its metadata beside Baton's checkpoint id, pending
writes per checkpoint. Channel values are serialized with the saver's ``serde``; small ones
travel inside the checkpoint, large ones as content-addressed chunks that are uploaded once
and shared by every checkpoint holding the same bytes.

Two workers continuing one thread from the same checkpoint fork it: Baton keeps both
branches and reports the fork. ``on_fork`` chooses what the second worker sees:
``"warn"`` (default: a :class:`ThreadForkWarning`), ``"raise"`` (nothing is written, a
:class:`ThreadForked` error is raised) or ``"ignore"``.

Needs the ``langgraph`` extra: ``pip install "baton-client[langgraph]"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from baton_client import _rpc
from baton_client._aio import AsyncClient
from baton_client._blobs import batches
from baton_client._client import Client
from baton_client._errors import FailedPrecondition, NotFound, WriteRejected
from baton_client._proto.baton.v1 import checkpoint_pb2, model_pb2, thread_pb2

__all__ = ["BatonSaver", "ThreadForkWarning", "ThreadForked"]

OnFork = Literal["warn", "raise", "ignore"]

#: What a stored checkpoint's payload is: the saver's envelope, serialized by its serde.
CONTENT_TYPE = "application/vnd.baton.langgraph-checkpoint+"
#: A chunked value's first bytes, kept in the envelope: a serialized list's header (its
#: length) changes with every append, so it is kept out of the chunks after it.
HEAD_BYTES = 64
#: The envelope's version: 2 keeps each chunked value's head in the envelope (1: as its
#: first chunk).
ENVELOPE = 2
#: The end of a chunked value past its last whole piece is cut into this many smaller ones.
TAIL_PIECES = 8
#: The role of a channel value stored as a blob.
CHANNEL_ROLE = "langgraph-channel"
#: Each GetChunks reply carries at most this many bytes (the server's limit) and chunks.
GET_BATCH_BYTES = 8 * 1024 * 1024
GET_BATCH_CHUNKS = 64


class ThreadForkWarning(UserWarning):
    """A checkpoint forked its thread: another writer had moved the thread on from its parent."""


class ThreadForked(WriteRejected):
    """``on_fork="raise"``: a checkpoint would have forked its thread, and nothing was written."""


class _Chunks:
    """Chunks this process holds (bytes, bounded) and digests it knows the hub has."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.data: OrderedDict[str, bytes] = OrderedDict()
        self.size = 0
        self.on_hub: OrderedDict[str, None] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, digest: str) -> bytes | None:
        with self.lock:
            value = self.data.get(digest)
            if value is not None:
                self.data.move_to_end(digest)
            return value

    def put(self, digest: str, value: bytes) -> None:
        with self.lock:
            self._known(digest)
            if digest in self.data or len(value) > self.max_bytes:
                return
            self.data[digest] = value
            self.size += len(value)
            while self.size > self.max_bytes and self.data:
                _, old = self.data.popitem(last=False)
                self.size -= len(old)

    def known(self, digest: str) -> bool:
        with self.lock:
            return digest in self.on_hub

    def mark(self, digests: Iterable[str]) -> None:
        with self.lock:
            for d in digests:
                self._known(d)

    def forget(self, digests: Iterable[str]) -> None:
        with self.lock:
            for d in digests:
                self.on_hub.pop(d, None)

    def _known(self, digest: str) -> None:
        self.on_hub[digest] = None
        self.on_hub.move_to_end(digest)
        while len(self.on_hub) > 200_000:
            self.on_hub.popitem(last=False)


def _strip_nul(value: Any) -> Any:
    """The metadata document as Baton stores it: JSON without NUL characters."""
    if isinstance(value, str):
        return value.replace("\u0000", "")
    if isinstance(value, dict):
        return {_strip_nul(str(k)): _strip_nul(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strip_nul(v) for v in value]
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


class _Encoded:
    """A checkpoint as PutThreadCheckpoint sends it, and the chunks its blobs need."""

    def __init__(self, payload: bytes, content_type: str, blobs: list[model_pb2.BlobRef], chunks: dict[str, bytes]):
        self.payload = payload
        self.content_type = content_type
        self.blobs = blobs
        self.chunks = chunks


class BatonSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer that stores threads on a Baton hub, sync and async.

    ``project`` is the Baton project the threads live in (a token scoped to it is enough).
    ``client``/``aclient`` are used for the sync/async methods; made from the ``baton``
    CLI's configuration (or ``client_options``: ``server``, ``token``, ``ca_cert``) when not
    given. Channel values over ``inline_bytes`` serialized are stored as chunks: their first
    ``HEAD_BYTES`` go in the checkpoint, the rest in pieces of ``chunk_bytes`` and the end
    past the last whole piece in pieces of ``chunk_bytes // TAIL_PIECES`` (so a value that
    grows at its end, as a conversation's messages do, shares all but its last small piece
    with the version before it); ``cache_bytes`` of chunks are kept in memory, so reading a checkpoint whose
    large values this process has seen costs one call. A checkpoint's new chunks travel
    with it when they are small (``upload_bytes`` in all), else in calls of their own first.
    """

    def __init__(
        self,
        project: str,
        *,
        client: Client | None = None,
        aclient: AsyncClient | None = None,
        on_fork: OnFork = "warn",
        serde: SerializerProtocol | None = None,
        inline_bytes: int = 4096,
        chunk_bytes: int = 16 * 1024,
        cache_bytes: int = 64 * 1024 * 1024,
        upload_bytes: int = 1024 * 1024,
        **client_options: Any,
    ) -> None:
        super().__init__(serde=serde)
        if not project:
            raise ValueError("project: name the Baton project the threads live in, e.g. 'acme/support-bot'")
        if on_fork not in ("warn", "raise", "ignore"):
            raise ValueError(f"on_fork: {on_fork!r} is not one of 'warn', 'raise', 'ignore'")
        if not 0 < chunk_bytes <= 1024 * 1024:
            raise ValueError("chunk_bytes: 1..1048576 (the hub stores chunks of at most 1 MiB)")
        self.project = project
        self.on_fork: OnFork = on_fork
        self.inline_bytes = inline_bytes
        self.chunk_bytes = chunk_bytes
        self.upload_bytes = upload_bytes
        self._client = client
        self._aclient = aclient
        # Only the clients this saver makes are its to close.
        self._own_client = client is None
        self._own_aclient = aclient is None
        self._client_options = client_options
        self._chunks = _Chunks(cache_bytes)
        self._lock = threading.Lock()
        # Checkpoints this process put or read, by (thread, namespace, key), and writes
        # waiting for a put of this process: LangGraph hands a checkpoint's writes over while
        # its put may still be queued or running (its puts run in the background).
        self._present: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        self._waiting: dict[tuple[str, str, str], threading.Event] = {}
        self._awaiting: dict[tuple[str, str, str], asyncio.Event] = {}

    # -- clients ---------------------------------------------------------------------------

    @property
    def client(self) -> Client:
        with self._lock:
            if self._client is None:
                self._client = Client(**self._client_options)
            return self._client

    @property
    def aclient(self) -> AsyncClient:
        with self._lock:
            if self._aclient is None:
                self._aclient = AsyncClient(**self._client_options)
            return self._aclient

    def close(self) -> None:
        """Closes the sync client this saver made (not one it was given)."""
        if self._client is not None and self._own_client:
            self._client.close()

    async def aclose(self) -> None:
        """Closes the async client this saver made."""
        if self._aclient is not None and self._own_aclient:
            await self._aclient.close()

    # -- what both kinds of method share ----------------------------------------------------

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions that sort as strings: a counter, then a random tie-breaker."""
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(str(current).split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"

    def _encode(self, checkpoint: Checkpoint) -> _Encoded:
        c = dict(checkpoint)
        values: dict[str, Any] = c.pop("channel_values", None) or {}  # type: ignore[assignment]
        versions: dict[str, Any] = c.get("channel_versions") or {}  # type: ignore[assignment]
        inline: dict[str, list[Any]] = {}
        blob_of: dict[str, int] = {}
        heads: dict[str, bytes] = {}
        blobs: list[model_pb2.BlobRef] = []
        chunks: dict[str, bytes] = {}
        for channel, value in values.items():
            # As LangGraph's own savers: a channel is stored with its version.
            if channel not in versions:
                continue
            kind, data = self.serde.dumps_typed(value)
            if len(data) <= self.inline_bytes:
                inline[channel] = [kind, data]
                continue
            # The head travels in the envelope, the body as chunks.
            heads[channel], body = data[:HEAD_BYTES], data[HEAD_BYTES:]
            pieces = self._pieces(body)
            digests = [hashlib.sha256(p).hexdigest() for p in pieces]
            chunks.update(zip(digests, pieces, strict=True))
            blob_of[channel] = len(blobs)
            blobs.append(
                model_pb2.BlobRef(
                    role=CHANNEL_ROLE,
                    digest=hashlib.sha256(body).hexdigest(),
                    size_bytes=len(body),
                    chunks=digests,
                    content_type=kind,
                )
            )
        envelope = {"v": ENVELOPE, "checkpoint": c, "inline": inline, "blobs": blob_of, "heads": heads}
        kind, payload = self.serde.dumps_typed(envelope)
        return _Encoded(payload, CONTENT_TYPE + kind, blobs, chunks)

    def _pieces(self, body: bytes) -> list[bytes]:
        """A value's chunks (after its head): whole pieces of ``chunk_bytes``, then the rest in
        pieces of ``chunk_bytes // TAIL_PIECES``, so that a value growing at its end shares
        with the version before it all but its last small piece."""
        whole = len(body) // self.chunk_bytes * self.chunk_bytes
        small = max(1, self.chunk_bytes // TAIL_PIECES)
        return [body[i : i + self.chunk_bytes] for i in range(0, whole, self.chunk_bytes)] + [
            body[i : i + small] for i in range(whole, len(body), small)
        ]

    def _metadata(self, config: RunnableConfig, metadata: CheckpointMetadata) -> str:
        document = _strip_nul(get_serializable_checkpoint_metadata(config, metadata))
        return json.dumps(document, ensure_ascii=False, default=_json_default)

    def _put_request(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, encoded: _Encoded
    ) -> thread_pb2.PutThreadCheckpointRequest:
        conf = config["configurable"]
        policy = model_pb2.CONFLICT_POLICY_REJECT if self.on_fork == "raise" else model_pb2.CONFLICT_POLICY_OVERWRITE
        return thread_pb2.PutThreadCheckpointRequest(
            project=self.project,
            thread=str(conf["thread_id"]),
            namespace=conf.get("checkpoint_ns", "") or "",
            key=checkpoint["id"],
            parent_key=conf.get("checkpoint_id") or "",
            metadata_json=self._metadata(config, metadata),
            payload=encoded.payload,
            payload_content_type=encoded.content_type,
            blobs=encoded.blobs,
            agent=model_pb2.AGENT_KIND_CUSTOM,
            write=model_pb2.WriteOptions(policy=policy, agent=model_pb2.AGENT_KIND_CUSTOM),
        )

    def _after_put(self, reply: thread_pb2.PutThreadCheckpointResponse, request: Any) -> RunnableConfig:
        result = reply.result
        if result.outcome == model_pb2.WRITE_OUTCOME_OVERWRITTEN and self.on_fork == "warn":
            warnings.warn(
                ThreadForkWarning(
                    f"checkpoint {request.key} forked thread {request.thread!r} (namespace {request.namespace!r}) of "
                    f"project {self.project!r}: {result.conflict.detail or 'its parent is not the newest checkpoint'}; "
                    "both branches are kept. Pass on_fork='raise' to refuse such writes."
                ),
                stacklevel=3,
            )
        return {
            "configurable": {
                "thread_id": request.thread,
                "checkpoint_ns": request.namespace,
                "checkpoint_id": request.key,
            }
        }

    def _forked(self, error: WriteRejected, request: Any) -> ThreadForked:
        return ThreadForked(
            f"checkpoint {request.key} would fork thread {request.thread!r} (namespace {request.namespace!r}): another "
            f"writer moved it on from {request.parent_key or 'its root'}; nothing was written. {error.message}",
            code=error.code,
            status=error.status,
            trailing_metadata=error.trailing_metadata,
        )

    def _missing_upload(self, encoded: _Encoded) -> list[str]:
        return [d for d in encoded.chunks if not self._chunks.known(d)]

    def _carried(self, encoded: _Encoded) -> list[checkpoint_pb2.Chunk] | None:
        """The chunks the hub may lack, when they are few and small enough to travel with the
        checkpoint (the hub skips those it has); ``None``: upload them first."""
        wanted = self._missing_upload(encoded)
        if len(wanted) > 64 or sum(len(encoded.chunks[d]) for d in wanted) > self.upload_bytes:
            return None
        return [checkpoint_pb2.Chunk(digest=d, data=encoded.chunks[d]) for d in wanted]

    def _carried_done(self, carried: Sequence[checkpoint_pb2.Chunk]) -> None:
        for c in carried:
            self._chunks.put(c.digest, c.data)

    def _stored(self, key: tuple[str, str, str]) -> None:
        """A checkpoint is on the hub: wakes the writes waiting for it."""
        with self._lock:
            self._present[key] = None
            self._present.move_to_end(key)
            while len(self._present) > 10_000:
                self._present.popitem(last=False)
            waiting = self._waiting.pop(key, None)
            awaiting = self._awaiting.pop(key, None)
        if waiting is not None:
            waiting.set()
        if awaiting is not None:
            awaiting.set()

    def _wait_for(self, key: tuple[str, str, str]) -> threading.Event | None:
        """The event a checkpoint's writes wait on (``None``: it is on the hub already)."""
        with self._lock:
            if key in self._present:
                return None
            return self._waiting.setdefault(key, threading.Event())

    def _await_for(self, key: tuple[str, str, str]) -> asyncio.Event | None:
        with self._lock:
            if key in self._present:
                return None
            return self._awaiting.setdefault(key, asyncio.Event())

    def _writes_request(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> thread_pb2.PutThreadWritesRequest:
        conf = config["configurable"]
        items = []
        for i, (channel, value) in enumerate(writes):
            kind, data = self.serde.dumps_typed(value)
            items.append(
                model_pb2.PendingWrite(
                    task_id=task_id,
                    index=WRITES_IDX_MAP.get(channel, i),
                    channel=channel,
                    task_path=task_path,
                    value_type=kind,
                    value=data,
                )
            )
        return thread_pb2.PutThreadWritesRequest(
            project=self.project,
            thread=str(conf["thread_id"]),
            namespace=conf.get("checkpoint_ns", "") or "",
            key=conf["checkpoint_id"],
            writes=items,
        )

    def _list_request(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
    ) -> thread_pb2.ListThreadCheckpointsRequest:
        request = thread_pb2.ListThreadCheckpointsRequest(project=self.project)
        if config is not None:
            conf = config.get("configurable", {})
            if conf.get("thread_id") is not None:
                request.thread = str(conf["thread_id"])
            if conf.get("checkpoint_ns") is not None:
                request.namespace = conf["checkpoint_ns"]
            if get_checkpoint_id(config):
                request.key = get_checkpoint_id(config) or ""
        if before is not None and get_checkpoint_id(before):
            request.before_key = get_checkpoint_id(before) or ""
        if filter:
            request.metadata_filter_json = json.dumps(_strip_nul(filter), ensure_ascii=False, default=_json_default)
        return request

    def _needed(self, found: Iterable[thread_pb2.ThreadCheckpoint]) -> tuple[list[list[str]], dict[str, bytes]]:
        """The chunks these checkpoints need: those this process holds (taken now, so that
        the cache may drop them meanwhile), and the others in GetChunks batches."""
        batches: list[list[str]] = []
        held: dict[str, bytes] = {}
        batch: list[str] = []
        size = 0
        seen: set[str] = set()
        for t in found:
            for blob in t.checkpoint.blobs:
                if blob.role != CHANNEL_ROLE:
                    continue
                for digest in blob.chunks:
                    if digest in seen:
                        continue
                    seen.add(digest)
                    cached = self._chunks.get(digest)
                    if cached is not None:
                        held[digest] = cached
                        continue
                    piece = _largest_chunk(blob)
                    if batch and (size + piece > GET_BATCH_BYTES or len(batch) >= GET_BATCH_CHUNKS):
                        batches.append(batch)
                        batch, size = [], 0
                    batch.append(digest)
                    size += piece
        if batch:
            batches.append(batch)
        return batches, held

    def _keep_chunks(self, reply: checkpoint_pb2.GetChunksResponse, fetched: dict[str, bytes]) -> None:
        for chunk in reply.chunks:
            if hashlib.sha256(chunk.data).hexdigest() == chunk.digest:
                fetched[chunk.digest] = chunk.data
                self._chunks.put(chunk.digest, chunk.data)

    def _tuple(self, t: thread_pb2.ThreadCheckpoint, fetched: dict[str, bytes]) -> CheckpointTuple:
        self._stored((t.thread, t.namespace, t.key))
        stored = t.checkpoint
        if stored.corrupt:
            raise ValueError(
                f"checkpoint {t.key} of thread {t.thread!r} (Baton checkpoint {stored.id}) failed its digest on the hub; "
                "read an older one (list with before=...) or restore the hub's database"
            )
        kind = stored.payload_content_type.removeprefix(CONTENT_TYPE)
        envelope = self.serde.loads_typed((kind, stored.payload))
        if envelope.get("v") not in (1, ENVELOPE):
            raise ValueError(
                f"checkpoint {t.key} of thread {t.thread!r} was stored by a newer baton-client (envelope version "
                f"{envelope.get('v')!r}); upgrade baton-client to read it"
            )
        heads: dict[str, bytes] = envelope.get("heads", {})
        values: dict[str, Any] = {}
        for channel, (value_kind, data) in envelope.get("inline", {}).items():
            values[channel] = self.serde.loads_typed((value_kind, data))
        for channel, index in envelope.get("blobs", {}).items():
            blob = stored.blobs[index]
            # What this read fetched or took from the cache (which may drop a chunk at any time).
            pieces = [fetched.get(d) for d in blob.chunks]
            if any(p is None for p in pieces):
                raise RuntimeError(f"checkpoint {t.key}: a chunk of channel {channel!r} could not be read from the hub")
            data = b"".join(p for p in pieces if p is not None)
            if hashlib.sha256(data).hexdigest() != blob.digest:
                raise ValueError(f"checkpoint {t.key}: channel {channel!r} does not match its digest")
            values[channel] = self.serde.loads_typed((blob.content_type, heads.get(channel, b"") + data))
        checkpoint: Checkpoint = {**envelope["checkpoint"], "channel_values": values}  # type: ignore[typeddict-item]
        config: RunnableConfig = {
            "configurable": {"thread_id": t.thread, "checkpoint_ns": t.namespace, "checkpoint_id": t.key}
        }
        parent: RunnableConfig | None = None
        if t.parent_key:
            parent = {"configurable": {"thread_id": t.thread, "checkpoint_ns": t.namespace, "checkpoint_id": t.parent_key}}
        writes = [(w.task_id, w.channel, self.serde.loads_typed((w.value_type, w.value))) for w in t.writes]
        metadata: CheckpointMetadata = json.loads(t.metadata_json or "{}")
        return CheckpointTuple(config, checkpoint, metadata, parent, writes)

    # -- sync ----------------------------------------------------------------------------------

    def _upload(self, encoded: _Encoded, *, every: bool = False) -> None:
        wanted = list(encoded.chunks) if every else self._missing_upload(encoded)
        if not wanted:
            return
        client = self.client
        missing = set(client.missing_chunks(project=self.project, digests=wanted).missing)
        for batch in _put_batches([checkpoint_pb2.Chunk(digest=d, data=encoded.chunks[d]) for d in wanted if d in missing]):
            client.put_chunks(project=self.project, chunks=batch)
        self._chunks.mark(wanted)
        for d in wanted:
            self._chunks.put(d, encoded.chunks[d])

    def _fetch(self, found: Sequence[thread_pb2.ThreadCheckpoint]) -> dict[str, bytes]:
        batches, fetched = self._needed(found)
        for batch in batches:
            self._keep_chunks(self.client.get_chunks(project=self.project, digests=batch), fetched)
        return fetched

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        conf = config["configurable"]
        reply = self.client.get_thread_checkpoint(
            project=self.project,
            thread=str(conf["thread_id"]),
            namespace=conf.get("checkpoint_ns", "") or "",
            key=get_checkpoint_id(config) or "",
        )
        if not reply.HasField("checkpoint"):
            return None
        fetched = self._fetch([reply.checkpoint])
        return self._tuple(reply.checkpoint, fetched)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        request = self._list_request(config, filter, before)
        left = limit
        while left is None or left > 0:
            request.page_size = min(left, 100) if left is not None else 100
            # A page at a time (not the client's Pages): each page's chunks are fetched at once.
            page = self.client._invoke(_rpc.LIST_THREAD_CHECKPOINTS, request, None)
            fetched = self._fetch(page.checkpoints)
            for t in page.checkpoints:
                yield self._tuple(t, fetched)
            if left is not None:
                left -= len(page.checkpoints)
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        encoded = self._encode(checkpoint)
        carried = self._carried(encoded)
        if carried is None:
            self._upload(encoded)
        request = self._put_request(config, checkpoint, metadata, encoded)
        request.chunks.extend(carried or [])
        reply = self._put(request, encoded)
        self._carried_done(carried or [])
        self._stored((request.thread, request.namespace, request.key))
        return self._after_put(reply, request)

    def _put(self, request: thread_pb2.PutThreadCheckpointRequest, encoded: _Encoded) -> Any:
        try:
            try:
                return self.client.put_thread_checkpoint(request)
            except FailedPrecondition as e:
                if "not uploaded" not in e.message:
                    raise
                # The hub dropped chunks this process thought it had (retention): send them all.
                self._chunks.forget(encoded.chunks)
                self._upload(encoded, every=True)
                return self.client.put_thread_checkpoint(request)
        except WriteRejected as e:
            raise self._forked(e, request) from e

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        if not writes:
            return
        request = self._writes_request(config, writes, task_id, task_path)
        # LangGraph's loop may hand a checkpoint's writes over before the checkpoint itself
        # (its puts run in the background, each after the one before): wait for its put in
        # this process (a checkpoint it neither put nor read is given a moment), then ask
        # again while the hub does not have it.
        waiting = self._wait_for((request.thread, request.namespace, request.key))
        if waiting is not None:
            waiting.wait(_PUT_WAIT)
        for pause in _WAITS:
            try:
                self.client.put_thread_writes(request)
                return
            except NotFound:
                if pause is None:
                    raise
                time.sleep(pause)

    def delete_thread(self, thread_id: str) -> None:
        self.client.delete_threads(project=self.project, threads=[str(thread_id)])

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        if run_ids:
            self.client.delete_thread_runs(project=self.project, run_ids=[str(r) for r in run_ids])

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.client.copy_thread(
            project=self.project, source_thread=str(source_thread_id), target_thread=str(target_thread_id)
        )

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        if thread_ids:
            self.client.prune_threads(
                project=self.project, threads=[str(t) for t in thread_ids], keep_latest=_keep(strategy)
            )

    # -- async ---------------------------------------------------------------------------------

    async def _aupload(self, encoded: _Encoded, *, every: bool = False) -> None:
        wanted = list(encoded.chunks) if every else self._missing_upload(encoded)
        if not wanted:
            return
        client = self.aclient
        missing = set((await client.missing_chunks(project=self.project, digests=wanted)).missing)
        for batch in _put_batches([checkpoint_pb2.Chunk(digest=d, data=encoded.chunks[d]) for d in wanted if d in missing]):
            await client.put_chunks(project=self.project, chunks=batch)
        self._chunks.mark(wanted)
        for d in wanted:
            self._chunks.put(d, encoded.chunks[d])

    async def _afetch(self, found: Sequence[thread_pb2.ThreadCheckpoint]) -> dict[str, bytes]:
        batches, fetched = self._needed(found)
        for batch in batches:
            self._keep_chunks(await self.aclient.get_chunks(project=self.project, digests=batch), fetched)
        return fetched

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        conf = config["configurable"]
        reply = await self.aclient.get_thread_checkpoint(
            project=self.project,
            thread=str(conf["thread_id"]),
            namespace=conf.get("checkpoint_ns", "") or "",
            key=get_checkpoint_id(config) or "",
        )
        if not reply.HasField("checkpoint"):
            return None
        fetched = await self._afetch([reply.checkpoint])
        return self._tuple(reply.checkpoint, fetched)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        request = self._list_request(config, filter, before)
        left = limit
        while left is None or left > 0:
            request.page_size = min(left, 100) if left is not None else 100
            page = await self.aclient._invoke(_rpc.LIST_THREAD_CHECKPOINTS, request, None)
            fetched = await self._afetch(page.checkpoints)
            for t in page.checkpoints:
                yield self._tuple(t, fetched)
            if left is not None:
                left -= len(page.checkpoints)
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        encoded = self._encode(checkpoint)
        carried = self._carried(encoded)
        if carried is None:
            await self._aupload(encoded)
        request = self._put_request(config, checkpoint, metadata, encoded)
        request.chunks.extend(carried or [])
        reply = await self._aput(request, encoded)
        self._carried_done(carried or [])
        self._stored((request.thread, request.namespace, request.key))
        return self._after_put(reply, request)

    async def _aput(self, request: thread_pb2.PutThreadCheckpointRequest, encoded: _Encoded) -> Any:
        try:
            try:
                return await self.aclient.put_thread_checkpoint(request)
            except FailedPrecondition as e:
                if "not uploaded" not in e.message:
                    raise
                self._chunks.forget(encoded.chunks)
                await self._aupload(encoded, every=True)
                return await self.aclient.put_thread_checkpoint(request)
        except WriteRejected as e:
            raise self._forked(e, request) from e

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        if not writes:
            return
        request = self._writes_request(config, writes, task_id, task_path)
        awaiting = self._await_for((request.thread, request.namespace, request.key))
        if awaiting is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(awaiting.wait(), _PUT_WAIT)
        for pause in _WAITS:
            try:
                await self.aclient.put_thread_writes(request)
                return
            except NotFound:
                if pause is None:
                    raise
                await asyncio.sleep(pause)

    async def adelete_thread(self, thread_id: str) -> None:
        await self.aclient.delete_threads(project=self.project, threads=[str(thread_id)])

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        if run_ids:
            await self.aclient.delete_thread_runs(project=self.project, run_ids=[str(r) for r in run_ids])

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self.aclient.copy_thread(
            project=self.project, source_thread=str(source_thread_id), target_thread=str(target_thread_id)
        )

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        if thread_ids:
            await self.aclient.prune_threads(
                project=self.project, threads=[str(t) for t in thread_ids], keep_latest=_keep(strategy)
            )


#: How long a checkpoint's writes wait for the checkpoint (NOT_FOUND until it is stored),
#: about two minutes in all (its put may upload chunks, after the put before it); ``None``:
#: give up and raise.
_WAITS: tuple[float | None, ...] = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, *([1.0] * 120), None)
#: How long a checkpoint's writes wait for a put of this process before asking the hub.
_PUT_WAIT = 1.0


def _largest_chunk(blob: model_pb2.BlobRef) -> int:
    """The most one chunk of a blob can hold, whatever chunk size its writer used: a blob of
    S bytes in n chunks, a head then fixed-size pieces (or fixed-size pieces only, as
    earlier versions wrote), has chunks of at most (S - 1) // (n - 2) bytes from 3 chunks on."""
    n, size = len(blob.chunks), max(0, blob.size_bytes)
    if n <= 2:
        return max(1, min(1024 * 1024, size))
    return max(1, min(1024 * 1024, (size - 1) // (n - 2)))


def _keep(strategy: str) -> int:
    if strategy == "keep_latest":
        return 1
    if strategy == "delete":
        return 0
    raise ValueError(f"strategy: {strategy!r} is not 'keep_latest' or 'delete'")


def _put_batches(chunks: list[checkpoint_pb2.Chunk]) -> Iterator[list[checkpoint_pb2.Chunk]]:
    for batch in batches(chunks):
        # The hub takes at most 64 chunks a call, too.
        for i in range(0, len(batch), 64):
            yield batch[i : i + 64]
