"""BatonSessionStore (baton_client.claude) on a real server: the Claude Agent SDK's own
conformance helper with every optional contract, then what the helper does not check:
appends racing from several processes (the summary's revision check and re-fold), an
append retried by the SDK, resuming on another machine, keys that need escaping, the SDK's
store-backed session functions, and bad input."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections import Counter
from typing import Any

import grpc
import pytest

pytest.importorskip("claude_agent_sdk.testing", reason="the claude extra is not installed")

from claude_agent_sdk import (  # noqa: E402
    delete_session_via_store,
    fold_session_summary,
    fork_session_via_store,
    get_session_messages_from_store,
    list_sessions_from_store,
    project_key_for_directory,
    rename_session_via_store,
    tag_session_via_store,
)
from claude_agent_sdk.testing import run_session_store_conformance  # noqa: E402
from claude_agent_sdk.types import SessionKey, SessionStore  # noqa: E402

from baton_client import AsyncClient, InvalidArgument, Settings  # noqa: E402
from baton_client.claude import BatonSessionStore  # noqa: E402

#: The contracts run_session_store_conformance checks (claude-agent-sdk 0.2.189): 6 of
#: append/load, 2 of list_sessions, 1 of list_session_summaries, 3 of delete, 2 of
#: list_subkeys. It makes one store per contract, after one to probe the optional methods.
EXPECTED_CONTRACTS = 14
OPTIONAL = {"list_sessions", "list_session_summaries", "delete", "list_subkeys"}


class Calls(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Counts an async client's calls by method name, and those refused with ABORTED."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        name = method.rsplit("/", 1)[-1]
        call = await continuation(details, request)
        self.counts[name] += 1
        if await call.code() == grpc.StatusCode.ABORTED:
            self.counts[f"{name}:ABORTED"] += 1
        return call

    def take(self) -> dict[str, int]:
        counts = dict(self.counts)
        self.counts.clear()
        return counts


def settings_of(server: Any, token: str) -> Settings:
    return Settings(server=server.url, token=token)


def key(session_id: str = "sess", subpath: str | None = None, project_key: str = "proj") -> SessionKey:
    k: SessionKey = {"project_key": project_key, "session_id": session_id}
    if subpath is not None:
        k["subpath"] = subpath
    return k


def entry(n: int, **fields: Any) -> Any:
    stamp = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(seconds=n)
    return {"type": "x", "uuid": str(uuid.uuid4()), "timestamp": stamp.isoformat().replace("+00:00", "Z"), **fields}


def summary_of(entries: list[Any], k: SessionKey) -> dict[str, Any]:
    """What the summary must be: the SDK's fold of the whole transcript, in stored order."""
    return dict(fold_session_summary(None, k, entries)["data"])


@pytest.mark.parametrize("isolation", ["project", "prefix"])
def test_claude_session_store_conformance(server: Any, backend: str, admin_token: str, isolation: str) -> None:
    """Every contract, each on a fresh store: its own Baton project (through one shared
    client), or its own key prefix in one project (each store making its own client)."""
    settings = settings_of(server, admin_token)
    shared_project = f"github.com/pytest/claude-{uuid.uuid4().hex}"

    async def run() -> int:
        made: list[BatonSessionStore] = []
        async with AsyncClient(settings=settings) as client:

            def make_store() -> BatonSessionStore:
                if isolation == "project":
                    store = BatonSessionStore(f"github.com/pytest/claude-{uuid.uuid4().hex}", client=client)
                else:
                    store = BatonSessionStore(shared_project, prefix=f"claude-{uuid.uuid4().hex}/", settings=settings)
                made.append(store)
                return store

            await run_session_store_conformance(make_store)
            for store in made:
                await store.aclose()
        return len(made)

    made = asyncio.run(run())
    assert {m for m in OPTIONAL if getattr(BatonSessionStore, m) is not getattr(SessionStore, m)} == OPTIONAL
    contracts = made - 1
    assert contracts == EXPECTED_CONTRACTS
    print(f"\nclaude-agent-sdk session store conformance {backend} {isolation}: {contracts} contracts passed")


