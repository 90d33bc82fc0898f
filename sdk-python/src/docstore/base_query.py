"""Queries: the immutable builder (filled by the query work).

Interface the rest of the SDK relies on: ``BaseQuery(parent, *, all_descendants=False)`` where
``parent`` is a collection reference (``parent._client``, ``parent._path``, ``parent.id``); a
CollectionReference is a query whose parent is itself.
"""

from __future__ import annotations

from typing import Any


class BaseQuery:
    """A query over a collection (or, with ``all_descendants``, a collection group)."""

    ASCENDING = "ASCENDING"
    DESCENDING = "DESCENDING"

    def __init__(self, parent: Any, *, all_descendants: bool = False) -> None:
        self._parent = parent
        self._all_descendants = all_descendants
