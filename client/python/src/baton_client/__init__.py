"""Python client for Baton, the gRPC session hub for AI coding agents.

>>> from baton_client import Client
>>> with Client() as baton:                      # doctest: +SKIP
...     started = baton.start_session(project="github.com/acme/app", goal="ship v1")
...     for session in baton.list_sessions(project="github.com/acme/app"):
...         print(session.id, session.status)

:class:`Client` (sync) and :class:`AsyncClient` (asyncio) have the same methods, one per
RPC of every ``baton.v1`` service; the messages are in :mod:`baton_client.pb`.
"""

from baton_client._aio import AsyncClient, AsyncPages, AsyncWatch
from baton_client._blobs import join_chunks, make_blob
from baton_client._client import Client, Pages, Watch
from baton_client._config import DEFAULT_SERVER, ConfigError, Settings, config_file, load_settings, server_url
from baton_client._errors import (
    Aborted,
    AlreadyExists,
    BatonError,
    Cancelled,
    DataLoss,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    Unknown,
    WriteRejected,
    from_rpc_error,
)
from baton_client._rpc import (
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_RETRY,
    DEFAULT_TIMEOUT,
    DEFAULT_WATCH_RETRY,
    RetryPolicy,
    Stubs,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_RETRY",
    "DEFAULT_SERVER",
    "DEFAULT_TIMEOUT",
    "DEFAULT_WATCH_RETRY",
    "Aborted",
    "AlreadyExists",
    "AsyncClient",
    "AsyncPages",
    "AsyncWatch",
    "BatonError",
    "Cancelled",
    "Client",
    "ConfigError",
    "DataLoss",
    "DeadlineExceeded",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "NotFound",
    "OutOfRange",
    "Pages",
    "PermissionDenied",
    "ResourceExhausted",
    "RetryPolicy",
    "Settings",
    "Stubs",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "Unknown",
    "Watch",
    "WriteRejected",
    "config_file",
    "from_rpc_error",
    "join_chunks",
    "load_settings",
    "make_blob",
    "server_url",
]
