"""BatonSession (baton_client.openai) on a real server, by the OpenAI Agents SDK's documented
Session behaviour: the latest ``limit`` items oldest first (``session_settings.limit`` when
none is given), ``pop_item`` of the newest (None when empty, each item to one of two racing
processes), clearing, isolation, items kept exactly; then a real ``Runner.run`` with a fake
model keeping its conversation in Baton."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from typing import Any

import grpc
import pytest

pytest.importorskip("agents.memory", reason="the openai extra is not installed")

from agents import Agent, RunConfig, Runner, Usage  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.memory import Session, SessionSettings  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from openai.types.responses import ResponseOutputMessage, ResponseOutputText  # noqa: E402

from baton_client import AsyncClient, Settings  # noqa: E402
from baton_client.openai import BatonSession  # noqa: E402


class Calls(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Counts an async client's calls by method name."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        self.counts[method.rsplit("/", 1)[-1]] += 1
        return await continuation(details, request)

    def take(self) -> dict[str, int]:
        counts = dict(self.counts)
        self.counts.clear()
        return counts


def settings_of(server: Any, token: str) -> Settings:
    return Settings(server=server.url, token=token)


def msg(n: int, role: str = "user") -> Any:
    return {"role": role, "content": f"message {n}"}


def test_it_is_an_agents_session(project: str) -> None:
    session: Session = BatonSession("conv", project, server="http://127.0.0.1:1")
    assert isinstance(session, Session)
    assert session.session_id == "conv" and session.session_settings == SessionSettings()
    with pytest.raises(ValueError, match="session_id"):
        BatonSession("", project)
    with pytest.raises(ValueError, match="project"):
        BatonSession("conv", "")


def test_limits(server: Any, admin_token: str, project: str) -> None:
    """``limit``: the latest N oldest first; 0: none; None: ``session_settings.limit`` (or
    all); across pages, and an add of more items than one append carries."""

    async def scenario() -> None:
        calls = Calls()
        async with AsyncClient(settings=settings_of(server, admin_token), interceptors=[calls]) as client:
            session = BatonSession("limits", project, client=client)
            items = [msg(n) for n in range(5)]
            await session.add_items(items)
            assert await session.get_items() == items
            assert await session.get_items(limit=2) == items[3:]
            assert await session.get_items(limit=0) == []
            assert await session.get_items(limit=50) == items
            limited = BatonSession("limits", project, client=client, session_settings=SessionSettings(limit=3))
            assert await limited.get_items() == items[2:]
            assert await limited.get_items(limit=1) == items[4:]
            as_dict = BatonSession("limits", project, client=client, session_settings={"limit": 4})
            assert await as_dict.get_items() == items[1:]
            assert await BatonSession("never-written", project, client=client).get_items() == []

            calls.take()
            many = [msg(n) for n in range(2500)]
            big = BatonSession("many", project, client=client)
            await big.add_items(many)
            assert calls.take() == {"AppendItems": 3}
            assert await big.get_items() == many
            assert calls.take() == {"ReadItems": 3}
            assert await big.get_items(limit=1500) == many[1000:]
            await big.add_items([])
            assert calls.take() == {"ReadItems": 2}

    asyncio.run(scenario())


def test_pop_item(server: Any, admin_token: str, project: str) -> None:
    """The newest item each time, then None; a never-written session pops None, as does one
    cleared; concurrent pops in one process each get a different item."""

    async def scenario() -> None:
        async with AsyncClient(settings=settings_of(server, admin_token)) as client:
            assert await BatonSession("empty", project, client=client).pop_item() is None
            session = BatonSession("pops", project, client=client)
            await session.add_items([msg(0), msg(1, "assistant")])
            assert await session.pop_item() == msg(1, "assistant")
            assert await session.get_items() == [msg(0)]
            assert await session.pop_item() == msg(0)
            assert await session.pop_item() is None
            await session.add_items([msg(n) for n in range(40)])
            popped = await asyncio.gather(*(session.pop_item() for _ in range(45)))
            got: list[Any] = [p for p in popped if p is not None]
            assert sorted(p["content"] for p in got) == sorted(f"message {n}" for n in range(40))
            assert popped.count(None) == 5

    asyncio.run(scenario())


POPPER = r"""
import asyncio, json, sys
from baton_client import AsyncClient, Settings
from baton_client.openai import BatonSession

async def main(server, token, project, session_id):
    async with AsyncClient(settings=Settings(server=server, token=token)) as client:
        session = BatonSession(session_id, project, client=client)
        print("ready", flush=True)
        sys.stdin.readline()
        popped = []
        while (item := await session.pop_item()) is not None:
            popped.append(item)
    print(json.dumps(popped), flush=True)

