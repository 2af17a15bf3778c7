"""The Prometheus answer decoder accepts exactly what orjson accepts and gives the same objects,
and parses a big answer in less memory (issue 28 item 8)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
