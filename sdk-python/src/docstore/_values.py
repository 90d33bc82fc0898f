"""Typed JSON (docs/typed-json.md) <-> Python values.

Python -> typed JSON: ``encode_value`` (a value), ``encode_data`` (a document's data, with
sentinels and transforms where writes allow them), ``encode_update`` (the field paths of
``update``). Typed JSON -> Python: ``decode_value``, ``decode_data``; a ``$ref`` becomes
``client.document(path)``.

Python types: None, bool, int (int64; beyond it ValueError), float (NaN, +-inf and -0.0 through
``$double``), str, bytes/bytearray/memoryview (read back as bytes), tz-aware ``datetime`` (naive
ones are UTC; read back as UTC with microseconds), GeoPoint, Vector, DocumentReference, list/tuple
(read back as list), dict with str keys (keys that are typed JSON tags are escaped with ``$map``).
Any other type is a TypeError, as in python-firestore.
"""

from __future__ import annotations

import base64
import datetime
import math
from typing import Any

from docstore._types import GeoPoint, Vector, format_timestamp, parse_timestamp
from docstore.field_path import FieldPath, to_field_path
from docstore.transforms import Sentinel, _NumericValue, _ValueList

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

VALUE_TAGS = frozenset({"$timestamp", "$bytes", "$ref", "$geo", "$double", "$vector", "$map"})
TRANSFORM_TAGS = frozenset(
    {"$increment", "$max", "$min", "$serverTimestamp", "$arrayUnion", "$arrayRemove", "$delete"}
)
TAGS = VALUE_TAGS | TRANSFORM_TAGS

_TRANSFORM_TYPES = (Sentinel, _NumericValue, _ValueList)


def _where(path: tuple[str | int, ...]) -> str:
    if not path:
        return "<root>"
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            seg = FieldPath(p).to_api_repr() if p else "``"
            out += seg if not out else "." + seg
    return out


def _encode_double(value: float) -> Any:
    if math.isnan(value):
        return {"$double": "NaN"}
    if math.isinf(value):
        return {"$double": "Infinity" if value > 0 else "-Infinity"}
    if value == 0.0 and math.copysign(1.0, value) < 0:
        return {"$double": "-0.0"}
    if value.is_integer() and 1e16 <= abs(value) < 2**63:
        # Python prints these with an exponent (1e+18), which reaches the server as an
        # integer once it went through jsonb (docs/typed-json.md, section 2): say "double".
        return {"$double": value}
    return value


def encode_value(value: Any, _path: tuple[str | int, ...] = ()) -> Any:
    """``value`` as typed JSON (a JSON-serialisable Python object). Transforms and sentinels
    are refused here (ValueError): they belong to the data of writes (``encode_data``)."""
    return _encode(value, _path, transforms=False)