def test_concurrent_appends_keep_every_entry_and_a_true_summary(server: Any, admin_token: str, project: str) -> None:
    """Three processes (a client each), three tasks in each, appending to one session at
    once: every entry is kept, each task's in its order, and the summary is the fold of the
    whole transcript as stored, though the processes' folds raced (refused, folded again)."""
    writers, tasks, appends = 3, 3, 4
    k = key("raced")

    async def scenario() -> None:
        calls = Calls()
        settings = settings_of(server, admin_token)
        stores = [
            BatonSessionStore(project, client=AsyncClient(settings=settings, interceptors=[calls]))
            for _ in range(writers)
        ]
        go = asyncio.Event()

        async def task(w: int, t: int) -> None:
            await go.wait()
            for n in range(appends):
                batch = [
                    entry(n, writer=f"{w}.{t}", step=n, i=0, type="user", message={"content": f"prompt {w}.{t}.{n}"}),
                    entry(n, writer=f"{w}.{t}", step=n, i=1, customTitle=f"title {w}.{t}.{n}", lastPrompt=f"{w}{t}{n}"),
                ]
                await stores[w].append(k, batch)

        running = [asyncio.create_task(task(w, t)) for w in range(writers) for t in range(tasks)]
        await asyncio.sleep(0.05)
        go.set()
        await asyncio.gather(*running)

        loaded: Any = await stores[0].load(k)
        assert loaded is not None and len(loaded) == writers * tasks * appends * 2
        assert len({e["uuid"] for e in loaded}) == len(loaded)
        for w in range(writers):
            for t in range(tasks):
                mine = [(e["step"], e["i"]) for e in loaded if e["writer"] == f"{w}.{t}"]
                assert mine == [(n, i) for n in range(appends) for i in range(2)]
        summaries = await stores[1].list_session_summaries("proj")
        assert [s["session_id"] for s in summaries] == ["raced"]
        assert summaries[0]["data"] == summary_of(loaded, k)
        counts = calls.take()
        # Every process's first append read no summary: all but the first were refused.
        assert counts.get("AppendItems:ABORTED", 0) >= writers - 1, counts
        assert counts["AppendItems"] == writers * tasks * appends + counts["AppendItems:ABORTED"], counts
        # A refusal carries the summary that stays: folded again without reading it (the
        # one ReadItems is the load above).
        assert counts["ReadItems"] == 1, counts
        for store in stores:
            await store.client.close()

    asyncio.run(scenario())


def test_a_retried_append_adds_nothing(server: Any, admin_token: str, project: str) -> None:
    """The SDK appends a batch again when it does not know whether it landed: entries with a
    uuid are stored once (by this process or another), entries without one again."""

    async def scenario() -> None:
        settings = settings_of(server, admin_token)
        async with AsyncClient(settings=settings) as client, AsyncClient(settings=settings) as other:
            store, elsewhere = BatonSessionStore(project, client=client), BatonSessionStore(project, client=other)
            k = key("retried")
            batch = [
                entry(0, type="user", message={"content": "hello"}),
                entry(1, customTitle="t"),
                entry(2, lastPrompt="p"),
            ]
            await store.append(k, batch)
            await store.append(k, batch)
            await elsewhere.append(k, batch[1:])
            assert await store.load(k) == batch
            log = (await client.read_items(project=project, key=store.log_key(k), last=0).by_page().__anext__()).log
            assert (log.items, log.last_seq) == (3, 3)
            no_uuid: Any = {"type": "tag", "tag": "wip"}
            await store.append(k, [no_uuid])
            await elsewhere.append(k, [no_uuid])
            loaded = await store.load(k)
            assert loaded == [*batch, no_uuid, no_uuid]
            [summary] = await elsewhere.list_session_summaries("proj")
            assert summary["data"] == summary_of(loaded, k)
            assert summary["data"]["first_prompt"] == "hello" and summary["data"]["tag"] == "wip"
            # The same batch to a subagent transcript: stored once there too, apart.
            sub = key("retried", "subagents/agent-1")
            await store.append(sub, batch)
            await elsewhere.append(sub, batch)
            assert await elsewhere.load(sub) == batch

    asyncio.run(scenario())


def test_resuming_on_another_machine(server: Any, admin_token: str, project: str) -> None:
    """What one machine stored, another (a store of its own, its own client and event loop)
    reads whole; both keep appending, and the summary stays the fold of everything."""
    options = {"server": server.url, "token": admin_token}
    main, sub = key("shared"), key("shared", "subagents/agent-a")
    first = [entry(0, type="user", message={"content": "start here"}), entry(1, cwd="/repo", gitBranch="main")]
    sub_entries = [entry(2, isSidechain=True, agentId="a")]
    machine_a = BatonSessionStore(project, **options)

    async def on_a() -> None:
        await machine_a.append(main, first)
        await machine_a.append(sub, sub_entries)

    async def on_b() -> list[Any]:
        async with BatonSessionStore(project, **options) as machine_b:
            assert await machine_b.load(main) == first
            assert await machine_b.list_subkeys({"project_key": "proj", "session_id": "shared"}) == [
                "subagents/agent-a"
            ]
            assert await machine_b.load(sub) == sub_entries
            assert [s["session_id"] for s in await machine_b.list_sessions("proj")] == ["shared"]
            await machine_b.append(main, [entry(3, customTitle="from b", lastPrompt="b's turn")])
            loaded = await machine_b.load(main)
            assert loaded is not None
            return loaded

    async def on_a_again() -> None:
        # A's idea of the summary is now stale: its append is refused once and folded again.
        await machine_a.append(main, [entry(4, lastPrompt="a's turn")])
        loaded = await machine_a.load(main)
        assert loaded is not None and len(loaded) == 4
        [summary] = await machine_a.list_session_summaries("proj")
        assert summary["data"] == summary_of(loaded, main)
        assert summary["data"]["custom_title"] == "from b" and summary["data"]["last_prompt"] == "a's turn"
        assert summary["data"]["first_prompt"] == "start here" and summary["data"]["git_branch"] == "main"
        await machine_a.aclose()

    asyncio.run(on_a())
    assert len(asyncio.run(on_b())) == 3
    asyncio.run(on_a_again())  # a new event loop: the store makes its client again


