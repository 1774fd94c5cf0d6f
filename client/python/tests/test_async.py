"""The asyncio client against a real server: the same calls as the sync tests."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable

import grpc
import pytest

from baton_client import (
    AsyncClient,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    Settings,
    Unauthenticated,
    WriteRejected,
    join_chunks,
)
from baton_client.pb import model_pb2, session_pb2

from conftest import Server

CUSTOM = model_pb2.AGENT_KIND_CUSTOM


def run(server: Server, token: str | None, body: Callable[[AsyncClient], Awaitable[None]]) -> None:
    async def main() -> None:
        async with AsyncClient(settings=Settings(server=server.url, token=token)) as client:
            await body(client)

    asyncio.run(main())


def test_async_sessions_and_paging(server: Server, admin_token: str, project: str) -> None:
    async def body(c: AsyncClient) -> None:
        started = await c.start_session(project=project, agent=CUSTOM, goal="async goal")
        assert started.result.revision == 1 and not started.result.replayed
        session = started.session
        assert (await c.get_session(session_id=session.id)).session.goal == "async goal"
        updated = await c.update_session(session_id=session.id, summary="halfway")
        assert updated.session.summary == "halfway"
        assert (await c.heartbeat(session_id=session.id)).status == model_pb2.SESSION_STATUS_ACTIVE
        ended = await c.end_session(session_id=session.id, summary="done")
        assert ended.session.status == model_pb2.SESSION_STATUS_COMPLETED
        with pytest.raises(FailedPrecondition):
            await c.heartbeat(session_id=session.id, status="SESSION_STATUS_IDLE")

        ids = [session.id] + [(await c.start_session(project=project, agent=CUSTOM)).session.id for _ in range(5)]
        sessions = c.list_sessions(project=project, page_size=2)
        assert [s.id async for s in sessions] == list(reversed(ids))
        assert sessions.response.as_of_revision == 8
        assert [s.id async for s in c.list_sessions(project=project, limit=3, page_size=2)] == list(reversed(ids))[:3]

        with pytest.raises(FailedPrecondition):  # still active
            await c.resume_session(project=project, session_id=ids[1], agent=CUSTOM)
        resumed = await c.resume_session(project=project, session_id=session.id, agent=CUSTOM)
        assert resumed.resumed_from.id == session.id and resumed.session.resumed_from == session.id

        request = session_pb2.GetSessionRequest(session_id=session.id)
        assert (await c.get_session(request)).session.id == session.id
        with pytest.raises(TypeError):
            await c.get_session(request, session_id="x")

    run(server, admin_token, body)


def test_async_checkpoints_with_payload_and_chunks(server: Server, admin_token: str, project: str) -> None:
    async def body(c: AsyncClient) -> None:
        session = (await c.start_session(project=project, agent=CUSTOM)).session
        data = os.urandom(1024 * 1024 + 4096)
        ref = await c.upload_blob(project, data, content_type="text/plain")
        assert len(ref.chunks) == 2
        assert (await c.missing_chunks(project=project, digests=list(ref.chunks))).missing == []
        assert (await c.put_chunks(project=project, chunks=[])).stored == 0
        created = await c.create_checkpoint(
            session_id=session.id, kind="CHECKPOINT_KIND_TASK", state={"phase": "async", "goal": "g"},
            payload=b"async payload", blobs=[ref],
        )
        got = (await c.get_checkpoint(checkpoint_id=created.checkpoint.id, include_payload=True)).checkpoint
        assert got.payload == b"async payload" and got.state.phase == "async"
        chunks = (await c.get_chunks(project=project, digests=list(got.blobs[0].chunks))).chunks
        assert join_chunks(got.blobs[0], chunks) == data
        second = await c.create_checkpoint(session_id=session.id, kind="CHECKPOINT_KIND_AUTO")
        listed = c.list_checkpoints(session_id=session.id, page_size=1)
        assert [cp.id async for cp in listed] == [created.checkpoint.id, second.checkpoint.id]
        assert listed.response.head_checkpoint_id == second.checkpoint.id

    run(server, admin_token, body)


def test_async_memory_brief_search_events(server: Server, admin_token: str, project: str) -> None:
    async def body(c: AsyncClient) -> None:
        await c.put_memory(project=project, category="goal", op="MEMORY_OP_REPLACE_SET", items=[{"content": "launch the dirigible"}])
        await c.put_memory(project=project, category="constraint", op="MEMORY_OP_REPLACE_SET", items=[{"content": "no new deps"}, {"content": "py311"}])
        note = await c.put_memory(project=project, category="note", key="k", op="MEMORY_OP_UPSERT", items=[{"content": "n"}])
        entries = c.list_memory(project=project, page_size=1)
        assert sorted([e.content async for e in entries]) == ["launch the dirigible", "n", "no new deps", "py311"]
        assert entries.response.caps["constraint"] == 5
        assert (await c.set_memory_caps(project=project, caps={"constraint": 3})).caps["constraint"] == 3
        assert list((await c.delete_memory(project=project, entry_id=note.entries[0].id)).deleted_ids) == [note.entries[0].id]

        brief = (await c.get_brief(project=project)).brief
        assert "launch the dirigible" in brief.text and "no new deps" in brief.text

        hits = [h async for h in c.search(project=project, query="dirigible")]
        assert len(hits) == 1 and hits[0].kind == 1

        events = c.list_events(project=project, page_size=2)
        assert [e.revision async for e in events] == [1, 2, 3, 4, 5]
        assert [e.kind async for e in c.list_events(project=project, after_revision=4)] == [model_pb2.EVENT_KIND_MEMORY_CHANGED]

        # A stale write over the goal: OVERWRITTEN, recorded as a conflict.
        over = await c.put_memory(
            project=project, category="goal", op="MEMORY_OP_REPLACE_SET", items=[{"content": "other"}], write={"base_revision": 0}
        )
        assert over.result.outcome == model_pb2.WRITE_OUTCOME_OVERWRITTEN
        conflicts = [x async for x in c.list_conflicts(project=project)]
        assert [x.record for x in conflicts] == ["memory/goal"]

    run(server, admin_token, body)


def test_async_admin_and_errors(server: Server, admin_token: str, project: str) -> None:
    async def body(c: AsyncClient) -> None:
        name = f"async-reader-{uuid.uuid4().hex[:8]}"
        created = await c.create_token(name=name, role="reader")
        assert name in [t.name async for t in c.list_tokens()]
        first = await c.put_memory(project=project, category="goal", op="MEMORY_OP_REPLACE_SET", items=[{"content": "a"}])
        await c.put_memory(project=project, category="goal", op="MEMORY_OP_REPLACE_SET", items=[{"content": "b"}])
        stats = await c.get_stats(project=project)
        assert stats.projects[0].head_revision == 2

        with pytest.raises(WriteRejected) as rejected:
            await c.put_memory(
                project=project, category="goal", op="MEMORY_OP_REPLACE_SET", items=[{"content": "c"}],
                write={"base_revision": first.result.revision, "policy": "CONFLICT_POLICY_REJECT"},
            )
        assert rejected.value.code == grpc.StatusCode.ABORTED
        assert rejected.value.rejected is not None and rejected.value.rejected.conflict.current_revision == 2

        with pytest.raises(InvalidArgument) as invalid:
            await c.put_memory(project=project, category="", op="MEMORY_OP_REPLACE_SET")
        assert invalid.value.bad_request is not None
        assert [v.field for v in invalid.value.bad_request.field_violations] == ["category"]

        with pytest.raises(NotFound) as missing:
            await c.get_checkpoint(checkpoint_id=str(uuid.uuid4()))
        assert missing.value.resource_info is not None and missing.value.resource_info.resource_type == "checkpoint"

        async with AsyncClient(settings=Settings(server=server.url, token=created.secret)) as reader:
            assert [e.content async for e in reader.list_memory(project=project)] == ["b"]
            with pytest.raises(PermissionDenied) as denied:
                await reader.put_memory(project=project, category="goal", op="MEMORY_OP_REPLACE_SET")
            assert denied.value.reason == "PERMISSION_DENIED"
        async with AsyncClient(settings=Settings(server=server.url)) as anonymous:
            with pytest.raises(Unauthenticated):
                await anonymous.get_stats()

        compacted = await c.compact_events(project=project, below_revision=2)
        assert compacted.oldest_kept_revision == 2
        with pytest.raises(OutOfRange):  # raised from the iterator
            [e async for e in c.list_events(project=project)]
        assert (await c.prune(project=project, dry_run=True)).dry_run
        assert (await c.purge(project=project, value="nothing-like-this", dry_run=True)).records == 0
        await c.revoke_token(name=name)

    run(server, admin_token, body)
