"""A small client for the Prometheus HTTP API (the one Grafana uses).

Each request has a wall-clock deadline and a body size limit, so a slow or huge answer from a
large Prometheus (or a Thanos/Mimir front end) cannot stall or swamp the monitor. Every request
is counted in :attr:`PrometheusClient.requests`, so callers can prove how many queries a refresh
cost. Requests go through :class:`ServerClient` (its deadline, size limit and one-line errors).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import orjson

from specwatch.core.sanitize import LABEL_LIMIT, clean_labels, sanitize_line
from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.endpoint import Endpoint, parse_endpoint
from specwatch.sources.http.server_errors import ServerError

DEFAULT_PORT = 9090
MAX_BODY_BYTES = 32 * 1024 * 1024
"""Largest answer read; a bigger one is an error (narrow with a matcher)."""
MAX_RANGE_POINTS = 11_000
MAX_SERIES = 100_000
CUT_WHY = f"past the first {MAX_SERIES} of one answer (narrow it with a label matcher)"
"""Why the series of an answer beyond :data:`MAX_SERIES` were left out."""
"""Series taken from one answer (10,000 servers with ten series each); the rest are counted in
the one line of series left out."""
OFF_LOOP_BYTES = 256 * 1024
OFF_LOOP_ITEMS = 2_000
"""Answers bigger than these are decoded on a worker thread, not the event loop's."""
"""Prometheus's own per-series limit on ``query_range`` points."""
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_UNIT_S["y"] = 365 * 86400.0


def prometheus_endpoint(text: str, api_key: str | None = None) -> Endpoint:
    """Parse ``--prometheus``: a bare host means ``http://host:9090``.

    The environment's server keys (``OPENAI_API_KEY``...) are never sent to Prometheus.

    Raises:
        ValueError: One line saying what is wrong with the address.
    """
    raw = text.strip()
    if raw and "://" not in raw:
        try:
            port = urlsplit("http://" + raw).port
        except ValueError:
            port = 0  # parse_endpoint says what is wrong
        if port is None:
            host, slash, rest = raw.partition("/")
            raw = f"{host}:{DEFAULT_PORT}{slash}{rest}"
    return parse_endpoint(raw, api_key, env={})


def parse_duration(text: str) -> float | None:
    """Seconds of a Prometheus duration (``"15s"``, ``"1m30s"``); ``None`` if not one."""
    parts = _DURATION.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


@dataclass(frozen=True, slots=True)
class VectorSample:
    """One series of an instant-query answer."""

    labels: Mapping[str, str]
    t: float
    """Unix seconds of the evaluation."""
    value: float


@dataclass(frozen=True, slots=True)
class RangeSeries:
    """One series of a range answer (``query_range``, or an instant query of a range vector)."""

    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]
    """``(unix seconds, value)`` in time order."""


@dataclass(frozen=True, slots=True)
class Target:
    """One active scrape target."""

    labels: Mapping[str, str]
    scrape_url: str
    scrape_interval_s: float | None
    health: str
    """``"up"``, ``"down"`` or ``"unknown"``."""
    last_error: str = ""


class PrometheusError(ServerError):
    """Prometheus could not be reached, answered an error, or the answer was too big."""


def _number(text: Any) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


