"""The Claude Agent SDK's session store on Baton: :class:`BatonSessionStore`.

>>> from claude_agent_sdk import ClaudeAgentOptions, query
>>> from baton_client.claude import BatonSessionStore
>>> store = BatonSessionStore("acme/support-bot")                          # doctest: +SKIP
>>> options = ClaudeAgentOptions(session_store=store, resume=session_id)   # doctest: +SKIP

Every transcript is an item log (ItemLogService) of the Baton project: the main one under
``{prefix}{project_key}/{session_id}``, a subagent's under
``{prefix}{project_key}/{session_id}/{subpath}`` (``project_key`` and ``session_id`` with
``%``, ``/`` and control characters percent-escaped). Each entry is one JSON item whose item
key is the entry's ``uuid``, so a batch the SDK appends again stores nothing twice.

The session summary the SDK folds (``fold_session_summary``) is the main log's summary,
replaced in the same write as the entries it was folded from and only if no one replaced it
since (its ``summary_revision``, under ``CONFLICT_POLICY_REJECT``): appends racing from
several processes each fold again on the summary another stored, none is lost.
``list_session_summaries`` is one listing, with ``mtime`` the log's ``updated_at``, the same
clock as ``list_sessions``.

Needs the ``claude`` extra: ``pip install "baton-client[claude]"``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from claude_agent_sdk import fold_session_summary
from claude_agent_sdk.types import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStore,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
)
from google.protobuf.timestamp_pb2 import Timestamp

from baton_client._aio import AsyncClient
from baton_client._errors import WriteRejected
from baton_client._lazy import LazyAsyncClient
from baton_client._proto.baton.v1 import items_pb2, model_pb2

__all__ = ["BatonSessionStore"]

CONTENT_TYPE = "application/json"
#: One AppendItems carries at most this many items and (about) bytes of values; a larger
#: batch goes in several, each with the summary folded from its own entries.
APPEND_ITEMS = 1000
APPEND_BYTES = 4 * 1024 * 1024
#: The server's limits: an item key's bytes, a summary's bytes.
MAX_ITEM_KEY = 256
MAX_SUMMARY = 64 * 1024
#: Appends to one session folded again after another writer replaced its summary, at most.
SUMMARY_ATTEMPTS = 16
_SUMMARY_CACHE = 4096

_ESCAPED = re.compile(r"[%/\x00-\x1f\x7f-\x9f]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def escape(part: str) -> str:
    """A key part with ``%``, ``/`` and control characters percent-escaped (UTF-8): no
    two parts escape alike, and none holds the delimiter."""
    return _ESCAPED.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), part)


def unescape(part: str) -> str:
    return unquote(part)


def _ms(ts: Timestamp) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def _dumps(value: Any) -> bytes:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: kept as \\u escapes
        return json.dumps(value, separators=(",", ":")).encode("ascii")


def _item_key(entry: dict[str, Any]) -> str:
    uid = entry.get("uuid")
    if not isinstance(uid, str) or not uid:
        return ""
    if len(uid.encode("utf-8", "surrogatepass")) <= MAX_ITEM_KEY and _CONTROL.search(uid) is None:
        try:
            uid.encode("utf-8")
            return uid
        except UnicodeEncodeError:
            pass
    return "sha256:" + hashlib.sha256(uid.encode("utf-8", "surrogatepass")).hexdigest()


def _encode(where: str, entries: Sequence[Any]) -> list[items_pb2.NewItem]:
    """The entries as items, every one checked before anything is sent."""
    items = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise TypeError(f"{where}: entry {i} is a {type(entry).__name__}, not a JSON object (a transcript line)")
        try:
            value = _dumps(entry)
        except TypeError as e:
            raise TypeError(f"{where}: entry {i} is not JSON-serializable: {e}") from e
        except ValueError as e:
            raise ValueError(f"{where}: entry {i} is not JSON-serializable: {e}") from e
        items.append(items_pb2.NewItem(key=_item_key(entry), content_type=CONTENT_TYPE, value=value))
    return items


def _batches(items: list[items_pb2.NewItem]) -> list[tuple[int, int]]:
    """``[start, end)`` ranges of at most APPEND_ITEMS items and about APPEND_BYTES bytes."""
    ranges = []
    start, size = 0, 0
    for i, item in enumerate(items):
        if i > start and (i - start >= APPEND_ITEMS or size + len(item.value) > APPEND_BYTES):
            ranges.append((start, i))
            start, size = i, 0
        size += len(item.value)
    ranges.append((start, len(items)))
    return ranges


@dataclass(frozen=True)
class _Summary:
    """What this store knows of a main log's summary."""

    #: The summary as the fold gave it (``mtime`` 0); None: the log has none.
    entry: SessionSummaryEntry | None
    #: The log's ``summary_revision`` with it (0: never set): the next write's base.
    revision: int
    #: False when the stored summary is not one to fold on (too large, not this store's):
    #: then appends leave it alone, and the SDK reads the transcript instead.
    folded: bool = True


