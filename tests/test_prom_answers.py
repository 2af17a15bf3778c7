"""A Prometheus answer that is not JSON is one clear line, never a crash; a big good one is
parsed (off the event loop) into the same samples; and the labels' fast check changes nothing."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specwatch.core.sanitize import LABEL_LIMIT, clean_labels, sanitize_line
from specwatch.sources.prometheus.api import (
    OFF_LOOP_BYTES,
    PrometheusClient,
    PrometheusError,
    prometheus_endpoint,
)

HOSTILE = [
    b'{"status": "success", "data": ["\xff"]}',  # not UTF-8
    b"[" * 100_000,  # nested past any parser's depth
    b'{"status": "success", "data": {"a": NaN}}',  # NaN is not JSON
    b"[1e400]",  # overflows a double
    b"\xef\xbb\xbf[1]",  # a byte-order mark
    b"<html><body>\x1b[2J502 Bad Gateway</body></html>",
    b"",
]


def _client(body: bytes, status: int = 200) -> PrometheusClient:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body)

    return PrometheusClient(prometheus_endpoint("prom"), transport=httpx.MockTransport(handler))


@pytest.mark.parametrize("body", HOSTILE)
async def test_an_answer_that_is_not_json_is_one_line(body: bytes) -> None:
    async with _client(body) as c:
        with pytest.raises(PrometheusError) as err:
            await c.query("up")
    said = str(err.value)
    assert err.value.kind == "garbage"
    assert said == "http://prom:9090/api/v1/query: the answer is not JSON"
    assert "\n" not in said and "\x1b" not in said


async def test_an_error_page_says_its_status_in_one_bounded_line() -> None:
    async with _client(b"<html>\x1b[2J" + b"upstream down " * 10_000 + b"</html>", 502) as c:
        with pytest.raises(PrometheusError) as err:
            await c.query("up")
    said = str(err.value)
    assert err.value.kind == "http" and err.value.status == 502 and "502" in said
    assert "\n" not in said and "\x1b" not in said and len(said) < 1000


@pytest.mark.parametrize("series", [3, 20_000])
async def test_a_good_answer_is_parsed_small_or_big(series: int) -> None:
    doc = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"instance": f"h{i}:8000", "gpu": "0"}, "value": [1.5, str(i)]}
                for i in range(series)
            ],
        },
    }
    body = orjson.dumps(doc)
    assert (len(body) > OFF_LOOP_BYTES) == (series > 3)  # both paths: on and off the loop
    async with _client(body) as c:
        got = await c.query("up")
    assert [s.value for s in got] == [float(i) for i in range(series)]
    assert got[-1].labels == {"instance": f"h{series - 1}:8000", "gpu": "0"}


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
