"""Notes from a server are sanitised the same way every time, remembered or not."""

from __future__ import annotations

from specwatch.core import sanitize
from specwatch.core.sanitize import FIELD_LIMIT, NOTE_LIMIT, clean_notes, sanitize_line

HOSTILE = {
    "error\x1b[31m": "boom\x07\nsecond line\r\x1b]0;title\x07",
    "plain": "nothing to clean",
    "long": "x" * 2000,
}


def _expected(notes: dict[str, str]) -> dict[str, str]:
    return {sanitize_line(k, FIELD_LIMIT): sanitize_line(v, NOTE_LIMIT) for k, v in notes.items()}


def test_notes_are_cleaned_alike_the_first_time_and_later() -> None:
    first = clean_notes(HOSTILE)
    assert first == _expected(HOSTILE)
    assert "\x1b" not in "".join(first) + "".join(first.values())
    assert len(first["long"]) <= NOTE_LIMIT
    assert clean_notes(HOSTILE) == first
    assert list(clean_notes(HOSTILE)) == list(first)


def test_remembered_notes_are_bounded() -> None:
    limit = sanitize._clean_pair.cache_info().maxsize
    assert limit is not None
    notes = {f"k{i}": f"v{i}\x07" for i in range(limit + 10)}
    assert clean_notes(notes) == _expected(notes)
    assert sanitize._clean_pair.cache_info().currsize <= limit
    assert clean_notes(notes) == _expected(notes)
