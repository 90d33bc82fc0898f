"""Sentinels and field transforms (python-firestore's ``transforms``): ``SERVER_TIMESTAMP``,
``DELETE_FIELD``, ``Increment``, ``Maximum``, ``Minimum``, ``ArrayUnion``, ``ArrayRemove``.

Each becomes a typed JSON transform tag in a write (docs/typed-json.md; docs/http.md, PATCH)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class Sentinel:
    """A marker value with a name (python-firestore's ``transforms.Sentinel``)."""

    __slots__ = ("description", "_tag")

    def __init__(self, description: str, tag: str) -> None:
        self.description = description
        self._tag = tag

    def __repr__(self) -> str:
        return f"Sentinel: {self.description}"


DELETE_FIELD = Sentinel("Value used to delete a field in a document.", "$delete")
SERVER_TIMESTAMP = Sentinel(
    "Value used to set a document field to the server timestamp.", "$serverTimestamp"
)


class _ValueList:
    """A transform whose operand is a list of values."""

    _tag = ""

    def __init__(self, values: Sequence[Any]) -> None:
        if not isinstance(values, (list, tuple)):
            raise ValueError(f"{type(self).__name__} takes a list or tuple of values")
        if len(values) == 0:
            raise ValueError(f"{type(self).__name__} takes at least one value")
        self._values = list(values)

    @property
    def values(self) -> list[Any]:
        """The values to add or remove."""
        return self._values

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return self._values == other._values


class ArrayUnion(_ValueList):
    """Add each value to the array field unless it is already there."""

    _tag = "$arrayUnion"


class ArrayRemove(_ValueList):
    """Remove every occurrence of each value from the array field."""

    _tag = "$arrayRemove"


class _NumericValue:
    """A transform whose operand is a number."""

    _tag = ""

    def __init__(self, value: int | float) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{type(self).__name__} takes an int or a float")
        self._value = value

    @property
    def value(self) -> int | float:
        """The operand."""
        return self._value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return self._value == other._value


class Increment(_NumericValue):
    """Add the operand to the field (a missing or non-numeric field becomes the operand)."""

    _tag = "$increment"


class Maximum(_NumericValue):
    """Set the field to the larger of its value and the operand."""

    _tag = "$max"


class Minimum(_NumericValue):
    """Set the field to the smaller of its value and the operand."""

    _tag = "$min"