asyncio.run(main(*sys.argv[1:5]))
"""


def test_two_processes_pop_distinct_items(server: Any, admin_token: str, project: str) -> None:
    """Two processes (each its own client) pop one session to the end at once: each item
    goes to exactly one of them, newest first in each."""
    items = [msg(n) for n in range(300)]

    async def fill() -> None:
        async with AsyncClient(settings=settings_of(server, admin_token)) as client:
            await BatonSession("raced", project, client=client).add_items(items)

    asyncio.run(fill())
    args = [sys.executable, "-c", POPPER, server.url, admin_token, project, "raced"]
    procs = [subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [p.communicate(timeout=120)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0]
    popped = [json.loads(out.strip().splitlines()[-1]) for out in outs]
    indexes = [[items.index(item) for item in mine] for mine in popped]
    assert all(mine for mine in indexes), [len(m) for m in indexes]
    assert sorted(indexes[0] + indexes[1]) == list(range(len(items)))
    for mine in indexes:
        assert mine == sorted(mine, reverse=True)
    print(f"\ntwo processes popped {len(indexes[0])} + {len(indexes[1])} of {len(items)} items")


def test_clear_and_isolation(server: Any, admin_token: str, project: str) -> None:
    """Sessions apart by id, by prefix and by project; clearing one leaves the others."""
    other_project = project + "-other"

    async def scenario() -> None:
        async with AsyncClient(settings=settings_of(server, admin_token)) as client:
            a = BatonSession("a", project, client=client)
            b = BatonSession("b", project, client=client)
            a_prefixed = BatonSession("a", project, client=client, prefix="elsewhere/")
            a_other = BatonSession("a", other_project, client=client)
            for n, session in enumerate([a, b, a_prefixed, a_other]):
                await session.add_items([msg(n), msg(n, "assistant")])
            await a.clear_session()
            assert await a.get_items() == []
            assert await a.pop_item() is None
            for n, session in enumerate([b, a_prefixed, a_other], start=1):
                assert await session.get_items() == [msg(n), msg(n, "assistant")]
            await a.clear_session()  # nothing left: still fine
            await a.add_items([msg(9)])
            assert await a.get_items() == [msg(9)]

    asyncio.run(scenario())


def test_items_round_trip_exactly(server: Any, admin_token: str, project: str) -> None:
    item: Any = {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": {
            "nested": {"list": [1, 2.5, -3, 10**20, True, False, None, "", [], {}]},
            "unicode": "héllo wörld — 漢字 — 🚀 — \u2028 — \x00 — \\ \" '",
        },
        "z": 1,
        "a": 2,
    }

    async def scenario() -> None:
        async with AsyncClient(settings=settings_of(server, admin_token)) as client:
            session = BatonSession("exact", project, client=client)
            await session.add_items([item, msg(1)])
            got = await session.get_items()
            assert got == [item, msg(1)]
            assert list(got[0]) == list(item)  # key order too
            assert json.dumps(got[0]) == json.dumps(item)
            with pytest.raises(TypeError, match=r"item 1 is not JSON-serializable.*set"):
                bad: Any = {"role": "user", "content": {1, 2}}
                await session.add_items([msg(2), bad])
            assert await session.get_items() == [item, msg(1)]

    asyncio.run(scenario())


class FakeModel(Model):
    """A model that answers "reply N" to its N-th request, keeping every input it got."""

    def __init__(self) -> None:
        self.inputs: list[list[Any]] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        self.inputs.append([{"content": input, "role": "user"}] if isinstance(input, str) else list(input))
        n = len(self.inputs)
        text = ResponseOutputText(type="output_text", text=f"reply {n}", annotations=[])
        out = ResponseOutputMessage(id=f"msg_{n}", type="message", role="assistant", status="completed", content=[text])
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def test_a_runner_keeps_its_conversation_in_baton(server: Any, admin_token: str, project: str) -> None:
    """Runner.run with a BatonSession: the turns are stored, and the next run's model input
    starts with them; another session object on the same log (another process: a sync run
    with a client of its own) sees the whole conversation."""
    model = FakeModel()
    agent = Agent(name="assistant", instructions="Be brief.", model=model)
    config = RunConfig(tracing_disabled=True)

    def reply(n: int) -> dict[str, Any]:
        return {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"reply {n}", "annotations": []}],
        }

    async def scenario() -> None:
        async with AsyncClient(settings=settings_of(server, admin_token)) as client:
            session = BatonSession("run", project, client=client)
            first = await Runner.run(agent, "hello", session=session, run_config=config)
            assert first.final_output == "reply 1"
            stored = await session.get_items()
            assert stored == [{"content": "hello", "role": "user"}, reply(1)]
            second = await Runner.run(agent, "and again", session=session, run_config=config)
            assert second.final_output == "reply 2"
            assert model.inputs[1] == [*stored, {"content": "and again", "role": "user"}]

    asyncio.run(scenario())
    elsewhere = BatonSession("run", project, server=server.url, token=admin_token)
    third = Runner.run_sync(agent, "once more", session=elsewhere, run_config=config)
    assert third.final_output == "reply 3"
    assert model.inputs[2][:4] == [
        {"content": "hello", "role": "user"},
        reply(1),
        {"content": "and again", "role": "user"},
        reply(2),
    ]

    async def check() -> None:
        async with AsyncClient(settings=settings_of(server, admin_token)) as client:
            items: list[Any] = await BatonSession("run", project, client=client).get_items()
            assert [i.get("content") if i.get("role") == "user" else i["id"] for i in items] == [
                "hello",
                "msg_1",
                "and again",
                "msg_2",
                "once more",
                "msg_3",
            ]

    asyncio.run(check())
