"""Typed errors: every gRPC error becomes a :class:`BatonError` subclass per status code.

The server puts a ``google.rpc.Status`` in the ``grpc-status-details-bin`` trailer of every
refused call (see "Error details" in proto/baton/v1/model.proto); its details are decoded
onto the error: ``error_info``, ``bad_request``, ``resource_info``, ``quota_failure`` and,
for a write refused under ``CONFLICT_POLICY_REJECT``, ``rejected``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from baton_client._proto.baton.v1 import model_pb2

__all__ = [
    "Aborted",
    "AlreadyExists",
    "BatonError",
    "Cancelled",
    "DataLoss",
    "DeadlineExceeded",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "NotFound",
    "OutOfRange",
    "PermissionDenied",
    "ResourceExhausted",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "Unknown",
    "WriteRejected",
    "from_rpc_error",
]

DETAILS_KEY = "grpc-status-details-bin"
DOMAIN = "baton.v1"


class BatonError(Exception):
    """A call the server (or the transport) refused.

    Attributes:
        code: the ``grpc.StatusCode``.
        message: the status message.
        status: the decoded ``google.rpc.Status`` (``None`` when the trailer is absent,
            e.g. a transport error).
        details: every detail of ``status`` as an ``Any``, including ones not decoded here.
        error_info: the ``google.rpc.ErrorInfo`` (``reason``, ``domain``, ``metadata``).
        bad_request: the ``google.rpc.BadRequest`` (field violations) of INVALID_ARGUMENT.
        resource_info: the ``google.rpc.ResourceInfo`` of NOT_FOUND.
        quota_failure: the ``google.rpc.QuotaFailure`` of RESOURCE_EXHAUSTED.
        rejected: the ``baton.v1.RejectedWrite`` of ABORTED (``rejected.conflict`` holds
            the current value and ``current_revision``).
        trailing_metadata: the call's trailing metadata as ``(key, value)`` pairs.
        debug_error_string: gRPC's debug string, when it gave one.

    It is not a ``grpc.RpcError``: that one's interface is ``code()``/``details()``
    methods, and ``code`` here is an attribute. ``from_rpc_error`` turns a raw stub's
    ``grpc.RpcError`` into one.
    """

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        message: str,
        *,
        code: grpc.StatusCode | None = None,
        status: status_pb2.Status | None = None,
        trailing_metadata: tuple[tuple[str, str | bytes], ...] = (),
        debug_error_string: str | None = None,
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.status = status
        self.trailing_metadata = trailing_metadata
        self.debug_error_string = debug_error_string
        self.details: list[any_pb2.Any] = list(status.details) if status is not None else []
        self.error_info: error_details_pb2.ErrorInfo | None = _unpack(self.details, error_details_pb2.ErrorInfo)
        self.bad_request: error_details_pb2.BadRequest | None = _unpack(self.details, error_details_pb2.BadRequest)
        self.resource_info: error_details_pb2.ResourceInfo | None = _unpack(
            self.details, error_details_pb2.ResourceInfo
        )
        self.quota_failure: error_details_pb2.QuotaFailure | None = _unpack(
            self.details, error_details_pb2.QuotaFailure
        )
        self.rejected: model_pb2.RejectedWrite | None = _unpack(self.details, model_pb2.RejectedWrite)

    @property
    def reason(self) -> str | None:
        """``error_info.reason`` (e.g. ``"NOT_FOUND"``, ``"WRITE_REJECTED"``), if any."""
        return self.error_info.reason if self.error_info is not None else None

    @property
    def from_server(self) -> bool:
        """True when Baton itself answered with this error (its ErrorInfo is present)."""
        return self.error_info is not None and self.error_info.domain == DOMAIN

    def __str__(self) -> str:
        text = f"{self.code.name}: {self.message}" if self.message else self.code.name
        if self.reason:
            text += f" [{self.reason}]"
        return text

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code.name}, message={self.message!r}, reason={self.reason!r})"

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self.message, self.code, self.status, self.trailing_metadata))


def _rebuild(
    cls: type[BatonError],
    message: str,
    code: grpc.StatusCode,
    status: status_pb2.Status | None,
    trailing: tuple[tuple[str, str | bytes], ...],
) -> BatonError:
    return cls(message, code=code, status=status, trailing_metadata=trailing)


class Cancelled(BatonError):
    code = grpc.StatusCode.CANCELLED


class Unknown(BatonError):
    code = grpc.StatusCode.UNKNOWN


class InvalidArgument(BatonError):
    """INVALID_ARGUMENT: ``bad_request`` names the field and what is wrong."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(BatonError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(BatonError):
    """NOT_FOUND: ``resource_info`` names what was not found."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(BatonError):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(BatonError):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(BatonError):
    """RESOURCE_EXHAUSTED: a size, rate or watch limit; ``quota_failure`` names the flag."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(BatonError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(BatonError):
    code = grpc.StatusCode.ABORTED


