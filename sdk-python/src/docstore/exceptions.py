"""The SDK's errors: one hierarchy, named like google.api_core.exceptions.

Every error the server answers (docs/http.md, "Errors") becomes an instance of the class of its
canonical code (``CODE_TO_CLASS``, the one table). Client-side validation raises ``ValueError``
or ``TypeError`` instead, as python-firestore does.
"""

from __future__ import annotations

from typing import Any


class DocstoreError(Exception):
    """An error answered by the server.

    Attributes: ``code`` (the canonical code, e.g. ``"NOT_FOUND"``), ``message``, ``detail``,
    ``hint`` (as the server sent them; ``detail``/``hint`` may be None) and ``status`` (the
    HTTP status, or None when the error came inside a streamed answer or event).
    """

    code: str = "UNKNOWN"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        detail: str | None = None,
        hint: str | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.detail = detail
        self.hint = hint
        self.status = status

    def __str__(self) -> str:
        text = f"{self.code}: {self.message}"
        if self.detail:
            text += f" (detail: {self.detail})"
        if self.hint:
            text += f" (hint: {self.hint})"
        return text


class Cancelled(DocstoreError):
    """CANCELLED: the operation was cancelled."""

    code = "CANCELLED"


class Unknown(DocstoreError):
    """UNKNOWN: an error without a known code."""

    code = "UNKNOWN"


class InvalidArgument(DocstoreError):
    """INVALID_ARGUMENT: the request is malformed (bad path, bad value, bad query)."""

    code = "INVALID_ARGUMENT"


class DeadlineExceeded(DocstoreError):
    """DEADLINE_EXCEEDED: a statement or the request body took too long."""

    code = "DEADLINE_EXCEEDED"


class NotFound(DocstoreError):
    """NOT_FOUND: the document (or database) does not exist."""

    code = "NOT_FOUND"


class AlreadyExists(DocstoreError):
    """ALREADY_EXISTS: create of a document that exists."""

    code = "ALREADY_EXISTS"


class PermissionDenied(DocstoreError):
    """PERMISSION_DENIED: the security rules (or a missing admin key) refuse the request."""

    code = "PERMISSION_DENIED"


class ResourceExhausted(DocstoreError):
    """RESOURCE_EXHAUSTED: a size limit or a connection/stream cap."""

    code = "RESOURCE_EXHAUSTED"


class FailedPrecondition(DocstoreError):
    """FAILED_PRECONDITION: a write precondition failed, or a query needs an index."""

    code = "FAILED_PRECONDITION"


class Aborted(DocstoreError):
    """ABORTED: a transaction conflicted with another writer; retry it."""

    code = "ABORTED"


class OutOfRange(DocstoreError):
    """OUT_OF_RANGE."""

    code = "OUT_OF_RANGE"


class Unimplemented(DocstoreError):
    """UNIMPLEMENTED: the server does not support this operation."""

    code = "UNIMPLEMENTED"


class Internal(DocstoreError):
    """INTERNAL: a server bug; the message carries an error id for its log."""

    code = "INTERNAL"


class Unavailable(DocstoreError):
    """UNAVAILABLE: the server or its database is unreachable; idempotent calls retry."""

    code = "UNAVAILABLE"


class DataLoss(DocstoreError):
    """DATA_LOSS."""

    code = "DATA_LOSS"


class Unauthenticated(DocstoreError):
    """UNAUTHENTICATED: the token is missing, malformed, expired or wrongly signed."""

    code = "UNAUTHENTICATED"


# The one table: canonical code -> class.
CODE_TO_CLASS: dict[str, type[DocstoreError]] = {
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

# Used only when a body carries no canonical code (a proxy's page, a truncated answer).
_STATUS_TO_CODE: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    413: "RESOURCE_EXHAUSTED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def from_error_body(status: int | None, body: Any) -> DocstoreError:
    """The exception for an error answer: ``body`` is the parsed JSON
    ``{"code", "message", "detail", "hint"}`` (or anything else, e.g. None for a non-JSON body).
    """
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        code = body["code"]
        message = body.get("message")
        detail = body.get("detail")
        hint = body.get("hint")
    else:
        code = _STATUS_TO_CODE.get(status or 0, "UNKNOWN")
        message = None
        detail = None
        hint = None
    if not isinstance(message, str):
        message = f"HTTP {status}" if status is not None else code
    cls = CODE_TO_CLASS.get(code, Unknown)
    return cls(
        message,
        code=code,
        detail=detail if isinstance(detail, str) else None,
        hint=hint if isinstance(hint, str) else None,
        status=status,
    )