def _parse_summary(session_id: str, text: str, revision: int) -> _Summary:
    if not text:
        return _Summary(None, revision)
    try:
        value = json.loads(text)
    except ValueError:
        return _Summary(None, revision, folded=False)
    data = value.get("data") if isinstance(value, dict) else None
    if not isinstance(data, dict):
        return _Summary(None, revision, folded=False)
    sid = value.get("session_id")
    entry: SessionSummaryEntry = {
        "session_id": sid if isinstance(sid, str) else session_id,
        "mtime": 0,
        "data": data,
    }
    return _Summary(entry, revision)


class BatonSessionStore(SessionStore):
    """A Claude Agent SDK ``SessionStore`` that keeps transcripts on a Baton hub.

    ``project`` is the Baton project the transcripts live in (a token scoped to it that
    may write is enough); ``prefix`` starts every log key, so several stores (or other
    item-log users) can share a project. ``client`` is an :class:`~baton_client.AsyncClient`
    to use (yours to close); without one the store makes its own from ``client_options``
    (``server``, ``token``, ``ca_cert``, ``settings``, ...) or else the ``baton`` CLI's
    configuration, and :meth:`aclose` closes it.

    Every method is one call to the hub, paged for long transcripts and listings, except
    ``append`` to a main transcript whose summary another process replaced since this one
    read it: that one folds again and retries (up to ``SUMMARY_ATTEMPTS`` times).
    """

    def __init__(
        self,
        project: str,
        *,
        client: AsyncClient | None = None,
        prefix: str = "claude/",
        **client_options: Any,
    ) -> None:
        if not project:
            raise ValueError("project: name the Baton project the transcripts live in, e.g. 'acme/support-bot'")
        self.project = project
        self.prefix = prefix
        self._clients = LazyAsyncClient("BatonSessionStore", client, client_options)
        self._summaries: OrderedDict[str, _Summary] = OrderedDict()
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def __repr__(self) -> str:
        return f"BatonSessionStore(project={self.project!r}, prefix={self.prefix!r})"

    @property
    def client(self) -> AsyncClient:
        """The client calls go through (made now if the store makes its own)."""
        return self._clients.get()

    async def aclose(self) -> None:
        """Closes the client this store made (not one it was given)."""
        await self._clients.aclose()

    async def __aenter__(self) -> BatonSessionStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- keys --------------------------------------------------------------------------------

    def log_key(self, key: SessionKey) -> str:
        """The item log a session key is stored in."""
        main = f"{self.prefix}{escape(key['project_key'])}/{escape(key['session_id'])}"
        subpath = key.get("subpath")
        return f"{main}/{subpath}" if subpath else main

    def _project_prefix(self, project_key: str) -> str:
        return f"{self.prefix}{escape(project_key)}/"

    # -- the summary cache -------------------------------------------------------------------

    def _known(self, log: str) -> _Summary | None:
        known = self._summaries.get(log)
        if known is not None:
            self._summaries.move_to_end(log)
        return known

    def _remember(self, log: str, summary: _Summary, newer_only: bool = False) -> None:
        known = self._summaries.get(log)
        if newer_only and known is not None and known.revision >= summary.revision:
            return
        self._summaries[log] = summary
        self._summaries.move_to_end(log)
        while len(self._summaries) > _SUMMARY_CACHE:
            self._summaries.popitem(last=False)

    def _lock(self, log: str) -> asyncio.Lock:
        lock = self._locks.get(log)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[log] = lock
        return lock

    # -- required ----------------------------------------------------------------------------

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Appends entries in order; those whose ``uuid`` the transcript holds are skipped.
        A main transcript's summary is folded and replaced in the same write."""
        if not entries:
            return
        log = self.log_key(key)
        items = _encode(f"BatonSessionStore.append({log!r})", entries)
        client = self._clients.get()
        if key.get("subpath"):
            for start, end in _batches(items):
                await client.append_items(project=self.project, key=log, items=items[start:end])
            return
        # One append at a time per session in this process: call order is kept, and no
        # two of its own folds race. Other processes' are caught by the summary revision.
        async with self._lock(log):
            for start, end in _batches(items):
                await self._append_main(client, key, log, list(entries[start:end]), items[start:end])

    async def _append_main(
        self,
        client: AsyncClient,
        key: SessionKey,
        log: str,
        entries: list[SessionStoreEntry],
        items: list[items_pb2.NewItem],
    ) -> None:
        rejected: WriteRejected | None = None
        for attempt in range(SUMMARY_ATTEMPTS):
            known = self._known(log) or _Summary(None, 0)
            if not known.folded:
                await client.append_items(project=self.project, key=log, items=items)
                return
            folded = fold_session_summary(known.entry, key, entries)
            stored = {"session_id": folded["session_id"], "data": folded["data"]}
            text = _dumps(stored).decode("utf-8")
            after = _Summary(folded, 0)
            if len(text.encode("utf-8")) > MAX_SUMMARY:
                # Too large to keep: marked so, for every writer to leave it alone and the
                # SDK to read the transcript (list_sessions lists it without a summary).
                text = json.dumps({"session_id": folded["session_id"], "data": None, "omitted": "too large"})
                after = _Summary(None, 0, folded=False)
            request = items_pb2.AppendItemsRequest(
                project=self.project,
                key=log,
                items=items,
                summary_json=text,
                write=model_pb2.WriteOptions(base_revision=known.revision, policy=model_pb2.CONFLICT_POLICY_REJECT),
            )
            try:
                reply = await client.append_items(request)
            except WriteRejected as e:
                rejected = e
                self._remember(log, await self._current_summary(client, key, log, e))
                await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))
                continue
            self._remember(log, _Summary(after.entry, reply.log.summary_revision, after.folded))
            return
        assert rejected is not None
        rejected.add_note(
            f"BatonSessionStore: the summary of {log!r} was replaced by other writers {SUMMARY_ATTEMPTS} "
            "times in a row while this append folded on it; nothing of this batch was stored"
        )
        raise rejected

    async def _current_summary(self, client: AsyncClient, key: SessionKey, log: str, e: WriteRejected) -> _Summary:
        """The summary that stays, from the refusal (its conflict carries it) or a read."""
        conflict = e.conflict
        if conflict is not None and conflict.record.endswith("/summary"):
            if conflict.current_value.WhichOneof("value") == "summary_json":
                return _parse_summary(key["session_id"], conflict.current_value.summary_json, conflict.current_revision)
            if not conflict.HasField("current_value"):
                return _Summary(None, conflict.current_revision)
        return await self._read_summary(client, key, log)

    async def _read_summary(self, client: AsyncClient, key: SessionKey, log: str) -> _Summary:
        async for reply in client.read_items(project=self.project, key=log, last=0).by_page():
            if not reply.HasField("log"):
                return _Summary(None, 0)
            return _parse_summary(key["session_id"], reply.log.summary_json, reply.log.summary_revision)
        return _Summary(None, 0)  # pragma: no cover - a listing has a first page

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """Every entry, in order; None when the transcript was never written (or deleted)."""
        log = self.log_key(key)
        entries: list[SessionStoreEntry] = []
        first = True
        async for reply in self._clients.get().read_items(project=self.project, key=log).by_page():
            if first:
                if not reply.HasField("log"):
                    return None
                if not key.get("subpath"):
                    summary = _parse_summary(key["session_id"], reply.log.summary_json, reply.log.summary_revision)
                    self._remember(log, summary, newer_only=True)
                first = False
            for item in reply.items:
                entries.append(json.loads(item.value))
        return entries

    # -- optional ----------------------------------------------------------------------------

    async def _logs(self, prefix: str, delimiter: str = "", with_summaries: bool = False) -> list[items_pb2.ItemLog]:
        logs: list[items_pb2.ItemLog] = []
        pages = self._clients.get().list_item_logs(
            project=self.project, prefix=prefix, delimiter=delimiter, with_summaries=with_summaries, page_size=1000
        )
        async for reply in pages.by_page():
            logs.extend(reply.logs)
        return logs

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        """The project's main transcripts, ``mtime`` their last change (epoch ms)."""
        prefix = self._project_prefix(project_key)
        return [
            {"session_id": unescape(log.key[len(prefix) :]), "mtime": _ms(log.updated_at)}
            for log in await self._logs(prefix, "/")
        ]

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        """The summaries of the project's main transcripts, in one listing; ``mtime`` is the
        log's last change (as ``list_sessions``'). A transcript without a summary it can
        use (too large, written by something else) is left out: the SDK reads it instead."""
        prefix = self._project_prefix(project_key)
        summaries: list[SessionSummaryEntry] = []
        for log in await self._logs(prefix, "/", with_summaries=True):
            session_id = unescape(log.key[len(prefix) :])
            summary = _parse_summary(session_id, log.summary_json, log.summary_revision)
            self._remember(log.key, summary, newer_only=True)
            if summary.entry is not None:
                summaries.append(
                    {"session_id": session_id, "mtime": _ms(log.updated_at), "data": summary.entry["data"]}
                )
        return summaries

    async def delete(self, key: SessionKey) -> None:
        """Deletes a transcript; a main one with every subagent transcript under it."""
        log = self.log_key(key)
        client = self._clients.get()
        if key.get("subpath"):
            await client.delete_item_logs(project=self.project, keys=[log])
            return
        keys = [log]
        while True:
            reply = await client.delete_item_logs(project=self.project, keys=keys, prefixes=[log + "/"])
            if not reply.more:
                break
            keys = []
        self._summaries.pop(log, None)

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        """The subpaths stored under a session (its subagents' transcripts)."""
        main: SessionKey = {"project_key": key["project_key"], "session_id": key["session_id"]}
        prefix = self.log_key(main) + "/"
        return [log.key[len(prefix) :] for log in await self._logs(prefix)]
