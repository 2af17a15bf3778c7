"""Issue 22: ``probe``'s TTFT is the server's, give or take the HTTP path on this machine.

Anything of ours in the path (identity work inside the stream, Nagle and delayed ACKs, a first
chunk held back, a connection opened for the stream) would add to every probe; scheduling on a
loaded machine adds to some. So the least gap over several probes is held to the 10 ms the issue
asks for, and the median is reported when the test fails.
"""

from __future__ import annotations

import gc
import statistics
from typing import Any

import pytest

from specwatch.core.server import StreamResult
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.probe import probe
from specwatch.sources.stream import stream_completion
from tests.test_probe import real_time_sim

PROBES = 5
LIMIT_S = 0.010


async def test_probe_ttft_is_within_10_ms_of_the_servers() -> None:
    gaps: list[float] = []
    with real_time_sim("sglang") as (world, url):
        endpoint = parse_endpoint(url, env={})
        for _ in range(PROBES):
            result = await probe(endpoint, max_tokens=8, read_gpus=False)
            assert result.stream is not None and result.stream.ttft_s is not None
            server = world.truth.requests()[-1].ttft_s
            gaps.append(result.stream.ttft_s - server)
    assert min(gaps) < LIMIT_S, (
        f"least gap {min(gaps) * 1e3:.1f} ms, median {statistics.median(gaps) * 1e3:.1f} ms"
    )
    assert min(gaps) >= 0.0  # the client cannot see the first token before the server made it


async def test_the_young_objects_of_the_first_scrape_are_collected_before_the_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a young collection came due while the request was written, inside the measured TTFT, in
    # every probe (3.5-26 ms of wall time on this loaded 2-core machine): the probe collects
    # what detection and the first scrape left before its clock starts
    young: list[int] = []
    real = stream_completion

    async def counting(*args: Any, **kw: Any) -> StreamResult:
        young.append(gc.get_count()[0])
        return await real(*args, **kw)

    monkeypatch.setattr("specwatch.sources.probe.stream_completion", counting)
    with real_time_sim("sglang") as (_, url):
        result = await probe(parse_endpoint(url, env={}), max_tokens=8, read_gpus=False)
    assert result.stream is not None and result.stream.error is None
    assert len(young) == 1 and young[0] < 100, young
