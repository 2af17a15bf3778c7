"""The small read-only requests detection makes: JSON at a path, one ``/metrics`` scrape.

Also the redaction of launch arguments a server reports about itself. None of these makes the
server do model work.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


async def scrape_metrics(client: ServerClient) -> tuple[int, Scrape | None, str]:
    """``(status, parsed body or None, one-line detail)`` of ``GET /metrics``."""
    try:
        response = await client.get("/metrics", check=False, limit=METRICS_LIMIT_BYTES)
    except ServerError as exc:
        return 0, None, str(exc)
    if response.status_code >= 400:
        return response.status_code, None, f"/metrics answered HTTP {response.status_code}"
    return response.status_code, parse_metrics(response.text), ""


def str_or_none(value: Any) -> str | None:
    """``str(value)``, with ``None`` and ``""`` as ``None``."""
    if value is None or value == "":
        return None
    return str(value)


__all__ = ["redact_launch_args", "scrape_metrics", "str_or_none", "try_json"]
