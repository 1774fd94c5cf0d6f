"""The generated protobuf messages and gRPC stubs of ``baton.v1``.

``from baton_client.pb import model_pb2, session_pb2`` gives the request, reply and record
messages (with ``.pyi`` type stubs); the ``*_pb2_grpc`` modules hold the raw service stubs
(also reachable as ``Client.stubs``). The protos in ``proto/baton/v1`` are the API
contract: their comments document every field.
"""

from baton_client._proto.baton.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    brief_pb2,
    brief_pb2_grpc,
    checkpoint_pb2,
    checkpoint_pb2_grpc,
    event_pb2,
    event_pb2_grpc,
    items_pb2,
    items_pb2_grpc,
    memory_pb2,
    memory_pb2_grpc,
    model_pb2,
    model_pb2_grpc,
    search_pb2,
    search_pb2_grpc,
    session_pb2,
    session_pb2_grpc,
    thread_pb2,
    thread_pb2_grpc,
)

__all__ = [
    "admin_pb2",
    "admin_pb2_grpc",
    "brief_pb2",
    "brief_pb2_grpc",
    "checkpoint_pb2",
    "checkpoint_pb2_grpc",
    "event_pb2",
    "event_pb2_grpc",
    "items_pb2",
    "items_pb2_grpc",
    "memory_pb2",
    "memory_pb2_grpc",
    "model_pb2",
    "model_pb2_grpc",
    "search_pb2",
    "search_pb2_grpc",
    "session_pb2",
    "session_pb2_grpc",
    "thread_pb2",
    "thread_pb2_grpc",
]
