"""The sync client against a real server, service by service."""

from __future__ import annotations

import os
import uuid

import grpc
import pytest

from baton_client import (
    AlreadyExists,
    Client,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    Unauthenticated,
    WriteRejected,
    join_chunks,
)
from baton_client.pb import model_pb2, session_pb2

from conftest import Server

CUSTOM = model_pb2.AGENT_KIND_CUSTOM


def start(client: Client, project: str, **fields: object) -> model_pb2.Session:
    return client.start_session(project=project, agent=CUSTOM, host="pytest", **fields).session


# -- sessions -------------------------------------------------------------------------------


def test_session_lifecycle(admin: Client, project: str) -> None:
    started = admin.start_session(
        project=project, agent="AGENT_KIND_CLAUDE_CODE", agent_session_id="conv-1", goal="first goal",
        metadata={"k": "v"}, lease_ttl_ms=0,
    )
    assert started.result.outcome == model_pb2.WRITE_OUTCOME_APPLIED and started.result.revision == 1
    session = started.session
    assert session.project == project and session.status == model_pb2.SESSION_STATUS_ACTIVE

    got = admin.get_session(session_id=session.id)
    assert got.session.goal == "first goal" and got.session.metadata["k"] == "v"

    updated = admin.update_session(session_id=session.id, goal="second goal", write={"base_revision": session.revision})
    assert updated.session.goal == "second goal" and updated.result.outcome == model_pb2.WRITE_OUTCOME_APPLIED

    beat = admin.heartbeat(session_id=session.id, tool_count=7)
    assert beat.status == model_pb2.SESSION_STATUS_ACTIVE
    assert admin.get_session(session_id=session.id).session.tool_count == 7

    ended = admin.end_session(session_id=session.id, summary="done", status="SESSION_STATUS_CRASHED")
    assert ended.session.status == model_pb2.SESSION_STATUS_CRASHED

    resumed = admin.resume_session(project=project, session_id=session.id, agent=CUSTOM, host="other")
    assert resumed.resumed_from.id == session.id
    assert resumed.resumed_from.status == model_pb2.SESSION_STATUS_RESUMED
    assert resumed.session.resumed_from == session.id and resumed.brief.project == project
    # A resumed session is fenced: resuming it again is refused.
    with pytest.raises(FailedPrecondition):
        admin.resume_session(project=project, session_id=session.id, agent=CUSTOM)


def test_a_request_message_or_keyword_fields(admin: Client, project: str) -> None:
    session = start(admin, project)
    request = session_pb2.GetSessionRequest(session_id=session.id)
    assert admin.get_session(request).session.id == session.id
    assert request == session_pb2.GetSessionRequest(session_id=session.id)  # not mutated
    with pytest.raises(TypeError, match="either"):
        admin.get_session(request, session_id=session.id)
    with pytest.raises(TypeError, match="no_such_field"):
        admin.get_session(no_such_field=1)
    with pytest.raises(TypeError, match="GetSessionRequest"):
        admin.get_session(session_pb2.ListSessionsRequest())  # type: ignore[arg-type]


def test_writes_carry_a_request_id_and_a_repeated_id_is_replayed(admin: Client, project: str) -> None:
    request = session_pb2.StartSessionRequest(project=project, agent=CUSTOM, goal="once")
    first = admin.start_session(request)
    assert request.write.request_id == ""  # the caller's message is left alone
    assert not first.result.replayed

    fixed = str(uuid.uuid4())
    a = admin.start_session(project=project, agent=CUSTOM, goal="fixed", write={"request_id": fixed})
    b = admin.start_session(project=project, agent=CUSTOM, goal="fixed", write={"request_id": fixed})
    assert b.result.replayed and b.session.id == a.session.id and b.result.revision == a.result.revision
    assert len(admin.list_sessions(project=project).to_list()) == 2


