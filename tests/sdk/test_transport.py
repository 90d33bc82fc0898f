"""The streamed-array reader of docstore._http (the `:runQuery` and collection answers arrive in
chunks cut anywhere): every split of an answer gives the same items; a cut answer is
Unavailable; a final error item is its exception."""

from __future__ import annotations

import json

import pytest

from docstore import _http, exceptions

ANSWER = json.dumps(
    [
        {"path": "c/a", "data": {"s": 'x ], " {', "n": 12345, "f": -1.5e-7}},
        {"path": "c/b", "data": {"list": [1, [2, {}]], "u": "é😀"}},
        {"aggregation": {"count": 10}},
    ],
    ensure_ascii=False,
    indent=1,
)


def read(chunks):
    reader = _http._JsonArrayReader()
    items = []
    for chunk in chunks:
        items.extend(reader.feed(chunk))
    reader.finish()
    return items


def test_every_split_gives_the_same_items():
    whole = json.loads(ANSWER)
    assert read([ANSWER]) == whole
    assert read(list(ANSWER)) == whole
    for cut in range(1, len(ANSWER)):
        assert read([ANSWER[:cut], ANSWER[cut:]]) == whole, cut


def test_numbers_at_a_chunk_end_wait_for_their_end():
    assert read(["[1", "23, 4", "5]"]) == [123, 45]
    assert read(["[", "]"]) == []
    assert read([" \n[ ", " ] "]) == []


def test_a_cut_answer_is_unavailable():
    reader = _http._JsonArrayReader()
    assert reader.feed('[{"path": "c/a"}, {"pa') == [{"path": "c/a"}]
    with pytest.raises(exceptions.Unavailable):
        reader.finish()


def test_not_an_array_is_refused():
    with pytest.raises(ValueError):
        _http._JsonArrayReader().feed('{"code": "X"}')


def test_final_error_item_is_raised():
    item = {"error": {"code": "RESOURCE_EXHAUSTED", "message": "too many", "detail": None}}
    with pytest.raises(exceptions.ResourceExhausted, match="too many"):
        _http._check_item(item)
    assert _http._check_item({"path": "c/a"}) == {"path": "c/a"}
