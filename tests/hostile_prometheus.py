"""A hostile Prometheus HTTP API: the answers of ``tests.hostile``'s ``prom-*`` cases.

Pure: :func:`prometheus_answer` turns one request (path and query) into a status, headers and
a body, so tests can serve it through ``httpx.MockTransport`` and the hostile server over a
socket. Apart from its fault, each case answers like a Prometheus scraping one vLLM server and
its node's dcgm-exporter, so the fleet gets as far as the fault.

Cases:
    prom-labels:  escapes, a bidi override and 10,000-character values in the ``instance``,
                  ``job``, ``model_name``, ``Hostname`` and ``modelName`` labels, beside one
                  good server; plus series with a ``[`` in ``instance``, a non-string label
                  value and a non-object ``metric``
    prom-values:  NaN, Inf, ``-1e308`` and text where numbers belong
    prom-type:    a ``matrix`` where a vector was asked for
    prom-error:   ``status: "error"`` with a hostile 10,000-character error text
    prom-gzip:    every answer a gzip bomb (1 GB of zeros, a few MB on the wire)
    prom-series:  100,000 server series
"""

from __future__ import annotations

import functools
import json
import zlib
from collections.abc import Mapping
from typing import Any

HOSTILE = "\x1b]0;PWNED\x07\x1b[2J\x1b[H\x9b31m\u202e"
"""An OSC title change, a screen wipe, cursor home, a C1 CSI and a bidi override."""
LONG = HOSTILE + "A" * 10_000
PROMETHEUS_CASES = (
    "prom-labels",
    "prom-values",
    "prom-type",
    "prom-error",
    "prom-gzip",
    "prom-series",
)
BOMB_BYTES = 1 << 30
GOOD = "good-node:8000"


def _vllm(instance: str, job: str = "vllm", model: str = "m", value: Any = "1") -> dict[str, Any]:
    labels = {"__name__": "vllm:num_requests_running", "instance": instance, "job": job}
    return {"metric": {**labels, "model_name": model}, "value": [1700000000.0, value]}


def _rate(instance: str, field: str, value: Any) -> dict[str, Any]:
    labels = {"instance": instance, "job": "vllm", "specwatch_field": field}
    return {"metric": labels, "value": [1700000000.0, value]}


def _dcgm(hostname: str, model: str, value: Any = "1500") -> dict[str, Any]:
    labels = {
        "__name__": "DCGM_FI_DEV_SM_CLOCK",
        "instance": "good-node:9400",
        "job": "dcgm",
        "gpu": "0",
        "UUID": "GPU-" + hostname[:8].encode("unicode_escape").decode(),
        "Hostname": hostname,
        "modelName": model,
    }
    return {"metric": labels, "value": [1700000000.0, value]}


def _series(case: str, query: str) -> list[Any]:
    gpus = query.startswith('{__name__=~"DCGM')
    rates = "label_replace" in query
    if case == "prom-labels":
        if gpus:
            return [_dcgm("good-node", "H100"), _dcgm(LONG, LONG)]
        if rates:
            return [_rate(GOOD, "vllm:gen", "100"), _rate(LONG, "vllm:gen", "50")]
        return [
            _vllm(GOOD),
            _vllm(LONG, job=LONG, model=LONG),
            _vllm("bad[host]:8000"),
            {"metric": {"__name__": "vllm:num_requests_running", "instance": 7}, "value": [0, "1"]},
            {"metric": ["not", "an", "object"], "value": [0, "1"]},
            "not a series",
        ]
    if case == "prom-values":
        if gpus:
            return [_dcgm("good-node", "H100", "-1e308"), _dcgm("n2", "H100", "NaN")]
        if rates:
            return [_rate(GOOD, "vllm:gen", "+Inf"), _rate("n2:8000", "vllm:gen", "lots")]
        return [_vllm(GOOD, value="NaN"), _vllm("n2:8000", value=[1, 2])]
    if case == "prom-series":
        if gpus or rates:
            return []
        return [_vllm(f"node-{i}:8000") for i in range(100_000)]
    return [_vllm(GOOD)]


def prometheus_answer(
    case: str, path: str, form: Mapping[str, str]
) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body a hostile Prometheus sends for one API request."""
    if case == "prom-gzip":
        return 200, {"Content-Encoding": "gzip", "Content-Type": "application/json"}, gzip_bomb()
    if path.endswith("/api/v1/targets"):
        return 200, {}, json.dumps({"status": "success", "data": {"activeTargets": []}}).encode()
    if case == "prom-error":
        doc: dict[str, Any] = {"status": "error", "errorType": "bad_data", "error": LONG}
        return 400, {}, json.dumps(doc).encode()
    kind = "matrix" if case == "prom-type" else "vector"
    result = _series(case, form.get("query", ""))
    doc = {"status": "success", "data": {"resultType": kind, "result": result}}
    return 200, {"Content-Type": "application/json"}, json.dumps(doc).encode()


@functools.cache
def gzip_bomb(size: int = BOMB_BYTES) -> bytes:
    """``size`` zero bytes (a multiple of 1 MiB), gzip-compressed: about a thousandth of
    ``size`` on the wire, built in well under a second.

    After a full flush the compressor starts afresh, so every further MiB of zeros compresses
    to the same bytes: one MiB is compressed and its block repeated.
    """
    chunk = bytes(1 << 20)
    count = max(1, size // len(chunk))
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = packer.compress(chunk) + packer.flush(zlib.Z_FULL_FLUSH)
    again = packer.compress(chunk) + packer.flush(zlib.Z_FULL_FLUSH)
    end = packer.flush()[:-8]  # the trailer is for two MiB: written below for all of them
    crc = 0
    crc_chunk = zlib.crc32(chunk)
    for _ in range(count):
        crc = zlib.crc32(chunk, crc) if crc else crc_chunk
    trailer = crc.to_bytes(4, "little") + (count * len(chunk) % (1 << 32)).to_bytes(4, "little")
    return first + again * (count - 1) + end + trailer


__all__ = ["HOSTILE", "LONG", "PROMETHEUS_CASES", "gzip_bomb", "prometheus_answer"]