def test_a_session_deleted_elsewhere_starts_over(server: Any, admin_token: str, project: str) -> None:
    """A process whose idea of the summary is of a session another deleted: its next append
    is refused once (the summary it read is gone), then folds from nothing."""

    async def scenario() -> None:
        settings = settings_of(server, admin_token)
        async with AsyncClient(settings=settings) as client, AsyncClient(settings=settings) as other:
            store, elsewhere = BatonSessionStore(project, client=client), BatonSessionStore(project, client=other)
            k = key("deleted")
            await store.append(k, [entry(0, type="user", message={"content": "old prompt"}, customTitle="old")])
            await store.append(key("deleted", "subagents/agent-1"), [entry(1)])
            await elsewhere.delete(k)
            assert await store.load(k) is None and await store.list_subkeys(k) == []
            fresh = [entry(2, type="user", message={"content": "new prompt"})]
            await store.append(k, fresh)
            assert await elsewhere.load(k) == fresh
            [summary] = await elsewhere.list_session_summaries("proj")
            assert summary["data"] == summary_of(fresh, k) and "custom_title" not in summary["data"]

    asyncio.run(scenario())


def test_keys_are_escaped_and_isolated(server: Any, admin_token: str, project: str) -> None:
    """Project keys and session ids with "/" and "%" (and unicode) map to distinct logs and
    list back as given; a project key that is a prefix of another sees only its own."""

    async def scenario() -> None:
        async with AsyncClient(settings=settings_of(server, admin_token)) as client:
            store = BatonSessionStore(project, client=client)
            pk = "-home/me%2F/app"
            ids = ["a/b", "a%2Fb", "a", "ü ñ 漢字", "x%", "tab\there"]
            for n, sid in enumerate(ids):
                await store.append(key(sid, project_key=pk), [entry(n, sid=sid)])
            await store.append(key("a/b", "subagents/workflows/run-1/agent-x", pk), [entry(9)])
            await store.append(key("other", project_key="-home/me"), [entry(0)])
            assert sorted(s["session_id"] for s in await store.list_sessions(pk)) == sorted(ids)
            for sid in ids:
                loaded: Any = await store.load(key(sid, project_key=pk))
                assert loaded is not None and [e["sid"] for e in loaded] == [sid]
            assert await store.list_subkeys({"project_key": pk, "session_id": "a/b"}) == [
                "subagents/workflows/run-1/agent-x"
            ]
            assert await store.list_subkeys({"project_key": pk, "session_id": "a"}) == []
            assert [s["session_id"] for s in await store.list_sessions("-home/me")] == ["other"]
            assert sorted(s["session_id"] for s in await store.list_session_summaries(pk)) == sorted(ids)
            await store.delete(key("a", project_key=pk))
            assert await store.load(key("a/b", project_key=pk)) is not None
            assert await store.load(key("a", project_key=pk)) is None

    asyncio.run(scenario())


