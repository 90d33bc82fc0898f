"""Queries without I/O (python-firestore's ``base_query``): the immutable builder and the
``structuredQuery`` JSON it produces (docs/query.md, "The structured JSON form").

``BaseQuery(parent, *, all_descendants=False)``: ``parent`` is a collection reference
(``parent._client``, ``parent._path``); a CollectionReference is a query whose parent is
itself. Every builder method returns a new query of ``_query_class`` (a plain Query, never a
CollectionReference).
"""

from __future__ import annotations

import math
from typing import Any

from docstore import _values
from docstore.base_document import DocumentSnapshot
from docstore.field_path import FieldPath, get_nested_value, to_field_path

DOCUMENT_ID = "__name__"

# python-firestore's operator strings -> the structured form's field filter operators.
_OPERATORS = {
    "<": "LESS_THAN",
    "<=": "LESS_THAN_OR_EQUAL",
    "==": "EQUAL",
    ">=": "GREATER_THAN_OR_EQUAL",
    ">": "GREATER_THAN",
    "!=": "NOT_EQUAL",
    "array_contains": "ARRAY_CONTAINS",
    "array_contains_any": "ARRAY_CONTAINS_ANY",
    "in": "IN",
    "not-in": "NOT_IN",
}
# Operators whose field Firestore adds to the order of a query with a snapshot cursor.
_INEQUALITY = {"<", "<=", ">", ">=", "!=", "not-in"}
_LIST_OPERATORS = {"in", "not-in", "array_contains_any"}
_DIRECTIONS = ("ASCENDING", "DESCENDING")


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _field_text(field_path: str | FieldPath) -> str:
    """The server's text form of a field path (``__name__`` kept as is)."""
    if field_path == DOCUMENT_ID:
        return DOCUMENT_ID
    return to_field_path(field_path).to_api_repr()


class BaseFilter:
    """A filter of ``Query.where(filter=...)``."""

    def _to_json(self) -> dict[str, Any]:
        raise NotImplementedError


class FieldFilter(BaseFilter):
    """``FieldFilter("city", "==", "SF")``: one field compared with a value. Operators as
    python-firestore's: ``<``, ``<=``, ``==``, ``>=``, ``>``, ``!=``, ``array_contains``,
    ``array_contains_any``, ``in``, ``not-in``. ``== None`` / ``== NaN`` are the unary
    ``IS_NULL`` / ``IS_NAN`` filters, ``!=`` the negated ones; other operators refuse None and
    NaN (ValueError), as python-firestore does."""

    def __init__(self, field_path: str | FieldPath, op_string: str, value: Any = None) -> None:
        if op_string not in _OPERATORS:
            raise ValueError(
                f"operator {op_string!r} is not one of " + ", ".join(map(repr, _OPERATORS))
            )
        if (value is None or _is_nan(value)) and op_string not in ("==", "!="):
            raise ValueError("only '==' and '!=' filters can be used with None or NaN values")
        if op_string in _LIST_OPERATORS and not isinstance(value, (list, tuple)):
            raise TypeError(f"the {op_string!r} operator takes a list of values")
        self.field_path = _field_text(field_path)
        self.op_string = op_string
        self.value = value

    def _to_json(self) -> dict[str, Any]:
        field = {"fieldPath": self.field_path}
        if self.value is None or _is_nan(self.value):
            kind = "NULL" if self.value is None else "NAN"
            op = f"IS_{kind}" if self.op_string == "==" else f"IS_NOT_{kind}"
            return {"unaryFilter": {"op": op, "field": field}}
        value = self.value
        if isinstance(value, tuple):
            value = list(value)
        return {
            "fieldFilter": {
                "field": field,
                "op": _OPERATORS[self.op_string],
                "value": _values.encode_value(value),
            }
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldFilter):
            return NotImplemented
        return self._to_json() == other._to_json()

    def __repr__(self) -> str:
        return f"FieldFilter({self.field_path!r}, {self.op_string!r}, {self.value!r})"


