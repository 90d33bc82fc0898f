"""Field paths (python-firestore's ``field_path``): ``FieldPath("a", "b.c")`` and the dotted
text form with backticks (``a.`b.c```), the form the server reads (docs/http.md, PATCH)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

_SIMPLE = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")
_INVALID_UNQUOTED = re.compile(r"[~*/\[\]`]")


def _quote(part: str) -> str:
    if _SIMPLE.match(part):
        return part
    return "`" + part.replace("\\", "\\\\").replace("`", "\\`") + "`"


def split_field_path(path: str) -> list[str]:
    """The segments of a dotted field path with backtick quoting; ValueError when malformed
    (empty segment, unclosed backtick, stray characters)."""
    if not isinstance(path, str):
        raise TypeError(f"a field path is a str or FieldPath, not {type(path).__name__}")
    if path == "":
        raise ValueError("empty field path")
    parts: list[str] = []
    i = 0
    n = len(path)
    while True:
        if i < n and path[i] == "`":
            i += 1
            buf: list[str] = []
            while True:
                if i >= n:
                    raise ValueError(f"field path {path!r}: a backtick is not closed")
                c = path[i]
                if c == "\\":
                    if i + 1 >= n or path[i + 1] not in "`\\":
                        raise ValueError(f"field path {path!r}: bad escape")
                    buf.append(path[i + 1])
                    i += 2
                elif c == "`":
                    i += 1
                    break
                else:
                    buf.append(c)
                    i += 1
            part = "".join(buf)
            if part == "":
                raise ValueError(f"field path {path!r}: empty segment")
        else:
            j = i
            while j < n and path[j] != ".":
                j += 1
            part = path[i:j]
            if part == "":
                raise ValueError(f"field path {path!r}: empty segment")
            if not _SIMPLE.match(part):
                raise ValueError(
                    f"field path {path!r}: segment {part!r} must be quoted with backticks"
                )
            i = j
        parts.append(part)
        if i == n:
            return parts
        if path[i] != ".":
            raise ValueError(f"field path {path!r}: expected '.' after a quoted segment")
        i += 1
        if i == n:
            raise ValueError(f"field path {path!r}: empty segment")


class FieldPath:
    """A path to a field: ``FieldPath("address", "zip")``; each part a literal field name."""

    def __init__(self, *parts: str) -> None:
        if not parts:
            raise ValueError("a field path has at least one part")
        for part in parts:
            if not isinstance(part, str) or part == "":
                raise ValueError(f"field path parts are non-empty strings, got {part!r}")
        self.parts = tuple(parts)

    @classmethod
    def from_api_repr(cls, api_repr: str) -> FieldPath:
        """Parse the backtick-quoting text form (``a.`b c`.d``)."""
        return cls(*split_field_path(api_repr))

    @classmethod
    def from_string(cls, path_string: str) -> FieldPath:
        """Parse a user's dotted path: the text form, or else plain dotted names (which may
        hold characters other than letters, digits and _ but not ``~*/[]`` or backticks)."""
        try:
            return cls.from_api_repr(path_string)
        except ValueError:
            elements = path_string.split(".")
            for element in elements:
                if not element:
                    raise ValueError(f"field path {path_string!r}: empty segment") from None
                if _INVALID_UNQUOTED.search(element):
                    raise ValueError(
                        f"field path {path_string!r}: invalid characters in {element!r}"
                    ) from None
            return cls(*elements)

    @classmethod
    def document_id(cls) -> str:
        """The special path of a document's ID in queries (``__name__``)."""
        return "__name__"

    def to_api_repr(self) -> str:
        """The text form the server reads."""
        return ".".join(_quote(part) for part in self.parts)

    def eq_or_parent(self, other: FieldPath) -> bool:
        """Whether one of the two paths is a prefix of the other."""
        n = min(len(self.parts), len(other.parts))
        return self.parts[:n] == other.parts[:n]

    def lineage(self) -> set[FieldPath]:
        """The proper prefixes of this path."""
        return {FieldPath(*self.parts[:i]) for i in range(1, len(self.parts))}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldPath):
            return NotImplemented
        return self.parts == other.parts

    def __lt__(self, other: FieldPath) -> bool:
        return self.parts < other.parts

    def __hash__(self) -> int:
        return hash(self.parts)

    def __add__(self, other: FieldPath | str) -> FieldPath:
        if isinstance(other, FieldPath):
            return FieldPath(*self.parts, *other.parts)
        if isinstance(other, str):
            return FieldPath(*self.parts, *FieldPath.from_string(other).parts)
        return NotImplemented

    def __repr__(self) -> str:
        return "FieldPath({})".format(", ".join(repr(p) for p in self.parts))

    def __str__(self) -> str:
        return self.to_api_repr()


def to_field_path(value: str | FieldPath) -> FieldPath:
    """A user's field path (a dotted str or a FieldPath) as a FieldPath."""
    if isinstance(value, FieldPath):
        return value
    if isinstance(value, str):
        return FieldPath.from_string(value)
    raise TypeError(f"a field path is a str or FieldPath, not {type(value).__name__}")


def render_field_path(parts: Iterable[str]) -> str:
    """The text form of a list of field names."""
    return FieldPath(*parts).to_api_repr()


_MISSING = object()


def get_nested_value(field_path: str | FieldPath, data: dict[str, Any]) -> Any:
    """The value at ``field_path`` in ``data``; KeyError naming the path when absent (as
    python-firestore's ``DocumentSnapshot.get``)."""
    path = to_field_path(field_path)
    current: Any = data
    for i, part in enumerate(path.parts):
        if not isinstance(current, dict):
            raise KeyError(
                f"{render_field_path(path.parts[:i])} is not a map, so it has no field {part!r}"
            )
        current = current.get(part, _MISSING)
        if current is _MISSING:
            raise KeyError(f"no field {render_field_path(path.parts[: i + 1])!r} in the document")
    return current
