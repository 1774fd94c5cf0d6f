"""Retries: reads on UNAVAILABLE; writes only with their idempotency key, answered by the
server's stored reply (``result.replayed``); never the admin calls that change things."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import grpc.aio
import pytest

from baton_client import AsyncClient, Client, RetryPolicy, Settings, Unavailable
from baton_client.pb import model_pb2

from conftest import Server

FAST = RetryPolicy(attempts=4, initial_backoff=0.01, max_backoff=0.05)


class SimulatedUnavailable(grpc.RpcError):
    """What a lost reply looks like to the caller."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "simulated: connection lost before the reply"

    def trailing_metadata(self) -> tuple[()]:
        return ()


class Flaky(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Fails the first ``failures`` calls of a method with UNAVAILABLE: after the server
    answered (``deliver=True``: the reply is lost) or before sending (``deliver=False``)."""

    def __init__(self, method: str, failures: int = 1, deliver: bool = True) -> None:
        self.method = method
        self.failures = failures
        self.deliver = deliver
        self.requests: list[Any] = []

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        if not details.method.endswith("/" + self.method):
            return continuation(details, request)
        self.requests.append(request)
        if len(self.requests) > self.failures:
            return continuation(details, request)
        if self.deliver:
            continuation(details, request).result()  # the server applied it...
        raise SimulatedUnavailable()  # ...but the caller never saw the reply


class AsyncFlaky(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self, method: str, failures: int = 1, deliver: bool = True) -> None:
        self.method = method
        self.failures = failures
        self.deliver = deliver
        self.requests: list[Any] = []

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        name = details.method.decode() if isinstance(details.method, bytes) else details.method
        if not name.endswith("/" + self.method):
            return await continuation(details, request)
        self.requests.append(request)
        if len(self.requests) > self.failures:
            return await continuation(details, request)
        if self.deliver:
            await (await continuation(details, request))
        raise grpc.aio.AioRpcError(
            grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), details="simulated: reply lost"
        )


def memory_events(client: Client, project: str) -> list[model_pb2.Event]:
    return [e for e in client.list_events(project=project) if e.kind == model_pb2.EVENT_KIND_MEMORY_CHANGED]


def test_a_write_whose_reply_was_lost_is_retried_and_replayed(
    server: Server, admin: Client, admin_token: str, project: str
) -> None:
    flaky = Flaky("PutMemory")
    with server.client(admin_token, interceptors=[flaky], retry=FAST) as client:
        reply = client.put_memory(
            project=project, category="goal", op="MEMORY_OP_REPLACE_SET", items=[{"content": "exactly once"}]
        )
    assert len(flaky.requests) == 2
    first, second = flaky.requests
    assert first.write.request_id and first.write.request_id == second.write.request_id
    assert first == second
    assert reply.result.replayed  # the server's stored reply to the first attempt
    assert [e.revision for e in memory_events(admin, project)] == [reply.result.revision]  # applied once
    assert [e.content for e in admin.list_memory(project=project)] == ["exactly once"]


def test_async_a_write_whose_reply_was_lost_is_retried_and_replayed(
    server: Server, admin: Client, admin_token: str, project: str
) -> None:
    flaky = AsyncFlaky("StartSession", failures=2)

    async def main() -> Any:
        async with AsyncClient(
            settings=Settings(server=server.url, token=admin_token), interceptors=[flaky], retry=FAST
        ) as client:
            return await client.start_session(project=project, agent=model_pb2.AGENT_KIND_CUSTOM, goal="once")

    reply = asyncio.run(main())
    assert len(flaky.requests) == 3
    assert len({r.write.request_id for r in flaky.requests}) == 1
    assert reply.result.replayed
    assert [s.id for s in admin.list_sessions(project=project)] == [reply.session.id]
    assert [e.revision for e in admin.list_events(project=project)] == [1]


def test_a_read_is_retried(server: Server, admin: Client, admin_token: str, project: str) -> None:
    session = admin.start_session(project=project, agent=model_pb2.AGENT_KIND_CUSTOM).session
    flaky = Flaky("GetSession", failures=2, deliver=False)
    with server.client(admin_token, interceptors=[flaky], retry=FAST) as client:
        assert client.get_session(session_id=session.id).session.id == session.id
    assert len(flaky.requests) == 3


def test_retries_stop_after_the_policy_attempts(server: Server, admin_token: str, project: str) -> None:
    flaky = Flaky("ListSessions", failures=10, deliver=False)
    with server.client(admin_token, interceptors=[flaky], retry=FAST) as client:
        with pytest.raises(Unavailable) as raised:
            client.list_sessions(project=project).to_list()
    assert len(flaky.requests) == FAST.attempts
    assert raised.value.message.startswith("simulated")


def test_admin_changes_are_never_retried(server: Server, admin: Client, admin_token: str) -> None:
    flaky = Flaky("CreateToken", failures=1, deliver=True)
    name = f"once-{id(flaky)}"
    with server.client(admin_token, interceptors=[flaky], retry=FAST) as client:
        with pytest.raises(Unavailable):
            client.create_token(name=name, role="reader")
    assert len(flaky.requests) == 1
    assert name in {t.name for t in admin.list_tokens()}  # the lost reply was applied once


def test_async_a_read_is_retried_and_a_failure_raised(server: Server, admin_token: str, project: str) -> None:
    flaky = AsyncFlaky("GetBrief", failures=1, deliver=False)
    hopeless = AsyncFlaky("GetStats", failures=10, deliver=False)

    async def main() -> None:
        async with AsyncClient(
            settings=Settings(server=server.url, token=admin_token), interceptors=[flaky, hopeless], retry=FAST
        ) as client:
            assert (await client.get_brief(project=project)).brief.project == project
            with pytest.raises(Unavailable):
                await client.get_stats(project=project)

    asyncio.run(main())
    assert len(flaky.requests) == 2 and len(hopeless.requests) == FAST.attempts


def test_a_write_is_retried_across_a_server_restart(own_server: Server, project: str) -> None:
    """The real thing: the server is down when the write is sent, and up again later."""
    import threading

    token = str(own_server.admin_token)  # type: ignore[attr-defined]
    with own_server.client(token) as admin:
        admin.start_session(project=project, agent=model_pb2.AGENT_KIND_CUSTOM)
    own_server.stop(kill=True)
    restarter = threading.Timer(0.3, own_server.start)
    restarter.start()
    try:
        slow = RetryPolicy(attempts=30, initial_backoff=0.1, max_backoff=0.3)
        with own_server.client(token, retry=slow) as client:
            reply = client.put_memory(project=project, category="goal", op="MEMORY_OP_REPLACE_SET", items=[{"content": "x"}])
    finally:
        restarter.join()
    assert reply.result.revision == 2 and not reply.result.replayed
