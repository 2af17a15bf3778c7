"""The one terminal sanitiser: hostile strings become visible and bounded, plain text stays."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from specwatch.core.sanitize import BIDI_CONTROLS, ELLIPSIS, sanitize_line, sanitize_text

HOSTILE = "model\x1b]0;TITLE\x07\x1b[2J\x9b31m\u202eevil\x00end"


def _unsafe(ch: str) -> bool:
    return ch in BIDI_CONTROLS or unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp")


def test_escape_sequences_are_made_visible_not_acted_on() -> None:
    out = sanitize_line(HOSTILE)
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert out == "model\\x1b]0;TITLE\\x07\\x1b[2J\\x9b31m\\u202eevil\\x00end"


def test_one_line_turns_breaks_and_tabs_into_spaces() -> None:
    assert sanitize_line("a\r\nb\nc\rd\te\u2028f") == "a b c d e f"


def test_multi_line_keeps_newlines_and_normalises_carriage_returns() -> None:
    assert sanitize_text("a\r\nb\rc\n\td\x1b[2J") == "a\nb\nc\n    d\\x1b[2J"


def test_multi_line_bounds_the_line_count() -> None:
    assert sanitize_text("1\n2\n3\n4", max_lines=2) == "1\n2" + ELLIPSIS


def test_length_is_bounded_with_an_ellipsis() -> None:
    assert sanitize_line("x" * 300, limit=10) == "x" * 9 + ELLIPSIS
    out = sanitize_line("\x1b" * 300, limit=10)
    assert len(out) == 10 and out.endswith(ELLIPSIS)


def test_bidi_overrides_are_neutralised() -> None:
    for ch in BIDI_CONTROLS:
        assert ch not in sanitize_line(f"abc{ch}def")
        assert ch not in sanitize_text(f"abc{ch}def")


@given(st.text(), st.integers(min_value=1, max_value=500))
def test_one_line_never_contains_a_control_and_is_bounded(text: str, limit: int) -> None:
    out = sanitize_line(text, limit=limit)
    assert len(out) <= limit
    assert not any(_unsafe(ch) for ch in out)


@given(st.text(), st.integers(min_value=1, max_value=500))
def test_multi_line_only_keeps_newlines_and_is_bounded(text: str, limit: int) -> None:
    out = sanitize_text(text, limit=limit)
    assert len(out) <= limit
    assert not any(_unsafe(ch) for ch in out if ch != "\n")


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=200))
def test_plain_ascii_is_unchanged(text: str) -> None:
    assert sanitize_line(text) == text
    assert sanitize_text(text) == text
