"""The OpenAI Agents SDK's session memory on Baton: :class:`BatonSession`.

>>> from agents import Agent, Runner
>>> from baton_client.openai import BatonSession
>>> session = BatonSession("user-42", project="acme/support-bot")    # doctest: +SKIP
>>> result = await Runner.run(agent, "Hello", session=session)         # doctest: +SKIP

A session is an item log (ItemLogService) of the Baton project, keyed
``{prefix}{session_id}``: each conversation item one JSON item, in order. Every method is
one call to the hub (reads paged): ``pop_item`` removes the newest item in one write, so of
two processes popping the same session each gets a different item; ``add_items`` and
``clear_session`` are writes with an idempotency key, retried safely when the hub is briefly
unreachable.

Needs the ``openai`` extra: ``pip install "baton-client[openai]"``.
"""

from __future__ import annotations

import json
from typing import Any

from agents.items import TResponseInputItem
from agents.memory import SessionSettings
from agents.memory.session_settings import coerce_session_settings

from baton_client._aio import AsyncClient
from baton_client._lazy import LazyAsyncClient
from baton_client._proto.baton.v1 import items_pb2

__all__ = ["BatonSession"]

CONTENT_TYPE = "application/json"
#: One AppendItems carries at most this many items and (about) bytes of values; more are
#: sent in several (each one write).
APPEND_ITEMS = 1000
APPEND_BYTES = 4 * 1024 * 1024
_MAX_LAST = 2**32 - 1


def _dumps(item: Any) -> bytes:
    text = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: kept as \\u escapes
        return json.dumps(item, separators=(",", ":")).encode("ascii")


class BatonSession:
    """An OpenAI Agents SDK session (the ``agents.memory.Session`` protocol) on a Baton hub.

    ``session_id`` names the conversation; ``project`` is the Baton project it lives in (a
    token scoped to it that may write is enough); ``prefix`` starts the log's key, so other
    users of item logs can share the project. ``session_settings`` (``limit``) is used by
    ``get_items`` without a limit, as the SDK's own sessions do. ``client`` is an
    :class:`~baton_client.AsyncClient` to use (yours to close; one can serve many sessions);
    without one the session makes its own from ``client_options`` (``server``, ``token``,
    ``ca_cert``, ``settings``, ...) or else the ``baton`` CLI's configuration, and
    :meth:`aclose` closes it.
    """

    session_id: str
    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        project: str,
        *,
        client: AsyncClient | None = None,
        prefix: str = "openai/",
        session_settings: SessionSettings | dict[str, Any] | None = None,
        **client_options: Any,
    ) -> None:
        if not session_id:
            raise ValueError("session_id: name the conversation")
        if not project:
            raise ValueError("project: name the Baton project the sessions live in, e.g. 'acme/support-bot'")
        self.session_id = session_id
        self.project = project
        self.prefix = prefix
        self.session_settings = (
            coerce_session_settings(session_settings) if session_settings is not None else SessionSettings()
        )
        self._clients = LazyAsyncClient("BatonSession", client, client_options)

    def __repr__(self) -> str:
        return f"BatonSession({self.session_id!r}, project={self.project!r}, prefix={self.prefix!r})"

    @property
    def key(self) -> str:
        """The item log the session is stored in."""
        return self.prefix + self.session_id

    @property
    def client(self) -> AsyncClient:
        """The client calls go through (made now if the session makes its own)."""
        return self._clients.get()

    async def aclose(self) -> None:
        """Closes the client this session made (not one it was given)."""
        await self._clients.aclose()

    async def __aenter__(self) -> BatonSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the Session protocol ----------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The conversation, oldest first: all of it, or its latest ``limit`` items (when
        ``limit`` is None: ``session_settings.limit``; 0: none)."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        if limit == 0:
            return []
        fields: dict[str, Any] = {"project": self.project, "key": self.key}
        if limit is not None and 0 < limit <= _MAX_LAST:
            fields["last"] = limit
        items: list[TResponseInputItem] = []
        async for item in self._clients.get().read_items(**fields):
            items.append(self._decode(item.value, item.seq))
        return items

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Appends items to the conversation, in order."""
        if not items:
            return
        new = []
        for i, item in enumerate(items):
            try:
                value = _dumps(item)
            except TypeError as e:
                raise TypeError(f"BatonSession.add_items({self.key!r}): item {i} is not JSON-serializable: {e}") from e
            except ValueError as e:
                raise ValueError(f"BatonSession.add_items({self.key!r}): item {i} is not JSON-serializable: {e}") from e
            new.append(items_pb2.NewItem(content_type=CONTENT_TYPE, value=value))
        client = self._clients.get()
        start, size = 0, 0
        for i, item_pb in enumerate(new):
            if i > start and (i - start >= APPEND_ITEMS or size + len(item_pb.value) > APPEND_BYTES):
                await client.append_items(project=self.project, key=self.key, items=new[start:i])
                start, size = i, 0
            size += len(item_pb.value)
        await client.append_items(project=self.project, key=self.key, items=new[start:])

    async def pop_item(self) -> TResponseInputItem | None:
        """Removes and returns the newest item; None when the session is empty."""
        reply = await self._clients.get().pop_item(project=self.project, key=self.key)
        if not reply.HasField("item"):
            return None
        return self._decode(reply.item.value, reply.item.seq)

    async def clear_session(self) -> None:
        """Deletes every item of the session."""
        await self._clients.get().delete_item_logs(project=self.project, keys=[self.key])

    def _decode(self, value: bytes, seq: int) -> TResponseInputItem:
        try:
            item: TResponseInputItem = json.loads(value)
        except ValueError as e:
            raise ValueError(f"BatonSession({self.key!r}): item {seq} is not JSON: {e}") from e
        return item
