"""The Prometheus answer decoder accepts exactly what orjson accepts and gives the same objects
(it parses a big answer in less memory: issue 28 item 8), and the labels' fast check changes
nothing."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specwatch.core.sanitize import LABEL_LIMIT, clean_labels, sanitize_line
from specwatch.sources.prometheus.decode import AnswerNotJson, as_text, loads

_FRAGMENTS = [
    "[", "]", "{", "}", ",", ":", " ", '"a"', '"b\\"c"', '"\\ud800"', '"\\ud83d\\ude00"',
    '"\\u0041"', '"\x01"', '"é"', "0", "-0", "01", "1.5", ".5", "1e400", "-1e400", "1e-400",
    "1E5", "18446744073709551615", "18446744073709551616", "-9223372036854775808",
    "-9223372036854775809", "1" * 30, "1" * 400, "NaN", "Infinity", "-Infinity", "true",
    "null", "tru",
]  # fmt: skip


def _outcome(parse: Any, body: bytes) -> str:
    try:
        return repr(parse(body))
    except (orjson.JSONDecodeError, AnswerNotJson):
        return "refused"


@st.composite
def _answers(draw: st.DrawFn) -> bytes:
    if draw(st.booleans()):
        doc = draw(
            st.recursive(
                st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                lambda inner: (
                    st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=4)
                ),
                max_leaves=12,
            )
        )
        return json.dumps(doc).encode()  # NaN and Infinity included, as Python writes them
    return "".join(draw(st.lists(st.sampled_from(_FRAGMENTS), max_size=12))).encode()


@settings(max_examples=600, deadline=None)
@given(_answers())
def test_the_decoder_agrees_with_orjson(body: bytes) -> None:
    assert _outcome(lambda b: loads(as_text(b)), body) == _outcome(orjson.loads, body)


@pytest.mark.parametrize(
    "body", [b'["\xff"]', b"[" * 100_000, b"\xef\xbb\xbf[1]", b'{"a": NaN}', b"[1e400]"]
)
def test_what_orjson_refuses_is_refused(body: bytes) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(body)
    with pytest.raises(AnswerNotJson):
        loads(as_text(body))


def _clean_labels_one_by_one(raw: dict[Any, Any], limit: int = LABEL_LIMIT) -> object:
    out = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not isinstance(value, str):
            return None
        out[sanitize_line(name, limit)] = sanitize_line(value, limit)
    return out


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(
        st.text(alphabet="ab\x1b\u202e\n", max_size=5) | st.integers(),
        st.text(alphabet="xy\x07\x9b\t", max_size=300) | st.none(),
        max_size=4,
    )
)
def test_clean_labels_is_each_label_through_sanitize_line(raw: dict[Any, Any]) -> None:
    """The whole-series check of ``clean_labels`` changes nothing: every name and value still
    goes through ``sanitize_line`` (a series with a label that is not text: ``None``)."""
    assert clean_labels(raw) == _clean_labels_one_by_one(raw)