def test_list_sessions_follows_pages(admin: Client, project: str) -> None:
    ids = [start(admin, project, goal=f"s{i}").id for i in range(7)]
    # One raw page is not everything: paging is needed.
    page = admin.stubs.sessions.ListSessions(
        session_pb2.ListSessionsRequest(project=project, page_size=2), metadata=admin.metadata
    )
    assert len(page.sessions) == 2 and page.next_page_token

    sessions = admin.list_sessions(project=project, page_size=2)
    listed = [s.id for s in sessions]
    assert listed == list(reversed(ids))  # newest first, every page, no duplicate
    assert sessions.response.as_of_revision == 7

    assert [s.id for s in admin.list_sessions(project=project, page_size=2, limit=3)] == listed[:3]
    assert admin.list_sessions(project=project, limit=0).to_list() == []
    assert [s.id for s in admin.list_sessions(project=project, limit=5)] == listed[:5]


# -- checkpoints ----------------------------------------------------------------------------


def test_checkpoints_with_payload_and_chunks(admin: Client, project: str) -> None:
    session = start(admin, project)
    root = admin.create_checkpoint(
        session_id=session.id,
        kind="CHECKPOINT_KIND_MANUAL",
        reason="root",
        state={"phase": "plan", "progress": 10, "active_tasks": [{"id": "t1", "content": "write it"}]},
        payload=b"\x00state\xff",
        payload_content_type="application/octet-stream",
    )
    assert root.result.outcome == model_pb2.WRITE_OUTCOME_APPLIED and root.checkpoint.digest

    # A transcript of 2.5 MiB: three chunks, uploaded once.
    transcript = os.urandom(1024 * 1024) * 2 + b"tail" * (128 * 1024)
    ref = admin.upload_blob(project, transcript, content_type="application/jsonl", agent_session_id="conv")
    assert len(ref.chunks) == 3
    assert admin.missing_chunks(project=project, digests=list(ref.chunks)).missing == []
    again = admin.put_chunks(project=project, chunks=[admin.get_chunks(project=project, digests=[ref.chunks[0]]).chunks[0]])
    assert again.stored == 0  # content-addressed: already there

    child = admin.create_checkpoint(
        session_id=session.id, kind=model_pb2.CHECKPOINT_KIND_AUTO, state={"phase": "build"}, blobs=[ref]
    )
    assert child.checkpoint.parent_id == root.checkpoint.id

    got = admin.get_checkpoint(checkpoint_id=root.checkpoint.id, include_payload=True).checkpoint
    assert got.payload == b"\x00state\xff" and got.state.active_tasks[0].content == "write it"
    without = admin.get_checkpoint(checkpoint_id=root.checkpoint.id).checkpoint
    assert without.payload == b""

    blob = admin.get_checkpoint(checkpoint_id=child.checkpoint.id).checkpoint.blobs[0]
    chunks = admin.get_chunks(project=project, digests=list(blob.chunks)).chunks
    assert join_chunks(blob, chunks) == transcript

    listed = admin.list_checkpoints(session_id=session.id, include_state=True, page_size=1)
    assert [(c.id, c.depth) for c in listed] == [(root.checkpoint.id, 0), (child.checkpoint.id, 1)]
    assert listed.response.head_checkpoint_id == child.checkpoint.id


def test_an_eight_mib_checkpoint_fits_the_channel(admin: Client, project: str) -> None:
    session = start(admin, project)
    payload = os.urandom(8 * 1024 * 1024 - 64 * 1024)
    created = admin.create_checkpoint(session_id=session.id, kind=model_pb2.CHECKPOINT_KIND_MANUAL, payload=payload)
    got = admin.get_checkpoint(checkpoint_id=created.checkpoint.id, include_payload=True)
    assert got.checkpoint.payload == payload


# -- memory, brief, search ------------------------------------------------------------------