def _encode(value: Any, path: tuple[str | int, ...], *, transforms: bool) -> Any:
    # Order: the common types first.
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"integer {value} at {_where(path)} does not fit in 64 bits")
        return int(value)
    if isinstance(value, float):
        return _encode_double(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"map keys must be str, got {type(key).__name__} at {_where(path)}")
            out[key] = _encode(item, (*path, key), transforms=transforms)
        if len(out) == 1 and next(iter(out)) in TAGS:
            return {"$map": out}
        return out
    if isinstance(value, (list, tuple)):
        return [_encode(item, (*path, i), transforms=False) for i, item in enumerate(value)]
    if isinstance(value, datetime.datetime):
        return {"$timestamp": format_timestamp(value)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if getattr(type(value), "_docstore_reference", False):
        return {"$ref": value.path}
    if isinstance(value, GeoPoint):
        return {"$geo": [_encode_double(value.latitude), _encode_double(value.longitude)]}
    if isinstance(value, Vector):
        return {"$vector": [_encode_double(v) for v in value]}
    if isinstance(value, _TRANSFORM_TYPES):
        if not transforms:
            where = _where(path)
            if path and isinstance(path[-1], int):
                raise ValueError(f"{value!r} at {where} is inside an array, which is not allowed")
            raise ValueError(f"{value!r} at {where} is only allowed in the data of a write")
        return _encode_transform(value, path)
    raise TypeError(f"cannot store a {type(value).__name__} (at {_where(path)})")


def _encode_transform(value: Any, path: tuple[str | int, ...]) -> dict[str, Any]:
    if isinstance(value, Sentinel):
        return {value._tag: True}
    if isinstance(value, _NumericValue):
        return {value._tag: _encode(value.value, path, transforms=False)}
    return {
        value._tag: [_encode(v, (*path, i), transforms=False) for i, v in enumerate(value.values)]
    }


def contains_delete(value: Any) -> bool:
    """Whether a DELETE_FIELD sentinel sits anywhere in the maps of ``value``."""
    if isinstance(value, Sentinel):
        return value._tag == "$delete"
    if isinstance(value, dict):
        return any(contains_delete(v) for v in value.values())
    return False


def encode_data(data: Any, *, allow_delete: bool) -> dict[str, Any]:
    """A document's data (``create``/``set``) as typed JSON, with transforms. ``DELETE_FIELD``
    only where ``allow_delete`` (``set(merge=True)``); elsewhere ValueError as python-firestore
    raises."""
    if not isinstance(data, dict):
        raise TypeError(f"document data must be a dict, got {type(data).__name__}")
    if not allow_delete and contains_delete(data):
        raise ValueError("DELETE_FIELD is only allowed in update() and set(merge=True)")
    out: dict[str, Any] = {}
    for key, item in data.items():
        if not isinstance(key, str):
            raise TypeError(f"document field names must be str, got {type(key).__name__}")
        out[key] = _encode(item, (key,), transforms=True)
    return out


def encode_update(field_updates: Any) -> dict[str, Any]:
    """``update()``'s argument: keys are field paths (dotted str or FieldPath), values are
    values, transforms or DELETE_FIELD. Returns the server's ``fields`` object (text-form keys)."""
    if not isinstance(field_updates, dict):
        raise TypeError(f"update() takes a dict, got {type(field_updates).__name__}")
    if not field_updates:
        raise ValueError("update() needs at least one field")
    out: dict[str, Any] = {}
    seen: list[FieldPath] = []
    for key, item in field_updates.items():
        path = to_field_path(key)
        for other in seen:
            if other.eq_or_parent(path):
                raise ValueError(
                    f"field paths {other.to_api_repr()!r} and {path.to_api_repr()!r} overlap"
                )
        seen.append(path)
        out[path.to_api_repr()] = _encode(item, path.parts, transforms=True)
    return out


def _decode_double(raw: Any) -> float:
    if isinstance(raw, str):
        if raw == "NaN":
            return math.nan
        if raw == "Infinity":
            return math.inf
        if raw == "-Infinity":
            return -math.inf
        if raw == "-0.0":
            return -0.0
        raise ValueError(f"invalid $double {raw!r}")
    if isinstance(raw, dict) and len(raw) == 1 and "$double" in raw:
        return _decode_double(raw["$double"])
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ValueError(f"invalid double {raw!r}")
    return float(raw)


def decode_value(value: Any, client: Any) -> Any:
    """A typed JSON value (as ``json.loads`` gives it) as Python. ``client`` turns ``$ref``
    paths into DocumentReferences (``client.document(path)``); with None they stay strings."""
    if isinstance(value, dict):
        if len(value) == 1:
            ((tag, arg),) = value.items()
            if tag in VALUE_TAGS:
                return _decode_tag(tag, arg, client)
        return {k: decode_value(v, client) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_value(v, client) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        if not INT64_MIN <= value <= INT64_MAX:
            return float(value)  # integer syntax beyond int64 is a double (docs/typed-json.md)
        return value
    return value


def _decode_tag(tag: str, arg: Any, client: Any) -> Any:
    if tag == "$timestamp":
        return parse_timestamp(arg)
    if tag == "$bytes":
        return base64.b64decode(arg, validate=True)
    if tag == "$ref":
        path = arg.strip("/") if isinstance(arg, str) else arg
        return client.document(path) if client is not None else path
    if tag == "$geo":
        return GeoPoint(_decode_double(arg[0]), _decode_double(arg[1]))
    if tag == "$double":
        return _decode_double(arg)
    if tag == "$vector":
        return Vector(_decode_double(v) for v in arg)
    # $map: the inner object's keys are literal field names.
    if not isinstance(arg, dict):
        raise ValueError("invalid $map: expected an object")
    return {k: decode_value(v, client) for k, v in arg.items()}


def decode_data(data: Any, client: Any) -> dict[str, Any]:
    """A document's ``data`` object as a dict of Python values."""
    if not isinstance(data, dict):
        raise ValueError(f"document data must be an object, got {type(data).__name__}")
    return {k: decode_value(v, client) for k, v in data.items()}