class BaseCompositeFilter(BaseFilter):
    """A conjunction or disjunction of filters."""

    _op = ""

    def __init__(self, filters: list[BaseFilter]) -> None:
        filters = list(filters)
        if not filters:
            raise ValueError(f"{type(self).__name__} needs at least one filter")
        for f in filters:
            if not isinstance(f, BaseFilter):
                raise TypeError(f"{type(self).__name__} takes filters, got {type(f).__name__}")
        self.filters = filters

    def _to_json(self) -> dict[str, Any]:
        return {
            "compositeFilter": {"op": self._op, "filters": [f._to_json() for f in self.filters]}
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BaseCompositeFilter):
            return NotImplemented
        return self._to_json() == other._to_json()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.filters!r})"


class And(BaseCompositeFilter):
    """Documents that pass every one of ``filters``."""

    _op = "AND"


class Or(BaseCompositeFilter):
    """Documents that pass at least one of ``filters``."""

    _op = "OR"


def _inequality_fields(filters: list[BaseFilter]) -> list[str]:
    """Fields of the inequality filters (in ANDs, as Firestore orders them), in order."""
    out: list[str] = []
    for f in filters:
        if isinstance(f, FieldFilter):
            if f.op_string in _INEQUALITY and f.value is not None and not _is_nan(f.value):
                out.append(f.field_path)
        elif isinstance(f, And):
            out.extend(_inequality_fields(f.filters))
    return out