class PrometheusClient:
    """Async client for one Prometheus (or anything answering its HTTP API).

    Args:
        endpoint: From :func:`prometheus_endpoint`.
        deadline_s: Wall-clock limit of each request, connect to last byte.
        max_body_bytes: Largest answer read.
        transport: For tests (``httpx.MockTransport``).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        deadline_s: float = 5.0,
        max_body_bytes: int = MAX_BODY_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.deadline_s = deadline_s
        self.max_body_bytes = max_body_bytes
        self._server = ServerClient(endpoint, timeout_s=deadline_s, transport=transport)
        self.requests = 0
        """API requests sent so far (queries, range queries and target lists)."""
        self.skipped: dict[str, int] = {}
        """Why series were left out since :meth:`take_skipped` -> how many."""

    def skip(self, why: str) -> None:
        """Count one series left out because ``why`` (a short phrase)."""
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def take_skipped(self) -> str | None:
        """One line naming the series left out since the last call (``None``: none)."""
        if not self.skipped:
            return None
        total = sum(self.skipped.values())
        parts = "; ".join(f"{n} {why}" for why, n in self.skipped.items())
        self.skipped = {}
        return sanitize_line(f"left out {total} unusable series: {parts}", 400)

    async def __aenter__(self) -> PrometheusClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._server.aclose()

    async def query(self, expr: str, at: float | None = None) -> list[VectorSample]:
        """``/api/v1/query`` of an instant vector (or a scalar, as one unlabelled sample).

        Raises:
            PrometheusError: Unreachable, too slow, too big, or Prometheus said ``error``.
        """
        form = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        data = await self._call("/api/v1/query", form)
        kind = data.get("resultType")
        result = data.get("result")
        if kind == "scalar" and isinstance(result, list) and len(result) == 2:
            return [VectorSample({}, _number(result[0]), _number(result[1]))]
        if kind != "vector" or not isinstance(result, list):
            raise self._garbage("/api/v1/query", f"expected a vector, got {kind!r}")
        self._cap(result)
        if len(result) > OFF_LOOP_ITEMS:
            return await off_loop(self._vector, result)
        return self._vector(result)

    def _cap(self, result: list[Any]) -> None:
        """Cut ``result`` to :data:`MAX_SERIES`, counting what was left out."""
        extra = len(result) - MAX_SERIES
        if extra > 0:
            self.skipped[CUT_WHY] = self.skipped.get(CUT_WHY, 0) + extra
            del result[MAX_SERIES:]

    def _vector(self, result: list[Any]) -> list[VectorSample]:
        out: list[VectorSample] = []
        for i, item in enumerate(result):
            result[i] = None  # each item freed as it is taken: the answer is never held twice
            labels = self._labels(item)
            if labels is None:
                continue
            value = item.get("value")
            if not isinstance(value, list) or len(value) != 2:
                self.skip("without a [time, value] pair")
                continue
            out.append(VectorSample(labels, _number(value[0]), _number(value[1])))
        return out

    def _labels(self, item: Any) -> dict[str, str] | None:
        """The sanitised labels of one answer item; ``None`` (and counted) when unusable."""
        if not isinstance(item, dict):
            self.skip("not a series object")
            return None
        labels = clean_labels(item.get("metric") or {})
        if labels is None:
            self.skip("with a label that is not text")
        return labels

    async def query_matrix(self, expr: str, at: float | None = None) -> list[RangeSeries]:
        """``/api/v1/query`` of a range vector (``x[30s]``): the raw samples, as stored."""
        form = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        data = await self._call("/api/v1/query", form)
        return self._matrix("/api/v1/query", data)

    async def query_range(
        self,
        expr: str,
        start: float,
        end: float,
        step_s: float,
        max_points: int = MAX_RANGE_POINTS,
    ) -> list[RangeSeries]:
        """``/api/v1/query_range``; ``step_s`` grows so that a series has at most ``max_points``.

        Raises:
            PrometheusError: As :meth:`query`; ``ValueError`` for an empty or reversed range.
        """
        if not (end > start and step_s > 0):
            raise ValueError(f"bad range: start {start}, end {end}, step {step_s}")
        step = max(step_s, (end - start) / max(1, max_points - 1))
        form = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        data = await self._call("/api/v1/query_range", form)
        return self._matrix("/api/v1/query_range", data)

    async def targets(self) -> list[Target]:
        """``/api/v1/targets?state=active``."""
        data = await self._call("/api/v1/targets", {"state": "active"}, method="GET")
        out: list[Target] = []
        active = data.get("activeTargets")
        for item in active if isinstance(active, list) else []:
            labels = clean_labels(item.get("labels") or {}) if isinstance(item, dict) else None
            if labels is None:
                continue
            out.append(
                Target(
                    labels=labels,
                    scrape_url=sanitize_line(str(item.get("scrapeUrl") or ""), LABEL_LIMIT),
                    scrape_interval_s=parse_duration(str(item.get("scrapeInterval") or "")),
                    health=sanitize_line(str(item.get("health") or "unknown"), 20),
                    last_error=sanitize_line(str(item.get("lastError") or ""), 400),
                )
            )
        return out

    def _matrix(self, path: str, data: Mapping[str, Any]) -> list[RangeSeries]:
        if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
            raise self._garbage(path, f"expected a matrix, got {data.get('resultType')!r}")
        self._cap(data["result"])
        out: list[RangeSeries] = []
        for item in data["result"]:
            labels = self._labels(item)
            if labels is None:
                continue
            values = item.get("values") or ()
            if not isinstance(values, list) or not all(
                isinstance(p, list) and len(p) == 2 for p in values
            ):
                self.skip("without [time, value] pairs")
                continue
            out.append(RangeSeries(labels, tuple((_number(t), _number(v)) for t, v in values)))
        return out

    def _garbage(self, path: str, why: str) -> PrometheusError:
        url = self.endpoint.url(path)
        return PrometheusError(f"{url}: {why}", kind="garbage", url=url)

    async def _call(
        self, path: str, form: Mapping[str, str], method: str = "POST"
    ) -> Mapping[str, Any]:
        """One request under the deadline; the ``data`` of a ``success`` answer."""
        self.requests += 1
        url = self.endpoint.url(path)
        http = self._server.http
        if method == "POST":
            request = http.build_request("POST", path, data=dict(form))
        else:
            request = http.build_request("GET", path, params=dict(form))
        started = time.monotonic()
        try:
            response = await self._server.answer(
                request, path, limit=self.max_body_bytes, deadline_s=self.deadline_s
            )
        except ServerError as err:
            raise self._error(err, path, time.monotonic() - started) from None
        status, reason = response.status_code, response.reason_phrase
        answer = response.content
        del response  # the bytes go now, not after the parse
        try:
            # a big answer is parsed off the event loop: a screen may be drawn on it
            big = len(answer) > OFF_LOOP_BYTES
            doc = await off_loop(orjson.loads, answer) if big else orjson.loads(answer)
        except orjson.JSONDecodeError:
            if status >= 400:
                text = answer.decode("utf-8", "replace")
                said = self._server.status_error(status, reason, text, path)
                raise PrometheusError(str(said), kind="http", status=status, url=url) from None
            raise self._garbage(path, "the answer is not JSON") from None
        if not isinstance(doc, dict) or doc.get("status") != "success":
            detail = doc.get("error") if isinstance(doc, dict) else None
            kind = doc.get("errorType") if isinstance(doc, dict) else None
            message = f"{url}: HTTP {status} {kind or 'error'}: {detail or 'no error text'}"
            raise PrometheusError(sanitize_line(message, 400), kind="http", status=status, url=url)
        data = doc.get("data")
        if not isinstance(data, dict):
            raise self._garbage(path, "no data in the answer")
        return data

    def _error(self, err: ServerError, path: str, spent: float) -> PrometheusError:
        """``err`` in Prometheus's words: a narrower query helps with a big answer."""
        url = self.endpoint.url(path)
        if err.kind == "deadline":
            message = f"no answer from {url} within {self.deadline_s:g} s ({spent:.1f} s spent)"
            return PrometheusError(message, kind="hung", url=url)
        if err.kind == "too_large":
            message = (
                f"{url}: answer larger than {self.max_body_bytes} bytes; narrow it with a label"
                " matcher"
            )
            return PrometheusError(message, kind="garbage", url=url)
        return PrometheusError(str(err), kind=err.kind, url=err.url)


# Work that must not hold an event loop a screen is drawn on (a parse of a huge answer) runs on
# a daemon thread: unlike asyncio.to_thread (the loop's executor, whose threads the interpreter
# waits for at exit), it does not keep the process alive after `q`; work in flight is abandoned.
_T = TypeVar("_T")


async def off_loop(fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` on a daemon thread, awaited; its exception is raised here."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[_T] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if done.done():  # cancelled meanwhile
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)

    def work() -> None:
        try:
            value, error = fn(*args), None
        except BaseException as exc:  # handed to the awaiting task, raised there
            value, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=work, name="specwatch-off-loop", daemon=True).start()
    return await done


__all__ = [
    "DEFAULT_PORT",
    "MAX_BODY_BYTES",
    "MAX_RANGE_POINTS",
    "MAX_SERIES",
    "PrometheusClient",
    "PrometheusError",
    "RangeSeries",
    "Target",
    "VectorSample",
    "off_loop",
    "parse_duration",
    "prometheus_endpoint",
]
