"""Write-trigger endpoints (docs/triggers.md): check a delivery's signature and build the
answer of an exactly-once trigger. Standard library only, no I/O: call it from any WSGI or
ASGI handler with the request's raw body and its `X-Docstore-Signature` header.

    from docstore import triggers

    def handler(body: bytes, headers) -> bytes:
        delivery = triggers.parse(SECRET, headers["X-Docstore-Signature"], body)
        stars = delivery.after["data"]["stars"]
        return triggers.answer([
            triggers.increment(f"restaurants/{delivery.params['id']}",
                               {"numRatings": 1, "sumStars": stars}),
        ])
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Delivery",
    "InvalidSignature",
    "SIGNATURE_HEADER",
    "answer",
    "increment",
    "parse",
    "sign",
    "verify",
]

SIGNATURE_HEADER = "X-Docstore-Signature"

# How old a delivery's signature may be, in seconds (the sidecar signs each attempt anew).
DEFAULT_TOLERANCE = 300.0


class InvalidSignature(ValueError):
    """The signature header is missing, malformed, stale, or does not match the body."""


@dataclass(frozen=True)
class Delivery:
    """A delivered change (docs/triggers.md, "Delivery")."""

    trigger: str
    change_id: str
    event: str
    path: str
    params: dict[str, str]
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    commit_time: str


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The header value the sidecar sends: `t=<timestamp>,v1=<hex HMAC-SHA256>` of
    `"<timestamp>.<body>"` keyed with the secret's UTF-8 bytes."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def verify(
    secret: str,
    header: str | None,
    body: bytes,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> None:
    """Check `header` against the raw `body`; raise InvalidSignature unless it matches and its
    time is within `tolerance` seconds of `now` (default: the clock)."""
    if not header:
        raise InvalidSignature(f"no {SIGNATURE_HEADER} header")
    parts: dict[str, str] = {}
    for item in header.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep:
            raise InvalidSignature("malformed signature header")
        parts.setdefault(key, value)
    try:
        timestamp = int(parts["t"])
        given = parts["v1"]
    except (KeyError, ValueError):
        raise InvalidSignature("malformed signature header") from None
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise InvalidSignature("the signature is too old (or from the future)")
    expected = sign(secret, body, timestamp).partition(",v1=")[2]
    if not hmac.compare_digest(expected, given):
        raise InvalidSignature("the signature does not match the body")


def parse(
    secret: str,
    header: str | None,
    body: bytes,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> Delivery:
    """Verify the delivery (as `verify`) and read it."""
    verify(secret, header, body, tolerance=tolerance, now=now)
    d = json.loads(body)
    return Delivery(
        trigger=d["trigger"],
        change_id=d["changeId"],
        event=d["event"],
        path=d["path"],
        params=d["params"],
        before=d["before"],
        after=d["after"],
        commit_time=d["commitTime"],
    )


def increment(path: str, fields: dict[str, int | float]) -> dict[str, Any]:
    """A write of the commit format adding each number to its field (`$increment`)."""
    return {"update": path, "fields": {k: {"$increment": v} for k, v in fields.items()}}


def answer(writes: list[dict[str, Any]] | None = None) -> bytes:
    """The body of an exactly-once endpoint's 200 answer: `{"writes": [...]}`, the commit
    format of `docstore.commit` (docs/http.md, `:commit`); the sidecar commits them once per
    change, with the change's acknowledgement. No writes: `{"writes": []}`."""
    return json.dumps({"writes": list(writes or [])}, separators=(",", ":")).encode()