class BaseQuery:
    """A query over a collection (or, with ``all_descendants``, a collection group).

    Immutable: ``where``, ``order_by``, ``limit``, ... return new queries. ``_to_json()`` is
    the ``structuredQuery`` the HTTP API's ``:runQuery`` takes.
    """

    ASCENDING = "ASCENDING"
    DESCENDING = "DESCENDING"

    _query_class: Any = None

    def __init__(self, parent: Any, *, all_descendants: bool = False) -> None:
        self._parent = parent
        self._client = parent._client
        self._all_descendants = all_descendants
        self._filters: tuple[BaseFilter, ...] = ()
        self._orders: tuple[tuple[str, str], ...] = ()
        self._projection: tuple[str, ...] | None = None
        self._limit: int | None = None
        self._limit_to_last = False
        self._offset: int | None = None
        # (values or snapshot or dict, before)
        self._start_at: tuple[Any, bool] | None = None
        self._end_at: tuple[Any, bool] | None = None

    # The builder.
    def _copy(self, **changes: Any) -> Any:
        query = self._query_class(self._parent, all_descendants=self._all_descendants)
        for name in (
            "_filters",
            "_orders",
            "_projection",
            "_limit",
            "_limit_to_last",
            "_offset",
            "_start_at",
            "_end_at",
        ):
            setattr(query, name, changes.get(name, getattr(self, name)))
        return query

    def where(
        self,
        field_path: str | FieldPath | None = None,
        op_string: str | None = None,
        value: Any = None,
        *,
        filter: BaseFilter | None = None,  # noqa: A002 (python-firestore's name)
    ) -> Any:
        """A query that also requires ``filter`` (a FieldFilter, And or Or); the positional
        ``where("a", "==", 1)`` form is accepted too. Filters of several calls are ANDed."""
        if filter is not None:
            if field_path is not None or op_string is not None:
                raise ValueError("pass either filter= or field_path/op_string/value, not both")
            if not isinstance(filter, BaseFilter):
                raise TypeError(f"filter must be a FieldFilter, And or Or, got {filter!r}")
            new = filter
        else:
            if field_path is None or op_string is None:
                raise ValueError("where() needs filter= or field_path, op_string and value")
            new = FieldFilter(field_path, op_string, value)
        return self._copy(_filters=(*self._filters, new))

    def order_by(self, field_path: str | FieldPath, direction: str = ASCENDING) -> Any:
        """A query also ordered by ``field_path`` (``Query.ASCENDING`` or ``DESCENDING``)."""
        if direction not in _DIRECTIONS:
            raise ValueError(f"direction must be one of {_DIRECTIONS}, got {direction!r}")
        return self._copy(_orders=(*self._orders, (_field_text(field_path), direction)))

    def select(self, field_paths: Any) -> Any:
        """A query returning only ``field_paths`` of each document (an empty list: names
        only)."""
        if isinstance(field_paths, (str, FieldPath)):
            raise TypeError("select() takes a list of field paths")
        fields = tuple(_field_text(f) for f in field_paths)
        return self._copy(_projection=fields or (DOCUMENT_ID,))

    def limit(self, count: int) -> Any:
        """A query returning at most the first ``count`` results."""
        return self._copy(_limit=_check_count("limit", count), _limit_to_last=False)

    def limit_to_last(self, count: int) -> Any:
        """A query returning the last ``count`` results (still in the query's order); needs an
        ``order_by``, and is run by ``get()`` only, as in python-firestore."""
        return self._copy(_limit=_check_count("limit_to_last", count), _limit_to_last=True)

    def offset(self, num_to_skip: int) -> Any:
        """A query skipping the first ``num_to_skip`` results."""
        return self._copy(_offset=_check_count("offset", num_to_skip))

    def _cursor(self, document_fields: Any) -> Any:
        if isinstance(document_fields, DocumentSnapshot):
            if not document_fields.exists:
                raise ValueError("a cursor snapshot must be of an existing document")
            parent = getattr(document_fields.reference, "parent", None)
            if not self._all_descendants and getattr(parent, "_path", None) != self._parent._path:
                raise ValueError(
                    "a cursor snapshot must be of a document of the query's collection"
                )
            return document_fields
        if isinstance(document_fields, dict):
            return dict(document_fields)
        if isinstance(document_fields, (list, tuple)):
            return list(document_fields)
        raise TypeError("a cursor is a DocumentSnapshot, a dict or a list of values")

    def start_at(self, document_fields_or_snapshot: Any) -> Any:
        """A query starting at (including) a snapshot or values of the order's fields."""
        return self._copy(_start_at=(self._cursor(document_fields_or_snapshot), True))

    def start_after(self, document_fields_or_snapshot: Any) -> Any:
        """A query starting after a snapshot or values of the order's fields."""
        return self._copy(_start_at=(self._cursor(document_fields_or_snapshot), False))

    def end_at(self, document_fields_or_snapshot: Any) -> Any:
        """A query ending at (including) a snapshot or values of the order's fields."""
        return self._copy(_end_at=(self._cursor(document_fields_or_snapshot), False))

    def end_before(self, document_fields_or_snapshot: Any) -> Any:
        """A query ending before a snapshot or values of the order's fields."""
        return self._copy(_end_at=(self._cursor(document_fields_or_snapshot), True))

    # Serialisation.
    def _has_snapshot_cursor(self) -> bool:
        return any(
            c is not None and isinstance(c[0], DocumentSnapshot)
            for c in (self._start_at, self._end_at)
        )

    def _normalize_orders(self) -> list[tuple[str, str]]:
        """The explicit orders; with a snapshot cursor, as Firestore completes them: the
        inequality fields not ordered yet, then ``__name__`` in the last order's direction."""
        orders = list(self._orders)
        if not self._has_snapshot_cursor():
            return orders
        ordered = {field for field, _ in orders}
        for field in sorted(set(_inequality_fields(list(self._filters))) - ordered):
            orders.append((field, self.ASCENDING))
            ordered.add(field)
        if DOCUMENT_ID not in ordered:
            orders.append((DOCUMENT_ID, orders[-1][1] if orders else self.ASCENDING))
        return orders

    def _cursor_values(self, cursor: Any, orders: list[tuple[str, str]]) -> list[Any]:
        fields = [field for field, _ in orders]
        if isinstance(cursor, DocumentSnapshot):
            values = []
            for field in fields:
                if field == DOCUMENT_ID:
                    values.append(cursor.reference)
                    continue
                try:
                    values.append(get_nested_value(field, cursor._data))
                except KeyError:
                    raise ValueError(
                        f"the cursor snapshot has no field {field!r} of the query's order"
                    ) from None
            return values
        if not fields:
            raise ValueError("a cursor of values needs an order_by()")
        if isinstance(cursor, dict):
            values = []
            for field in fields:
                try:
                    values.append(get_nested_value(field, cursor))
                except KeyError:
                    raise ValueError(
                        f"the cursor has no field {field!r} of the query's order"
                    ) from None
        else:
            if len(cursor) > len(fields):
                raise ValueError(
                    f"a cursor of {len(cursor)} values for a query ordered by {len(fields)} fields"
                )
            values = list(cursor)
        for i, field in enumerate(fields[: len(values)]):
            if field == DOCUMENT_ID and isinstance(values[i], str):
                if "/" in values[i] and not self._all_descendants:
                    raise ValueError("a __name__ cursor value of a collection is a document ID")
                values[i] = (
                    self._client.document(values[i])
                    if self._all_descendants
                    else self._parent.document(values[i])
                )
        return values

    def _to_json(self) -> dict[str, Any]:
        """The query's ``structuredQuery`` (docs/query.md)."""
        path = self._parent._path
        query: dict[str, Any] = {}
        if len(path) > 1:
            query["parent"] = "/".join(path[:-1])
        source: dict[str, Any] = {"collectionId": path[-1]}
        if self._all_descendants:
            source["allDescendants"] = True
        query["from"] = [source]
        if self._projection is not None:
            query["select"] = {"fields": [{"fieldPath": f} for f in self._projection]}
        if len(self._filters) == 1:
            query["where"] = self._filters[0]._to_json()
        elif self._filters:
            query["where"] = And(list(self._filters))._to_json()
        orders = self._normalize_orders()
        if orders:
            query["orderBy"] = [
                {"field": {"fieldPath": field}, "direction": direction}
                for field, direction in orders
            ]
        for member, cursor in (("startAt", self._start_at), ("endAt", self._end_at)):
            if cursor is not None:
                values = self._cursor_values(cursor[0], orders)
                query[member] = {
                    "values": [_values.encode_value(v) for v in values],
                    "before": cursor[1],
                }
        if self._offset is not None:
            query["offset"] = self._offset
        if self._limit is not None:
            query["limitToLast" if self._limit_to_last else "limit"] = self._limit
        return query

    def _check_limit_to_last(self) -> None:
        if self._limit_to_last and not self._orders:
            raise ValueError("limit_to_last() needs at least one order_by()")

    def _run_query_body(self) -> dict[str, Any]:
        self._check_limit_to_last()
        return {"structuredQuery": self._to_json()}

    def _listen_target(self) -> dict[str, Any]:
        """The query's ``:listen`` target (docs/listen.md), for the listeners."""
        return self._run_query_body()

    def _snapshots_of(self, rows: list[Any]) -> list[DocumentSnapshot]:
        return [self._client._snapshot(None, row) for row in rows]

    # Aggregations (built here, run by the sync/async aggregation classes).
    def _aggregation_query(self) -> Any:
        raise NotImplementedError

    def count(self, alias: str | None = None) -> Any:
        """An aggregation query counting the results (``get()`` returns
        ``[[AggregationResult]]``)."""
        return self._aggregation_query().count(alias=alias)

    def sum(self, field_ref: str | FieldPath, alias: str | None = None) -> Any:
        """An aggregation query summing ``field_ref`` over the results."""
        return self._aggregation_query().sum(field_ref, alias=alias)

    def avg(self, field_ref: str | FieldPath, alias: str | None = None) -> Any:
        """An aggregation query averaging ``field_ref`` over the results."""
        return self._aggregation_query().avg(field_ref, alias=alias)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BaseQuery):
            return NotImplemented
        try:
            return self._client is other._client and self._to_json() == other._to_json()
        except ValueError:
            return self is other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        try:
            body: Any = self._to_json()
        except (ValueError, TypeError) as exc:
            body = f"invalid: {exc}"
        return f"<{type(self).__name__} {body!r}>"


def _check_count(name: str, count: Any) -> int:
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError(f"{name} takes an int, got {type(count).__name__}")
    if count < 0 or count > 2147483647:
        raise ValueError(f"{name} must be between 0 and 2147483647, got {count}")
    return count
