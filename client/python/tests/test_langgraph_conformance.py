"""LangGraph's own conformance suite (langgraph-checkpoint-conformance) against BatonSaver on
a real server: every capability, through the async methods, then again through the sync
ones (the suite calls only the async methods, so a thin adapter hands them to the sync).
"""

from __future__ import annotations

import asyncio
import uuid
import warnings
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.conformance", reason="the langgraph test extra is not installed")

from langgraph.checkpoint.base import BaseCheckpointSaver  # noqa: E402
from langgraph.checkpoint.conformance import checkpointer_test, validate  # noqa: E402

from baton_client import AsyncClient, Client, Settings  # noqa: E402
from baton_client.langgraph import BatonSaver, ThreadForkWarning  # noqa: E402

#: Every test of langgraph-checkpoint-conformance 0.0.2, by capability.
EXPECTED = {
    "put": 17,
    "put_writes": 10,
    "get_tuple": 10,
    "list": 16,
    "delete_thread": 5,
    "delete_for_runs": 7,
    "copy_thread": 8,
    "prune": 8,
}


class SyncAdapter(BaseCheckpointSaver[str]):
    """The suite's async calls, each answered by the sync method of a BatonSaver."""

    def __init__(self, saver: BatonSaver) -> None:
        super().__init__()
        self.saver = saver

    async def aget_tuple(self, config: Any) -> Any:
        return self.saver.get_tuple(config)

    async def alist(self, config: Any, **kwargs: Any) -> AsyncIterator[Any]:
        for item in self.saver.list(config, **kwargs):
            yield item

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return self.saver.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self.saver.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.saver.delete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Any) -> None:
        self.saver.delete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.saver.copy_thread(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Any, *, strategy: str = "keep_latest") -> None:
        self.saver.prune(thread_ids, strategy=strategy)


def run_suite(server: Any, token: str, sync: bool) -> dict[str, tuple[int, int]]:
    settings = Settings(server=server.url, token=token)

    @checkpointer_test(name=f"BatonSaver-{'sync' if sync else 'async'}-{uuid.uuid4().hex[:6]}")
    async def factory() -> AsyncIterator[BaseCheckpointSaver[str]]:
        # A project per capability: the suite wants an empty store each time (it reuses
        # thread ids such as "thread-0").
        project = f"github.com/pytest/langgraph-{uuid.uuid4().hex}"
        client, aclient = Client(settings=settings), AsyncClient(settings=settings)
        saver = BatonSaver(project, client=client, aclient=aclient)
        yield SyncAdapter(saver) if sync else saver
        client.close()
        await aclient.close()

    with warnings.catch_warnings():
        # The suite puts several roots on one thread: each one after the first forks it.
        warnings.simplefilter("ignore", ThreadForkWarning)
        report = asyncio.run(validate(factory))
    results = {}
    for name, result in report.results.items():
        assert result.detected, f"{name} was not detected"
        assert not result.failures, f"{name}: {result.failures}"
        results[name] = (result.tests_passed, result.tests_failed)
    return results


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
def test_langgraph_conformance(server: Any, backend: str, admin_token: str, sync: bool) -> None:
    results = run_suite(server, admin_token, sync)
    assert results == {name: (n, 0) for name, n in EXPECTED.items()}
    passed = sum(p for p, _ in results.values())
    mode = "sync" if sync else "async"
    print(f"\nlanggraph-checkpoint-conformance {backend} {mode}: {passed} passed {results}")