def test_memory_brief_and_search(admin: Client, project: str) -> None:
    goal = admin.put_memory(project=project, category="goal", op="MEMORY_OP_REPLACE_SET", items=[{"content": "ship the zeppelin"}])
    assert goal.result.outcome == model_pb2.WRITE_OUTCOME_APPLIED
    loops = admin.put_memory(project=project, category="open_loop", op="MEMORY_OP_ADD_ITEM", items=[{"content": "fix flaky test"}])
    admin.put_memory(
        project=project, category="decision", op="MEMORY_OP_APPEND",
        items=[{"content": "use sqlite", "rationale": "simple"}],
    )
    note = admin.put_memory(project=project, category="note", key="deploy", op="MEMORY_OP_UPSERT", items=[{"content": "via ci"}])

    entries = admin.list_memory(project=project, page_size=1)
    contents = {(e.category, e.content) for e in entries}
    assert contents == {
        ("goal", "ship the zeppelin"),
        ("open_loop", "fix flaky test"),
        ("decision", "use sqlite"),
        ("note", "via ci"),
    }
    assert entries.response.caps["goal"] == 1
    assert entries.response.record_revisions  # per page: the revisions of its records

    caps = admin.set_memory_caps(project=project, caps={"open_loop": 7})
    assert caps.caps["open_loop"] == 7

    deleted = admin.delete_memory(project=project, entry_id=note.entries[0].id)
    assert list(deleted.deleted_ids) == [note.entries[0].id]
    removed = admin.delete_memory(project=project, record={"category": "open_loop"})
    assert list(removed.deleted_ids) == [loops.entries[0].id]
    assert {e.category for e in admin.list_memory(project=project)} == {"goal", "decision"}

    brief = admin.get_brief(project=project, budget_chars=4000).brief
    assert "ship the zeppelin" in brief.text and brief.project == project

    hits = admin.search(project=project, query="zeppelin")
    found = list(hits)
    assert found and found[0].kind == 1 and "zeppelin" in found[0].snippet  # SEARCH_KIND_MEMORY
    assert admin.search(project=project, query="nothingmatchesthis").to_list() == []


# -- events ---------------------------------------------------------------------------------


def test_events_and_conflicts_follow_pages(admin: Client, project: str) -> None:
    session = start(admin, project)
    for i in range(4):
        admin.update_session(session_id=session.id, summary=f"step {i}")
    events = admin.list_events(project=project, page_size=2)
    revisions = [e.revision for e in events]
    assert revisions == [1, 2, 3, 4, 5]
    assert events.response.as_of_revision == 5
    assert [e.revision for e in admin.list_events(project=project, after_revision=3)] == [4, 5]
    assert [e.revision for e in admin.list_events(project=project, limit=2, page_size=1)] == [1, 2]
    kinds = admin.list_events(project=project, kinds=[model_pb2.EVENT_KIND_SESSION_STARTED]).to_list()
    assert [e.kind for e in kinds] == [model_pb2.EVENT_KIND_SESSION_STARTED]

    # Two stale writes (base revision 1, overwritten since): two conflicts.
    for summary in ("late a", "late b"):
        reply = admin.update_session(session_id=session.id, summary=summary, write={"base_revision": 1})
        assert reply.result.outcome == model_pb2.WRITE_OUTCOME_OVERWRITTEN
    conflicts = admin.list_conflicts(project=project, page_size=1).to_list()
    assert len(conflicts) == 2 and all(c.outcome == model_pb2.WRITE_OUTCOME_OVERWRITTEN for c in conflicts)
    assert conflicts[0].record == f"session/{session.id}"


# -- admin ----------------------------------------------------------------------------------


def test_admin_tokens_stats_prune_compact(server: Server, admin: Client, project: str) -> None:
    name = f"reader-{uuid.uuid4().hex[:8]}"
    created = admin.create_token(name=name, role="reader", project=project)
    assert created.secret and created.token.name == name and created.token.role == "reader"
    with pytest.raises(AlreadyExists):
        admin.create_token(name=name, role="reader")
    assert name in {t.name for t in admin.list_tokens()}

    start(admin, project)
    with server.client(created.secret) as reader:
        assert reader.list_sessions(project=project).to_list()
    # Revoked before its first use (the server caches a token it saw in the last 2 s, so
    # revoking one in use takes up to 2 s).
    unused = f"unused-{uuid.uuid4().hex[:8]}"
    secret = admin.create_token(name=unused, role="reader").secret
    admin.revoke_token(name=unused)
    revoked = [t for t in admin.list_tokens() if t.name == unused][0]
    assert revoked.HasField("revoked_at") and not revoked.HasField("last_used_at")
    with server.client(secret) as reader:
        with pytest.raises(Unauthenticated):
            reader.list_sessions(project=project).to_list()

    stats = admin.get_stats(project=project)
    assert [(p.project, p.head_revision, p.sessions["active"]) for p in stats.projects] == [(project, 1, 1)]

    pruned = admin.prune(project=project, keep_days=0, keep_ancestors=0, dry_run=True)
    assert pruned.dry_run

    compacted = admin.compact_events(project=project, below_revision=2)
    assert compacted.oldest_kept_revision == 2 and compacted.removed_events == 1
    with pytest.raises(OutOfRange) as raised:
        admin.list_events(project=project, after_revision=0).to_list()
    assert raised.value.reason == "CURSOR_COMPACTED"

    purged = admin.purge(project=project, value="no-such-secret-value", dry_run=True)
    assert purged.revision == 0


