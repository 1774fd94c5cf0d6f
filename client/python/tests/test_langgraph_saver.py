"""BatonSaver beyond the conformance suite: what each read costs in calls, large channel
values in chunks sent once, forks surfaced, and what the server refuses staying refused."""

from __future__ import annotations

import asyncio
import uuid
import warnings
from collections import Counter
from typing import Any

import grpc
import pytest

pytest.importorskip("langgraph.checkpoint.base", reason="the langgraph extra is not installed")

from langgraph.checkpoint.base import empty_checkpoint  # noqa: E402
from langgraph.checkpoint.base.id import uuid6  # noqa: E402

from baton_client import AsyncClient, Client, InvalidArgument, PermissionDenied, ResourceExhausted, Settings  # noqa: E402
from baton_client.langgraph import TAIL_PIECES, BatonSaver, ThreadForked, ThreadForkWarning  # noqa: E402


class Calls(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Counts the calls an async client makes, by method name."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        self.counts[details.method.decode() if isinstance(details.method, bytes) else details.method] += 1
        return await continuation(details, request)

    def take(self) -> dict[str, int]:
        counts = {k.rsplit("/", 1)[-1]: v for k, v in self.counts.items()}
        self.counts.clear()
        return counts


class SyncCalls(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Counts a sync client's calls by method name, and the chunks it uploads (in PutChunks
    calls, or with a checkpoint)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.chunks_sent = 0
        self.chunk_bytes_sent = 0

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        name = details.method.rsplit("/", 1)[-1]
        self.counts[name] += 1
        if name in ("PutChunks", "PutThreadCheckpoint"):
            self.chunks_sent += len(request.chunks)
            self.chunk_bytes_sent += sum(len(c.data) for c in request.chunks)
        return continuation(details, request)


def checkpoint(values: dict[str, Any], versions: dict[str, Any] | None = None) -> Any:
    c = empty_checkpoint()
    c["id"] = str(uuid6(clock_seq=-1))
    c["channel_values"] = values
    c["channel_versions"] = versions or {k: 1 for k in values}
    return c


def config(thread: str, parent: str | None = None, ns: str = "") -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if parent:
        conf["checkpoint_id"] = parent
    return {"configurable": conf}


def metadata(step: int, **extra: Any) -> Any:
    return {"source": "loop", "step": step, "parents": {}, **extra}


def test_reads_cost_one_call_plus_chunks_not_held(server: Any, admin_token: str, project: str) -> None:
    async def scenario() -> None:
        settings = Settings(server=server.url, token=admin_token)
        calls = Calls()
        writer = BatonSaver(project, aclient=AsyncClient(settings=settings))
        big = "x" * 300_000 + "".join(str(i) for i in range(20_000))
        parent = None
        for step in range(5):
            stored = await writer.aput(
                config("t", parent), checkpoint({"small": step, "big": big}), metadata(step), {"small": step + 1}
            )
            await writer.aput_writes(stored, [("ch", f"write {step}")], f"task-{step}")
            parent = stored["configurable"]["checkpoint_id"]
        # A reader that holds nothing: one call, plus one batch of the chunks of `big`.
        reader = BatonSaver(project, aclient=AsyncClient(settings=settings, interceptors=[calls]))
        got = await reader.aget_tuple(config("t"))
        assert got is not None and got.checkpoint["channel_values"] == {"small": 4, "big": big}
        assert got.pending_writes == [("task-4", "ch", "write 4")]
        assert calls.take() == {"GetThreadCheckpoint": 1, "GetChunks": 1}
        # Now it holds them: one call, however large the state.
        got = await reader.aget_tuple(config("t", parent))
        assert calls.take() == {"GetThreadCheckpoint": 1}
        # A list: one call per page, never one per checkpoint or channel.
        listed = [t async for t in reader.alist(config("t"))]
        assert [t.metadata["step"] for t in listed] == [4, 3, 2, 1, 0]
        assert calls.take() == {"ListThreadCheckpoints": 1}
        listed = [t async for t in reader.alist(config("t"), limit=3)]
        assert len(listed) == 3 and calls.take() == {"ListThreadCheckpoints": 1}

    asyncio.run(scenario())


def test_large_values_are_sent_once(server: Any, admin_token: str, project: str) -> None:
    calls = SyncCalls()
    client = Client(settings=Settings(server=server.url, token=admin_token), interceptors=[calls])
    saver = BatonSaver(project, client=client, chunk_bytes=64 * 1024)
    messages = [f"message {i}: " + "lorem ipsum " * 40 for i in range(600)]
    stored = saver.put(config("t"), checkpoint({"messages": messages}), metadata(0), {})
    whole = calls.chunks_sent
    assert whole >= 5, calls.counts
    # The same value again (an unchanged channel): not a byte of it is sent, nor asked about.
    calls.counts.clear()
    parent = stored["configurable"]["checkpoint_id"]
    stored = saver.put(config("t", parent), checkpoint({"messages": messages}), metadata(1), {})
    assert dict(calls.counts) == {"PutThreadCheckpoint": 1}, calls.counts
    # One more message: only the small pieces at its end that changed (the list's length up
    # front travels in the checkpoint), not a whole piece.
    calls.chunks_sent = calls.chunk_bytes_sent = 0
    grown = [*messages, "one more"]
    saver.put(config("t", stored["configurable"]["checkpoint_id"]), checkpoint({"messages": grown}), metadata(2), {})
    assert 1 <= calls.chunks_sent <= 2, (calls.chunks_sent, whole)
    assert calls.chunk_bytes_sent <= 2 * 64 * 1024 // TAIL_PIECES, calls.chunk_bytes_sent
    assert saver.get_tuple(config("t")).checkpoint["channel_values"]["messages"] == grown
    # Another process (a new saver) reads them back from the hub.
    other = BatonSaver(project, client=Client(settings=Settings(server=server.url, token=admin_token)))
    assert other.get_tuple(config("t")).checkpoint["channel_values"]["messages"] == grown


class FirstEnvelopeSaver(BatonSaver):
    """Stores checkpoints as the first envelope did: a chunked value's head as its first
    chunk, the blob's digest over the whole value."""

    def _encode(self, checkpoint: Any) -> Any:
        import hashlib

        encoded = super()._encode(checkpoint)
        envelope = self.serde.loads_typed((encoded.content_type.rsplit("+", 1)[1], encoded.payload))
        heads = envelope.pop("heads")
        for channel, index in envelope["blobs"].items():
            blob, head = encoded.blobs[index], heads[channel]
            body = b"".join(encoded.chunks[d] for d in blob.chunks)
            digest = hashlib.sha256(head).hexdigest()
            encoded.chunks[digest] = head
            blob.chunks.insert(0, digest)
            blob.digest = hashlib.sha256(head + body).hexdigest()
            blob.size_bytes = len(head) + len(body)
        envelope["v"] = 1
        encoded.payload = self.serde.dumps_typed(envelope)[1]
        return encoded


def test_checkpoints_of_the_first_envelope_still_read(server: Any, admin_token: str, project: str) -> None:
    settings = Settings(server=server.url, token=admin_token)
    messages = [f"message {i}: " + "lorem ipsum " * 40 for i in range(300)]
    old = FirstEnvelopeSaver(project, client=Client(settings=settings))
    stored = old.put(config("t"), checkpoint({"messages": messages, "n": 1}), metadata(0), {})
    # Its blob lists the head first, as a chunk of its own.
    raw = Client(settings=settings).get_thread_checkpoint(project=project, thread="t").checkpoint
    assert raw.checkpoint.blobs[0].chunks and raw.checkpoint.blobs[0].size_bytes > 64
    new = BatonSaver(project, client=Client(settings=settings))
    got = new.get_tuple(config("t"))
    assert got is not None and got.checkpoint["channel_values"] == {"messages": messages, "n": 1}
    # The new saver continues the thread in its own envelope; both read back.
    grown = [*messages, "one more"]
    new.put(config("t", stored["configurable"]["checkpoint_id"]), checkpoint({"messages": grown}), metadata(1), {})
    fresh = BatonSaver(project, client=Client(settings=settings))
    assert [t.checkpoint["channel_values"]["messages"][-1] for t in fresh.list(config("t"))] == [
        "one more",
        messages[-1],
    ]


def test_two_workers_on_one_thread_are_told(server: Any, admin_token: str, project: str) -> None:
    settings = Settings(server=server.url, token=admin_token)
    first = BatonSaver(project, client=Client(settings=settings))
    root = first.put(config("t"), checkpoint({"n": 0}), metadata(0), {})
    parent = root["configurable"]["checkpoint_id"]
    worker_a = BatonSaver(project, client=Client(settings=settings))
    worker_b = BatonSaver(project, client=Client(settings=settings))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        worker_a.put(config("t", parent), checkpoint({"n": 1}), metadata(1), {})
        assert not [w for w in seen if issubclass(w.category, ThreadForkWarning)]
        worker_b.put(config("t", parent), checkpoint({"n": 2}), metadata(1), {})
    forks = [w for w in seen if issubclass(w.category, ThreadForkWarning)]
    assert len(forks) == 1 and "forked thread 't'" in str(forks[0].message)
    # With on_fork="raise", nothing is written and the caller gets the current head.
    strict = BatonSaver(project, client=Client(settings=settings), on_fork="raise")
    with pytest.raises(ThreadForked) as raised:
        strict.put(config("t", parent), checkpoint({"n": 3}), metadata(1), {})
    assert raised.value.rejected is not None and raised.value.rejected.conflict.record.endswith("/head")
    assert len(list(first.list(config("t")))) == 3


def test_refusals_stay_refused(server: Any, admin_token: str, project: str) -> None:
    settings = Settings(server=server.url, token=admin_token)
    saver = BatonSaver(project, client=Client(settings=settings))
    saver.put(config("t"), checkpoint({"n": 0}), metadata(0), {})
    # A malformed filter: INVALID_ARGUMENT naming the field.
    with pytest.raises(InvalidArgument) as bad:
        list(saver.list(config("t"), filter={"a\"b": 1}))
    assert bad.value.bad_request is not None
    assert bad.value.bad_request.field_violations[0].field == "metadata_filter_json"
    # A value over the server's checkpoint limit: the size error, not a hang.
    with pytest.raises(ResourceExhausted):
        saver.put_writes(
            {"configurable": {**config("t")["configurable"], "checkpoint_id": saver.get_tuple(config("t")).config["configurable"]["checkpoint_id"]}},
            [("ch", "x" * (9 * 1024 * 1024))],
            "task",
        )
    # A token scoped to another project cannot reach this project's thread by key.
    other = f"github.com/pytest/{uuid.uuid4().hex}"
    scoped = server.create_token("writer", other)
    outsider = BatonSaver(project, client=Client(settings=Settings(server=server.url, token=scoped)))
    with pytest.raises(PermissionDenied) as denied:
        outsider.get_tuple(config("t"))
    assert denied.value.error_info is not None and denied.value.error_info.reason == "PERMISSION_DENIED"
    own = BatonSaver(other, client=Client(settings=Settings(server=server.url, token=scoped)))
    own.put(config("t"), checkpoint({"n": 1}), metadata(0), {})
    assert own.get_tuple(config("t")).checkpoint["channel_values"] == {"n": 1}


def test_many_large_channels_and_no_cache(server: Any, admin_token: str, project: str) -> None:
    settings = Settings(server=server.url, token=admin_token)
    # 40 channels each over the inline size: one blob each.
    values = {f"doc{i}": f"document {i} " + "text " * 2000 for i in range(40)}
    writer = BatonSaver(project, client=Client(settings=settings))
    writer.put(config("t"), checkpoint(values), metadata(0), {})
    # A reader that keeps nothing in memory reads them from what it fetched.
    reader = BatonSaver(project, client=Client(settings=settings), cache_bytes=0)
    assert reader.get_tuple(config("t")).checkpoint["channel_values"] == values
    assert [t.checkpoint["channel_values"] for t in reader.list(config("t"))] == [values]
