"""The client covers every RPC of every service, with the same signatures sync and async
(no server needed; ThreadService included, which the tests cannot call yet)."""

from __future__ import annotations

import inspect
import re

import pytest

from baton_client import AsyncClient, Client, _rpc
from baton_client import pb
from baton_client._errors import error_for

import grpc

MODULES = [getattr(pb, name) for name in dir(pb) if name.endswith("_pb2")]
SERVICES = [service for module in MODULES for service in module.DESCRIPTOR.services_by_name.values()]
RPCS = {rpc.method: rpc for rpc in vars(_rpc).values() if isinstance(rpc, _rpc.Rpc)}


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_every_service_is_known() -> None:
    assert sorted(s.name for s in SERVICES) == [
        "AdminService",
        "BriefService",
        "CheckpointService",
        "EventService",
        "ItemLogService",
        "MemoryService",
        "SearchService",
        "SessionService",
        "ThreadService",
    ]


@pytest.mark.parametrize(
    "method", [m for s in SERVICES for m in s.methods], ids=lambda m: f"{m.containing_service.name}.{m.name}"
)
def test_every_rpc_has_a_method_on_both_clients(method: object) -> None:
    name = snake(method.name)  # type: ignore[attr-defined]
    rpc = RPCS[method.name]  # type: ignore[attr-defined]
    assert rpc.request.DESCRIPTOR is method.input_type  # type: ignore[attr-defined]
    stub = getattr(_rpc.Stubs(grpc.insecure_channel("127.0.0.1:1")), rpc.service)
    assert hasattr(stub, method.name)  # type: ignore[attr-defined]

    sync, aio = getattr(Client, name), getattr(AsyncClient, name)
    sync_params = list(inspect.signature(sync).parameters.values())
    aio_params = list(inspect.signature(aio).parameters.values())
    assert [(p.name, p.kind, p.default) for p in sync_params] == [(p.name, p.kind, p.default) for p in aio_params]
    assert sync_params[1].name == "request" and sync_params[1].kind is inspect.Parameter.POSITIONAL_ONLY
    assert sync_params[-1].kind is inspect.Parameter.VAR_KEYWORD

    # Retries: a write with WriteOptions is retried with its idempotency key; the others
    # are reads, safe, or never retried.
    has_write = "write" in method.input_type.fields_by_name  # type: ignore[attr-defined]
    assert (rpc.retry == "write") == has_write
    streaming = method.server_streaming  # type: ignore[attr-defined]
    paged = "page_token" in method.input_type.fields_by_name or name == "list_tokens"  # type: ignore[attr-defined]
    assert inspect.iscoroutinefunction(aio) == (not streaming and not paged)
    if paged:
        assert rpc.items is not None and "limit" in inspect.signature(sync).parameters
        assert rpc.items in method.output_type.fields_by_name  # type: ignore[attr-defined]
        assert rpc.page_size_field in method.input_type.fields_by_name or name == "list_tokens"  # type: ignore[attr-defined]


def test_never_retried_are_the_admin_changes() -> None:
    never = sorted(rpc.method for rpc in RPCS.values() if not rpc.retried)
    assert never == ["CompactEvents", "CreateToken", "Prune", "Purge", "RevokeToken"]
    assert RPCS["Heartbeat"].retry == RPCS["PutChunks"].retry == "safe"


def test_writes_get_a_fresh_request_id_unless_given() -> None:
    a = _rpc.build_request(_rpc.OPEN_THREAD, None, {"project": "p", "thread": "t"})
    b = _rpc.build_request(_rpc.OPEN_THREAD, None, {"project": "p", "thread": "t"})
    assert a.write.request_id and b.write.request_id and a.write.request_id != b.write.request_id
    kept = _rpc.build_request(_rpc.PUT_THREAD_WRITES, None, {"write": {"request_id": "mine", "base_revision": 3}})
    assert kept.write.request_id == "mine" and kept.write.base_revision == 3
    read = _rpc.build_request(_rpc.GET_THREAD_CHECKPOINT, None, {"project": "p"})
    assert not hasattr(read, "write")


def test_keyed_writes_get_no_request_id() -> None:
    """A thread's checkpoint and pending writes are matched by their keys when sent again,
    so they carry no request id (and the hub stores no reply for them)."""
    assert sorted(rpc.method for rpc in RPCS.values() if rpc.keyed) == ["PutThreadCheckpoint", "PutThreadWrites"]
    put = _rpc.build_request(_rpc.PUT_THREAD_CHECKPOINT, None, {"project": "p", "thread": "t", "key": "k"})
    writes = _rpc.build_request(_rpc.PUT_THREAD_WRITES, None, {"project": "p", "thread": "t", "key": "k"})
    assert put.write.request_id == "" and writes.write.request_id == ""
    assert all(rpc.retry == "write" for rpc in RPCS.values() if rpc.keyed)


def test_errors_decode_every_detail_kind() -> None:
    from google.protobuf import any_pb2
    from google.rpc import error_details_pb2, status_pb2

    from baton_client import ResourceExhausted, WriteRejected

    def status(code: grpc.StatusCode, *details: object) -> bytes:
        packed = []
        for d in details:
            a = any_pb2.Any()
            a.Pack(d)
            packed.append(a)
        return status_pb2.Status(code=code.value[0], message="m", details=packed).SerializeToString()

    quota = error_details_pb2.QuotaFailure(violations=[{"subject": "--rate-limit", "description": "too fast"}])
    info = error_details_pb2.ErrorInfo(reason="RESOURCE_EXHAUSTED", domain="baton.v1", metadata={"flag": "--rate-limit"})
    e = error_for(grpc.StatusCode.RESOURCE_EXHAUSTED, "m", [("grpc-status-details-bin", status(grpc.StatusCode.RESOURCE_EXHAUSTED, info, quota))])
    assert isinstance(e, ResourceExhausted) and e.from_server
    assert e.quota_failure is not None and e.quota_failure.violations[0].subject == "--rate-limit"
    assert e.error_info is not None and e.error_info.metadata["flag"] == "--rate-limit"

    rejected = pb.model_pb2.RejectedWrite(conflict={"current_revision": 42, "record": "memory/goal"})
    w = error_for(grpc.StatusCode.ABORTED, "m", [("grpc-status-details-bin", status(grpc.StatusCode.ABORTED, rejected))])
    assert isinstance(w, WriteRejected) and w.current_revision == 42 and w.conflict is not None

    plain = error_for(grpc.StatusCode.ABORTED, "m", [])
    assert type(plain).__name__ == "Aborted" and plain.rejected is None and plain.status is None
    assert str(plain) == "ABORTED: m"
