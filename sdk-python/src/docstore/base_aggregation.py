"""Aggregation queries without I/O (python-firestore's ``base_aggregation``).

``query.count()``, ``.sum(field)``, ``.avg(field)`` and ``query.aggregate(...)``... build an
aggregation query: the query's ``structuredQuery`` with an ``aggregations`` member
(docs/query.md); the server answers one row ``{"aggregation": {alias: value}}``.
"""

from __future__ import annotations

import datetime
from typing import Any

from docstore import _values
from docstore.field_path import FieldPath, to_field_path

MAX_AGGREGATIONS = 5


class AggregationResult:
    """One aggregate of a result: ``alias``, ``value`` and ``read_time`` (python-firestore's
    ``AggregationResult``; ``read_time`` is None: ``:runQuery`` reports none)."""

    def __init__(self, alias: str, value: Any, read_time: datetime.datetime | None = None) -> None:
        self.alias = alias
        self.value = value
        self.read_time = read_time

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AggregationResult):
            return NotImplemented
        return (self.alias, self.value, self.read_time) == (
            other.alias,
            other.value,
            other.read_time,
        )

    def __repr__(self) -> str:
        return f"<AggregationResult alias={self.alias!r} value={self.value!r}>"


class BaseAggregation:
    """One aggregate of an aggregation query."""

    def __init__(self, alias: str | None = None) -> None:
        if alias is not None and (not isinstance(alias, str) or not alias):
            raise ValueError("an aggregation alias must be a non-empty str")
        self.alias = alias

    def _body(self) -> dict[str, Any]:
        raise NotImplementedError

    def _to_json(self) -> dict[str, Any]:
        out = self._body()
        if self.alias is not None:
            out["alias"] = self.alias
        return out


class CountAggregation(BaseAggregation):
    """``count(*)``."""

    def _body(self) -> dict[str, Any]:
        return {"count": {}}


class _FieldAggregation(BaseAggregation):
    _kind = ""

    def __init__(self, field_ref: str | FieldPath, alias: str | None = None) -> None:
        super().__init__(alias)
        self.field_ref = to_field_path(field_ref).to_api_repr()

    def _body(self) -> dict[str, Any]:
        return {self._kind: {"field": {"fieldPath": self.field_ref}}}


class SumAggregation(_FieldAggregation):
    """``sum(field)``: an int while every value is an int, else a float."""

    _kind = "sum"


class AvgAggregation(_FieldAggregation):
    """``avg(field)``: a float, None when no document has a numeric value."""

    _kind = "avg"


class BaseAggregationQuery:
    """Aggregates over a query's results; ``count``/``sum``/``avg`` add one and return the
    aggregation query itself, as python-firestore does."""

    def __init__(self, nested_query: Any) -> None:
        self._nested_query = nested_query
        self._aggregations: list[BaseAggregation] = []

    def _add(self, aggregation: BaseAggregation) -> Any:
        if len(self._aggregations) >= MAX_AGGREGATIONS:
            raise ValueError(f"at most {MAX_AGGREGATIONS} aggregations in one query")
        self._aggregations.append(aggregation)
        return self

    def count(self, alias: str | None = None) -> Any:
        """Add a count of the results."""
        return self._add(CountAggregation(alias=alias))

    def sum(self, field_ref: str | FieldPath, alias: str | None = None) -> Any:
        """Add the sum of ``field_ref``."""
        return self._add(SumAggregation(field_ref, alias=alias))

    def avg(self, field_ref: str | FieldPath, alias: str | None = None) -> Any:
        """Add the average of ``field_ref``."""
        return self._add(AvgAggregation(field_ref, alias=alias))

    def add_aggregation(self, aggregation: BaseAggregation) -> None:
        """Add an aggregate (a CountAggregation, SumAggregation or AvgAggregation)."""
        if not isinstance(aggregation, BaseAggregation):
            raise TypeError(f"not an aggregation: {aggregation!r}")
        self._add(aggregation)

    def add_aggregations(self, aggregations: list[BaseAggregation]) -> None:
        """Add several aggregates."""
        for aggregation in aggregations:
            self.add_aggregation(aggregation)

    def _to_json(self) -> dict[str, Any]:
        if not self._aggregations:
            raise ValueError("an aggregation query needs at least one aggregation")
        query = self._nested_query._to_json()
        query["aggregations"] = [a._to_json() for a in self._aggregations]
        return query

    def _run_query_body(self) -> dict[str, Any]:
        self._nested_query._check_limit_to_last()
        return {"structuredQuery": self._to_json()}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {[a._to_json() for a in self._aggregations]!r}>"

    def _listen_target(self) -> dict[str, Any]:
        """The aggregation query's ``:listen`` target (docs/listen.md), for the listeners."""
        return self._run_query_body()

    def _listen_results(
        self, values: Any, read_time: datetime.datetime | None
    ) -> list[list[AggregationResult]]:
        """What ``get()`` returns, made of a live aggregation row ``{alias: value}``."""
        results = self._results_of({"aggregation": values})
        for result in results:
            result.read_time = read_time
        return [results]

    def _results_of(self, row: Any) -> list[AggregationResult]:
        return results_of_row(row, self._client, [a.alias for a in self._aggregations])

    @property
    def _client(self) -> Any:
        return self._nested_query._client


def results_of_row(
    row: Any, client: Any, aliases: list[str | None] | None
) -> list[AggregationResult]:
    """The AggregationResults of a ``{"aggregation": {alias: value}}`` row, in the order of
    ``aliases`` (unaliased ones take the server's ``field_N`` names in order); all of the row's
    aliases in their order when ``aliases`` is None."""
    if not isinstance(row, dict) or not isinstance(row.get("aggregation"), dict):
        raise ValueError(f"not an aggregation row: {row!r}")
    values = row["aggregation"]
    if aliases is None:
        names = list(values)
    else:
        given = {a for a in aliases if a is not None}
        generated = iter(sorted((k for k in values if k not in given), key=_field_number))
        names = [a if a is not None else next(generated) for a in aliases]
    return [AggregationResult(name, _values.decode_value(values[name], client)) for name in names]


def _field_number(name: str) -> tuple[int, str]:
    suffix = name.rsplit("_", 1)[-1]
    return (int(suffix), name) if suffix.isdigit() else (1 << 62, name)
