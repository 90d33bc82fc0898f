"""Value types and small records of the SDK: GeoPoint, Vector, write options, WriteResult, and
the RFC 3339 <-> ``datetime`` conversion of timestamps (docs/typed-json.md, ``$timestamp``)."""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

UTC = datetime.timezone.utc

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))$"
)


def parse_timestamp(text: str) -> datetime.datetime:
    """An RFC 3339 time (as the server prints it, ``2022-09-01T13:23:22.123456Z``) as a
    tz-aware UTC ``datetime``. Digits past the microsecond must be zeros (the server never sends
    others). Raises ValueError on anything else."""
    m = _RFC3339.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not an RFC 3339 time")
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    fraction = m.group(7) or ""
    if len(fraction) > 6 and fraction[6:].strip("0"):
        raise ValueError(f"{text!r} has more than microsecond precision")
    micro = int((fraction + "000000")[:6])
    offset = datetime.timedelta(0)
    if m.group(9):
        sign = 1 if m.group(9) == "+" else -1
        offset = sign * datetime.timedelta(hours=int(m.group(10)), minutes=int(m.group(11)))
    if second == 60:  # a leap second reads as the first instant of the next minute
        base = datetime.datetime(year, month, day, hour, minute, 59, micro, tzinfo=UTC)
        value = base + datetime.timedelta(seconds=1)
    else:
        value = datetime.datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)
    return value - offset


def format_timestamp(value: datetime.datetime) -> str:
    """A ``datetime`` as the RFC 3339 text the server reads, in UTC with six fractional digits.
    A naive datetime is taken as UTC (as python-firestore does)."""
    if not isinstance(value, datetime.datetime):
        raise TypeError(f"expected a datetime, got {type(value).__name__}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    else:
        value = value.astimezone(UTC)
    return (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d}T"
        f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}Z"
    )


def parse_optional_timestamp(text: Any) -> datetime.datetime | None:
    """``parse_timestamp`` of a string, None for None (fields the server may leave out)."""
    if text is None:
        return None
    return parse_timestamp(text)


class GeoPoint:
    """A geographical point: ``GeoPoint(latitude, longitude)`` (python-firestore's GeoPoint).

    Latitude must be in [-90, 90] and longitude in [-180, 180]; the server refuses others."""

    __slots__ = ("latitude", "longitude")

    def __init__(self, latitude: float, longitude: float) -> None:
        self.latitude = float(latitude)
        self.longitude = float(longitude)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GeoPoint):
            return NotImplemented
        return _same_float(self.latitude, other.latitude) and _same_float(
            self.longitude, other.longitude
        )

    def __hash__(self) -> int:
        return hash((self.latitude, self.longitude))

    def __repr__(self) -> str:
        return f"GeoPoint(latitude={self.latitude!r}, longitude={self.longitude!r})"


class Vector:
    """A vector of doubles (python-firestore's ``Vector``): ``Vector([1.0, 2.0])``; at most
    2,048 dimensions (the server refuses more)."""

    __slots__ = ("_value",)

    def __init__(self, value: Iterable[float]) -> None:
        self._value = tuple(float(v) for v in value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vector):
            return NotImplemented
        return len(self._value) == len(other._value) and all(
            _same_float(a, b) for a, b in zip(self._value, other._value, strict=True)
        )

    def __hash__(self) -> int:
        return hash(self._value)

    def __len__(self) -> int:
        return len(self._value)

    def __iter__(self) -> Iterator[float]:
        return iter(self._value)

    def __getitem__(self, index: int) -> float:
        return self._value[index]

    def __repr__(self) -> str:
        return f"Vector({list(self._value)!r})"

    def to_map_value(self) -> dict[str, Any]:
        """python-firestore's map form, for code that inspects it."""
        return {"__type__": "__vector__", "value": list(self._value)}


def _same_float(a: float, b: float) -> bool:
    """Equality that also holds for two NaNs (a value read back equals the value written)."""
    return a == b or (math.isnan(a) and math.isnan(b))


class WriteOption:
    """A precondition of a write (python-firestore's ``_helpers.WriteOption``); made by
    ``client.write_option(...)``."""

    def to_precondition(self) -> dict[str, Any]:
        """The commit format's ``precondition`` object (docs/http.md, ":commit")."""
        raise NotImplementedError

    def to_params(self) -> dict[str, str]:
        """The query parameters of a PUT/PATCH/DELETE carrying this precondition."""
        raise NotImplementedError


class LastUpdateOption(WriteOption):
    """The document must exist with exactly this ``update_time``."""

    def __init__(self, last_update_time: datetime.datetime) -> None:
        self._last_update_time = last_update_time

    def to_precondition(self) -> dict[str, Any]:
        return {"updateTime": format_timestamp(self._last_update_time)}

    def to_params(self) -> dict[str, str]:
        return {"updateTime": format_timestamp(self._last_update_time)}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LastUpdateOption):
            return NotImplemented
        return self._last_update_time == other._last_update_time


class ExistsOption(WriteOption):
    """The document must exist (``exists=True``) or must not (``exists=False``)."""

    def __init__(self, exists: bool) -> None:
        self._exists = bool(exists)

    def to_precondition(self) -> dict[str, Any]:
        return {"exists": self._exists}

    def to_params(self) -> dict[str, str]:
        return {"exists": "true" if self._exists else "false"}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExistsOption):
            return NotImplemented
        return self._exists == other._exists


def make_write_option(**kwargs: Any) -> WriteOption:
    """``client.write_option(last_update_time=...)`` or ``(exists=...)``: exactly one, as in
    python-firestore (TypeError otherwise)."""
    if len(kwargs) != 1:
        raise TypeError("write_option() takes exactly one of last_update_time=, exists=")
    name, value = next(iter(kwargs.items()))
    if name == "last_update_time":
        return LastUpdateOption(value)
    if name == "exists":
        return ExistsOption(value)
    raise TypeError(f"write_option(): unknown option {name!r}")


@dataclass(frozen=True)
class WriteResult:
    """The result of one write (python-firestore's ``WriteResult``): ``update_time`` is the
    document's new update time (for a delete, the commit time; None where the server gives
    none)."""

    update_time: datetime.datetime | None
