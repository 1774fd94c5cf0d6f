"""Watch: replay then live events; resumed across a server restart without a gap or a
duplicate; non-transient errors raised."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
import uuid
from typing import Any

import pytest

from baton_client import AsyncClient, Client, OutOfRange, PermissionDenied, RetryPolicy, Settings
from baton_client.pb import model_pb2

from conftest import Server

CUSTOM = model_pb2.AGENT_KIND_CUSTOM
RECONNECT = RetryPolicy(attempts=40, initial_backoff=0.05, max_backoff=0.3)


def collect(watch: Any, out: "queue.Queue[Any]") -> None:
    try:
        for event in watch:
            out.put(event)
    except Exception as e:  # handed to the test thread
        out.put(e)


def take(out: "queue.Queue[Any]", n: int, timeout: float = 20.0) -> list[model_pb2.Event]:
    events = []
    deadline = time.monotonic() + timeout
    while len(events) < n:
        item = out.get(timeout=max(0.01, deadline - time.monotonic()))
        if isinstance(item, BaseException):
            raise item
        events.append(item)
    return events


def test_watch_replays_then_follows_live(admin: Client, project: str) -> None:
    session = admin.start_session(project=project, agent=CUSTOM).session
    admin.update_session(session_id=session.id, goal="two")
    out: queue.Queue[Any] = queue.Queue()
    watch = admin.watch(cursors={project: 1})
    thread = threading.Thread(target=collect, args=(watch, out), daemon=True)
    thread.start()
    try:
        assert [e.revision for e in take(out, 1)] == [2]  # after the cursor only
        admin.put_memory(project=project, category="goal", op="MEMORY_OP_REPLACE_SET", items=[{"content": "live"}])
        live = take(out, 1)[0]
        assert (live.revision, live.kind, live.memory.entries[0].content) == (3, model_pb2.EVENT_KIND_MEMORY_CHANGED, "live")
    finally:
        watch.close()
        thread.join(5)
    assert not thread.is_alive() and out.empty()
    assert watch.cursors == {project: 3}


def test_watch_filters_kinds(admin: Client, project: str) -> None:
    session = admin.start_session(project=project, agent=CUSTOM).session
    admin.update_session(session_id=session.id, goal="x")
    admin.put_memory(project=project, category="goal", op="MEMORY_OP_REPLACE_SET", items=[{"content": "m"}])
    with admin.watch(cursors={project: 0}, kinds=[model_pb2.EVENT_KIND_MEMORY_CHANGED]) as watch:
        event = next(watch)
    assert (event.revision, event.kind) == (3, model_pb2.EVENT_KIND_MEMORY_CHANGED)


def test_watch_below_compacted_events_raises_out_of_range(admin: Client, project: str) -> None:
    session = admin.start_session(project=project, agent=CUSTOM).session
    admin.update_session(session_id=session.id, goal="x")
    admin.compact_events(project=project, below_revision=2)
    with admin.watch(cursors={project: 0}) as watch:
        with pytest.raises(OutOfRange) as raised:
            next(watch)
    assert raised.value.reason == "CURSOR_COMPACTED"
    assert watch.reconnects == 0


def test_watch_without_permission_raises(server: Server, admin: Client, project: str) -> None:
    other = f"github.com/pytest/{uuid.uuid4().hex}"
    secret = admin.create_token(name=f"scoped-{uuid.uuid4().hex[:8]}", role="reader", project=other).secret
    admin.start_session(project=project, agent=CUSTOM)
    with server.client(secret) as reader, reader.watch(cursors={project: 0}) as watch:
        with pytest.raises(PermissionDenied):
            next(watch)


def write_some(client: Client, project: str, session_id: str, n: int, tag: str) -> None:
    for i in range(n):
        client.update_session(session_id=session_id, summary=f"{tag} {i}")


def assert_gapless(events: list[model_pb2.Event], project: str, last: int) -> None:
    assert all(e.project == project for e in events)
    assert [e.revision for e in events] == list(range(1, last + 1))


def test_watch_resumes_across_a_server_restart(own_server: Server, project: str) -> None:
    token = str(own_server.admin_token)  # type: ignore[attr-defined]
    writer = own_server.client(token)
    watcher = own_server.client(token, watch_retry=RECONNECT)
    out: queue.Queue[Any] = queue.Queue()
    session = writer.start_session(project=project, agent=CUSTOM).session
    write_some(writer, project, session.id, 3, "before")
    watch = watcher.watch(cursors={project: 0})
    thread = threading.Thread(target=collect, args=(watch, out), daemon=True)
    thread.start()
    try:
        events = take(out, 4)
        own_server.restart(kill=True)  # a crash: the stream breaks mid-watch
        write_some(writer, project, session.id, 3, "after")  # written before the watch is back
        events += take(out, 3)
        own_server.restart(kill=False)  # and a clean shutdown
        write_some(writer, project, session.id, 2, "again")
        events += take(out, 2)
    finally:
        watch.close()
        thread.join(5)
        writer.close()
        watcher.close()
    assert_gapless(events, project, 9)
    assert [e.session.summary for e in events[4:]] == ["after 0", "after 1", "after 2", "again 0", "again 1"]
    assert watch.reconnects >= 2
    assert out.empty()  # nothing delivered twice


def test_async_watch_resumes_across_a_server_restart(own_server: Server, project: str) -> None:
    token = str(own_server.admin_token)  # type: ignore[attr-defined]
    settings = Settings(server=own_server.url, token=token)

    async def main() -> tuple[list[model_pb2.Event], int]:
        async with AsyncClient(settings=settings) as writer, AsyncClient(settings=settings, watch_retry=RECONNECT) as watcher:
            session = (await writer.start_session(project=project, agent=CUSTOM)).session
            for i in range(2):
                await writer.update_session(session_id=session.id, summary=f"before {i}")
            events: list[model_pb2.Event] = []
            async with watcher.watch(cursors={project: 0}) as watch:
                async for event in watch:
                    events.append(event)
                    if len(events) == 3:
                        await asyncio.to_thread(own_server.restart, True)
                        for i in range(3):
                            await writer.update_session(session_id=session.id, summary=f"after {i}")
                    if len(events) == 6:
                        break
            # Nothing more than the six was queued for delivery.
            return events, watch.reconnects

    events, reconnects = asyncio.run(asyncio.wait_for(main(), 30))
    assert_gapless(events, project, 6)
    assert reconnects >= 1


def test_async_watch_raises_out_of_range(admin: Client, admin_token: str, server: Server, project: str) -> None:
    session = admin.start_session(project=project, agent=CUSTOM).session
    admin.update_session(session_id=session.id, goal="x")
    admin.compact_events(project=project, below_revision=3)

    async def main() -> None:
        async with AsyncClient(settings=Settings(server=server.url, token=admin_token)) as client:
            with pytest.raises(OutOfRange):
                async for _ in client.watch(cursors={project: 1}):
                    pass
            # From the oldest kept revision on, it works.
            async with client.watch(cursors={project: 2}) as watch:
                event = await watch.__anext__()
                assert (event.revision, event.kind) == (3, model_pb2.EVENT_KIND_EVENTS_COMPACTED)

    asyncio.run(asyncio.wait_for(main(), 20))