class WriteRejected(Aborted):
    """A write refused under ``CONFLICT_POLICY_REJECT``: nothing was written.

    ``rejected.conflict`` carries the record's current value and revision
    (``current_revision``, also a property here).
    """

    @property
    def conflict(self) -> model_pb2.Conflict | None:
        return self.rejected.conflict if self.rejected is not None else None

    @property
    def current_revision(self) -> int | None:
        return self.rejected.conflict.current_revision if self.rejected is not None else None


class OutOfRange(BatonError):
    """OUT_OF_RANGE: e.g. a cursor below compacted events (reason ``CURSOR_COMPACTED``)."""

    code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(BatonError):
    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(BatonError):
    code = grpc.StatusCode.INTERNAL


class Unavailable(BatonError):
    """UNAVAILABLE: the hub (or its storage) cannot be reached; retry later."""

    code = grpc.StatusCode.UNAVAILABLE


class DataLoss(BatonError):
    """DATA_LOSS: stored bytes failed their digest."""

    code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(BatonError):
    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE: dict[grpc.StatusCode, type[BatonError]] = {
    cls.code: cls
    for cls in (
        Cancelled,
        Unknown,
        InvalidArgument,
        DeadlineExceeded,
        NotFound,
        AlreadyExists,
        PermissionDenied,
        ResourceExhausted,
        FailedPrecondition,
        Aborted,
        OutOfRange,
        Unimplemented,
        Internal,
        Unavailable,
        DataLoss,
        Unauthenticated,
    )
}


def _unpack(details: Iterable[any_pb2.Any], cls: Any) -> Any:
    for detail in details:
        if detail.Is(cls.DESCRIPTOR):
            message = cls()
            detail.Unpack(message)
            return message
    return None


def _call_value(error: Any, name: str) -> Any:
    attr = getattr(error, name, None)
    if not callable(attr):
        return None
    try:
        return attr()
    except Exception:  # a half-built call object: treat as absent
        return None


def error_for(
    code: grpc.StatusCode,
    message: str,
    trailing_metadata: Iterable[tuple[str, str | bytes]] | None = None,
    debug_error_string: str | None = None,
) -> BatonError:
    """Builds the typed error for a status code, message and trailing metadata."""
    trailing = tuple((str(k), v) for k, v in (trailing_metadata or ()))
    status = None
    for key, value in trailing:
        if key == DETAILS_KEY and isinstance(value, bytes):
            try:
                status = status_pb2.Status.FromString(value)
            except Exception:
                status = None
            break
    cls = _BY_CODE.get(code, BatonError)
    if cls is Aborted and status is not None and _unpack(status.details, model_pb2.RejectedWrite) is not None:
        cls = WriteRejected
    return cls(message, code=code, status=status, trailing_metadata=trailing, debug_error_string=debug_error_string)


def from_rpc_error(error: grpc.RpcError) -> BatonError:
    """The typed error for an error raised by grpc (sync ``grpc.Call`` or ``AioRpcError``)."""
    if isinstance(error, BatonError):
        return error
    code = _call_value(error, "code")
    if not isinstance(code, grpc.StatusCode):
        code = grpc.StatusCode.UNKNOWN
    message = _call_value(error, "details")
    if not isinstance(message, str):
        message = str(error) or code.name
    trailing = _call_value(error, "trailing_metadata")
    debug = _call_value(error, "debug_error_string")
    return error_for(code, message, trailing, debug if isinstance(debug, str) else None)


# Transport failures that are not the server's answer (no Baton ErrorInfo): retried by
# watches like UNAVAILABLE.
_TRANSPORT_MARKERS = (
    "rst_stream",
    "stream removed",
    "socket closed",
    "connection reset",
    "goaway",
    "broken pipe",
    "end of tcp stream",
    "failed to connect",
    "connection refused",
)


def is_transient(error: BatonError) -> bool:
    """UNAVAILABLE, or a connection that broke mid-call (INTERNAL/UNKNOWN from the transport)."""
    if error.code == grpc.StatusCode.UNAVAILABLE:
        return True
    if error.code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN) and not error.from_server:
        text = error.message.lower()
        return any(marker in text for marker in _TRANSPORT_MARKERS)
    return False
