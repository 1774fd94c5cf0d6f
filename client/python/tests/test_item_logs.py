"""The ItemLogService methods of the sync client (the async one is exercised by the
framework adapters): append with item keys and a summary, reads of all, the newest N and
after a seq across pages, pops, listings grouped by a delimiter page by page, deletes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from baton_client import Client, InvalidArgument, WriteRejected
from baton_client.pb import model_pb2


def values(items: Any) -> list[int]:
    return [json.loads(i.value) for i in items]


def test_append_read_pop(admin: Client, project: str) -> None:
    first = admin.append_items(
        project=project, key="log", items=[{"key": f"k{n}", "value": str(n).encode()} for n in range(5)]
    )
    assert list(first.seqs) == [1, 2, 3, 4, 5] and first.log.items == 5
    again = admin.append_items(
        project=project, key="log", items=[{"key": "k4", "value": b"4"}, {"key": "k5", "value": b"5"}]
    )
    assert list(again.seqs) == [0, 6] and again.log.last_seq == 6
    assert values(admin.read_items(project=project, key="log")) == [0, 1, 2, 3, 4, 5]
    assert values(admin.read_items(project=project, key="log", last=2)) == [4, 5]
    assert values(admin.read_items(project=project, key="log", after_seq=4)) == [4, 5]
    pages = admin.read_items(project=project, key="log", last=5, page_size=2)
    assert values(pages) == [1, 2, 3, 4, 5] and pages.response.log.key == "log"
    missing = admin.read_items(project=project, key="missing")
    assert missing.to_list() == [] and not missing.response.HasField("log")

    popped = admin.pop_item(project=project, key="log")
    assert popped.item.seq == 6 and popped.log.items == 5
    assert values(admin.read_items(project=project, key="log", last=1)) == [4]
    assert not admin.pop_item(project=project, key="missing").HasField("item")


def test_summary_under_reject(admin: Client, project: str) -> None:
    set_ = admin.append_items(project=project, key="s", items=[{"value": b"1"}], summary_json='{"n":1}')
    base = set_.log.summary_revision
    assert base > 0
    reject = model_pb2.WriteOptions(base_revision=0, policy=model_pb2.CONFLICT_POLICY_REJECT)
    with pytest.raises(WriteRejected) as refused:
        admin.append_items(project=project, key="s", items=[{"value": b"2"}], summary_json='{"n":2}', write=reject)
    conflict = refused.value.conflict
    assert conflict is not None and conflict.current_revision == base
    assert conflict.current_value.summary_json == '{"n":1}'
    assert values(admin.read_items(project=project, key="s")) == [1]
    ok = model_pb2.WriteOptions(base_revision=base, policy=model_pb2.CONFLICT_POLICY_REJECT)
    done = admin.append_items(project=project, key="s", items=[{"value": b"2"}], summary_json='{"n":2}', write=ok)
    assert done.log.summary_json == '{"n":2}' and done.log.summary_revision > base
    with pytest.raises(InvalidArgument, match="not JSON"):
        admin.append_items(project=project, key="s", summary_json="{")


def test_listing_by_page_with_a_delimiter(admin: Client, project: str) -> None:
    for s in range(5):
        admin.append_items(project=project, key=f"pk/s{s}", items=[{"value": b"0"}])
        for a in range(3):
            admin.append_items(project=project, key=f"pk/s{s}/sub/a{a}", items=[{"value": b"0"}])
    admin.append_items(project=project, key="other/s", items=[{"value": b"0"}])

    listing = admin.list_item_logs(project=project, prefix="pk/", delimiter="/", page_size=3)
    replies = list(listing.by_page())
    assert len(replies) > 1
    logs = [log.key for r in replies for log in r.logs]
    prefixes = [p for r in replies for p in r.common_prefixes]
    assert logs == [f"pk/s{s}" for s in range(5)]
    assert prefixes == [f"pk/s{s}/" for s in range(5)]
    with pytest.raises(RuntimeError, match="by_page"):
        next(iter(listing))

    every = admin.list_item_logs(project=project, prefix="pk/s2/", page_size=2)
    assert [log.key for log in every] == [f"pk/s2/sub/a{a}" for a in range(3)]
    iterated = admin.list_item_logs(project=project, prefix="pk/")
    next(iterated)
    with pytest.raises(RuntimeError, match="being iterated"):
        iterated.by_page()


def test_delete_by_key_and_prefix(admin: Client, project: str) -> None:
    for key in ["a", "a/1", "a/2", "ab", "b"]:
        admin.append_items(project=project, key=key, items=[{"value": b"0"}, {"value": b"1"}])
    deleted = admin.delete_item_logs(project=project, keys=["a", "missing"], prefixes=["a/"])
    assert list(deleted.deleted) == ["a", "a/1", "a/2"] and deleted.deleted_items == 6 and not deleted.more
    assert [log.key for log in admin.list_item_logs(project=project)] == ["ab", "b"]
    nothing = admin.delete_item_logs(project=project, keys=["a"])
    assert list(nothing.deleted) == [] and not nothing.HasField("result")