def test_the_sdk_session_functions_on_the_store(server: Any, admin_token: str, project: str, tmp_path: Any) -> None:
    """The SDK's store-backed functions: listing (from the summaries alone: one listing of
    summaries and one of sessions, no transcript read), messages, rename, tag, fork, delete."""
    directory = str(tmp_path)
    pk = project_key_for_directory(directory)
    sid = str(uuid.uuid4())

    def message(n: int, kind: str, parent: str | None, text: str) -> Any:
        return entry(
            n,
            type=kind,
            parentUuid=parent,
            sessionId=sid,
            cwd=directory,
            isSidechain=False,
            message={"role": kind, "content": text if kind == "user" else [{"type": "text", "text": text}]},
        )

    transcript: list[Any] = []
    for n, (kind, text) in enumerate(
        [("user", "What is Baton?"), ("assistant", "A session hub."), ("user", "Thanks"), ("assistant", "Welcome")]
    ):
        transcript.append(message(n, kind, transcript[-1]["uuid"] if transcript else None, text))

    async def scenario() -> None:
        calls = Calls()
        async with AsyncClient(settings=settings_of(server, admin_token), interceptors=[calls]) as client:
            store = BatonSessionStore(project, client=client)
            await store.append({"project_key": pk, "session_id": sid}, transcript[:2])
            await store.append({"project_key": pk, "session_id": sid}, transcript[2:])
            calls.take()
            [info] = await list_sessions_from_store(store, directory=directory)
            assert (info.session_id, info.summary, info.first_prompt) == (sid, "What is Baton?", "What is Baton?")
            assert info.cwd == directory and info.created_at is not None
            assert calls.take() == {"ListItemLogs": 2}
            messages = await get_session_messages_from_store(store, sid, directory=directory)
            assert [(m.type, m.uuid) for m in messages] == [(e["type"], e["uuid"]) for e in transcript]
            await rename_session_via_store(store, sid, "Baton questions", directory=directory)
            await tag_session_via_store(store, sid, "docs", directory=directory)
            [info] = await list_sessions_from_store(store, directory=directory)
            assert (info.custom_title, info.summary, info.tag) == ("Baton questions", "Baton questions", "docs")
            fork = await fork_session_via_store(store, sid, directory=directory, title="forked")
            infos = {i.session_id: i for i in await list_sessions_from_store(store, directory=directory)}
            assert set(infos) == {sid, fork.session_id}
            forked = await get_session_messages_from_store(store, fork.session_id, directory=directory)
            assert [m.message for m in forked] == [m.message for m in messages]
            await delete_session_via_store(store, sid, directory=directory)
            assert [i.session_id for i in await list_sessions_from_store(store, directory=directory)] == [
                fork.session_id
            ]
            assert await store.load({"project_key": pk, "session_id": sid}) is None

    asyncio.run(scenario())


def test_a_summary_too_large_to_keep(server: Any, admin_token: str, project: str, tmp_path: Any) -> None:
    """A fold over the server's 64 KiB summary limit is not stored: the log is marked, the
    summaries leave it out, and the SDK lists it from its transcript instead."""
    directory = str(tmp_path)
    pk = project_key_for_directory(directory)
    sid = str(uuid.uuid4())
    k = key(sid, project_key=pk)

    async def scenario() -> None:
        async with AsyncClient(settings=settings_of(server, admin_token)) as client:
            store = BatonSessionStore(project, client=client)
            await store.append(k, [entry(0, type="user", sessionId=sid, message={"content": "short prompt"})])
            assert len(await store.list_session_summaries(pk)) == 1
            await store.append(k, [entry(1, lastPrompt="x" * 70_000)])
            await store.append(k, [entry(2, customTitle="after")])
            assert await store.list_session_summaries(pk) == []
            # Another process leaves the marked summary alone too.
            await BatonSessionStore(project, client=client).append(k, [entry(3, customTitle="later")])
            assert await store.list_session_summaries(pk) == []
            loaded = await store.load(k)
            assert loaded is not None and len(loaded) == 4
            [info] = await list_sessions_from_store(store, directory=directory)
            assert info.session_id == sid and info.custom_title == "later"

    asyncio.run(scenario())


def test_bad_input_is_refused_before_anything_is_stored(server: Any, admin_token: str, project: str) -> None:
    with pytest.raises(ValueError, match="project"):
        BatonSessionStore("")
    with pytest.raises(TypeError, match="not both"):
        BatonSessionStore(project, client=object(), server="http://x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="AsyncClient"):
        BatonSessionStore(project, client=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="colour"):
        BatonSessionStore(project, colour="blue")

    async def scenario() -> None:
        async with AsyncClient(settings=settings_of(server, admin_token)) as client:
            store = BatonSessionStore(project, client=client)
            k = key("bad")
            with pytest.raises(TypeError, match=r"entry 1 is not JSON-serializable.*datetime"):
                await store.append(k, [entry(0), entry(1, when=datetime.datetime.now())])
            with pytest.raises(TypeError, match="entry 0 is a str, not a JSON object"):
                await store.append(k, ["a line"])  # type: ignore[list-item]
            circular: Any = entry(2)
            circular["self"] = circular
            with pytest.raises(ValueError, match="entry 0 is not JSON-serializable"):
                await store.append(k, [circular])
            assert await store.load(k) is None
            assert await store.list_sessions("proj") == []
            # What only the server can tell: a key it refuses (a control character).
            with pytest.raises(InvalidArgument, match="control characters"):
                await store.append(key("bad", "subagents/line\nbreak"), [entry(3)])
            assert await store.load(k) is None

    asyncio.run(scenario())
