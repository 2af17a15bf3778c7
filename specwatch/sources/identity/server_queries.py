"""The small read-only requests detection makes: JSON at a path, one ``/metrics`` scrape.

Also the redaction of launch arguments a server reports about itself. None of these makes the
server do model work.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from specwatch.core.redaction import WITHHELD, redact_value
from specwatch.sources.http.client import METRICS_LIMIT_BYTES, ServerClient
from specwatch.sources.http.server_errors import ServerError
from specwatch.sources.metrics.parse import parse_metrics
from specwatch.sources.metrics.prom import Scrape


def redact_launch_args(args: Mapping[str, Any], client: ServerClient) -> dict[str, Any]:
    """Launch arguments with the API key and every secret-named value withheld."""
    key = client.endpoint.api_key
    masked = _replace_key(args, key) if key else args
    out: dict[str, Any] = redact_value(masked)
    return out


def _replace_key(value: Any, key: str) -> Any:
    if isinstance(value, str):
        return value.replace(key, WITHHELD)
    if isinstance(value, Mapping):
        return {k: _replace_key(v, key) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_key(v, key) for v in value]
    return value


async def try_json(client: ServerClient, path: str) -> Any | None:
    """JSON at ``path``, or ``None`` on 404/405/501 or a non-JSON answer."""
    try:
        return await client.get_json(path)
    except ServerError as exc:
        if exc.kind == "garbage" or (exc.kind == "http" and exc.status in (404, 405, 501)):
            return None
        raise


def not_prometheus(path: str, text: str) -> str | None:
    """Why a metrics answer is not Prometheus text (a JSON body: TensorRT-LLM's ``/metrics``
    is a list of iteration stats that reading takes from other consumers), else ``None``."""
    head = text.lstrip()[:1]
    if head in ("[", "{") and _is_json(text):
        return (
            f"{path} answered JSON, not Prometheus text (TensorRT-LLM's iteration stats are "
            "drained on read): not read again"
        )
    return None


def _is_json(text: str) -> bool:
    # Random bytes can start with a bracket; only a body that parses is taken for JSON.
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


async def scrape_metrics(
    client: ServerClient, path: str = "/metrics"
) -> tuple[int, Scrape | None, str]:
    """``(status, parsed body or None, one-line detail)`` of ``GET path``; a body that is not
    Prometheus text is not parsed (see :func:`not_prometheus`)."""
    try:
        response = await client.get(path, check=False, limit=METRICS_LIMIT_BYTES)
    except ServerError as exc:
        return 0, None, str(exc)
    if response.status_code >= 400:
        return response.status_code, None, f"{path} answered HTTP {response.status_code}"
    text = response.text
    why = not_prometheus(path, text)
    if why is not None:
        return response.status_code, None, why
    return response.status_code, parse_metrics(text), ""


def str_or_none(value: Any) -> str | None:
    """``str(value)``, with ``None`` and ``""`` as ``None``."""
    if value is None or value == "":
        return None
    return str(value)


__all__ = ["not_prometheus", "redact_launch_args", "scrape_metrics", "str_or_none", "try_json"]