# -- errors ---------------------------------------------------------------------------------


def test_invalid_argument_names_the_field(admin: Client) -> None:
    with pytest.raises(InvalidArgument) as raised:
        admin.start_session(project="", agent=CUSTOM)
    error = raised.value
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT and error.reason == "INVALID_ARGUMENT"
    assert error.error_info is not None and error.error_info.domain == "baton.v1"
    assert error.bad_request is not None
    assert [v.field for v in error.bad_request.field_violations] == ["project"]


def test_not_found_names_the_resource(admin: Client) -> None:
    missing = str(uuid.uuid4())
    with pytest.raises(NotFound) as raised:
        admin.get_session(session_id=missing)
    info = raised.value.resource_info
    assert info is not None and info.resource_type == "session" and info.resource_name == missing
    assert raised.value.reason == "NOT_FOUND"


def test_a_rejected_write_carries_the_current_revision(admin: Client, project: str) -> None:
    first = admin.put_memory(project=project, category="goal", op="MEMORY_OP_REPLACE_SET", items=[{"content": "a"}])
    second = admin.put_memory(project=project, category="goal", op="MEMORY_OP_REPLACE_SET", items=[{"content": "b"}])
    with pytest.raises(WriteRejected) as raised:
        admin.put_memory(
            project=project, category="goal", op="MEMORY_OP_REPLACE_SET", items=[{"content": "c"}],
            write={"base_revision": first.result.revision, "policy": "CONFLICT_POLICY_REJECT"},
        )
    error = raised.value
    assert error.code == grpc.StatusCode.ABORTED and error.reason == "WRITE_REJECTED"
    assert error.rejected is not None
    assert error.rejected.conflict.current_revision == second.result.revision == error.current_revision
    assert error.rejected.conflict.base_revision == first.result.revision
    assert [e.content for e in error.rejected.conflict.current_value.memory_set.entries] == ["b"]
    # Nothing was written.
    assert [e.content for e in admin.list_memory(project=project, category="goal")] == ["b"]


def test_a_reader_token_may_not_write(server: Server, admin: Client, project: str) -> None:
    secret = admin.create_token(name=f"r-{uuid.uuid4().hex[:8]}", role="reader").secret
    with server.client(secret) as reader:
        with pytest.raises(PermissionDenied) as raised:
            reader.put_memory(project=project, category="goal", op="MEMORY_OP_REPLACE_SET", items=[{"content": "x"}])
        assert raised.value.reason == "PERMISSION_DENIED"
        assert raised.value.code == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(PermissionDenied):
            reader.create_token(name="nope", role="admin")


def test_a_token_is_required_once_tokens_exist(server: Server, project: str) -> None:
    with server.client(None) as anonymous:
        with pytest.raises(Unauthenticated) as raised:
            anonymous.get_brief(project=project)
    assert raised.value.reason == "UNAUTHENTICATED"


def test_configuration_from_the_environment_reaches_the_server(
    server: Server, admin_token: str, project: str, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setenv("BATON_HOME", str(tmp_path))
    monkeypatch.setenv("BATON_SERVER", server.address)  # no scheme: http
    monkeypatch.setenv("BATON_TOKEN", admin_token)
    with Client() as client:
        assert client.start_session(project=project, agent=CUSTOM).result.revision == 1
    with Client(token="wrong-token") as client:  # the argument wins over the environment
        with pytest.raises(Unauthenticated):
            client.get_stats(project=project)


def test_watch_request_cursors_as_a_mapping(admin: Client, project: str) -> None:
    start(admin, project)
    with admin.watch(cursors={project: 0}) as watch:
        event = next(watch)
    assert (event.project, event.revision, event.kind) == (project, 1, model_pb2.EVENT_KIND_SESSION_STARTED)
    assert watch.cursors == {project: 1}
