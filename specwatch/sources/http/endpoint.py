"""Where the server is, and the API key to reach it (which never leaves this object in text)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from specwatch.core.redaction import WITHHELD, redact_text
from specwatch.core.sanitize import sanitize_line

EXPECTED = (
    "expected localhost:8000, host:port, http://host:port or https://host:port "
    "(a llama-server router's model: host:port?model=NAME)"
)
MAX_MODEL_NAME = 256
"""Characters of a model name given in the address (``?model=NAME``)."""
KEY_ENV_VARS = ("SPECWATCH_API_KEY", "OPENAI_API_KEY")
"""Environment variables read for the API key, in order, when none is given."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A server address plus an optional Bearer token.

    ``repr`` and ``str`` never show the key; use ``headers()`` to send it.
    """

    base_url: str
    """Scheme, host, port and optional path prefix, without a trailing slash."""
    api_key: str | None = field(default=None, repr=False)
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    """``(user, password)`` sent as HTTP basic auth (a dcgm-exporter's ``user:pass@``)."""
    named: bool = True
    """The user named this address (``--url``); ``False`` for one only a Prometheus label
    names, which is never sent a key."""
    model: str | None = None
    """The model a llama-server router is to forward the reads to (``host:port?model=NAME``);
    ``None``: the first it has loaded. Other servers serve one model and do not read it."""

    def headers(self) -> dict[str, str]:
        """HTTP headers that authenticate a request (empty without a key)."""
        if not self.api_key:
            return {}
        return {"Authorization": f"Bearer {self.api_key}"}

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` on this server."""
        return self.base_url + ("" if path.startswith("/") else "/") + path

    def __str__(self) -> str:
        """The address as given: a router's model too (two models of one router are two
        servers to watch)."""
        return self.base_url if self.model is None else f"{self.base_url}?model={self.model}"


PASTED_PATHS = (
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/models",
    "/v1",
    "/metrics",
    "/health",
)
"""Paths of a server's own endpoints that an address copied from a client or a browser ends
with (an OpenAI base URL's ``/v1``, a request's URL, ``/metrics``): dropped, once."""


def parse_endpoint(
    url: str, api_key: str | None = None, env: Mapping[str, str] | None = None
) -> Endpoint:
    """Parse a user-given server address.

    Args:
        url: ``localhost:8000``, ``host:port``, ``http://...`` or ``https://...``. A trailing
            ``/v1`` (an OpenAI base URL) or another of :data:`PASTED_PATHS` is dropped.
        api_key: The key to send as a Bearer token; when ``None`` or empty, the environment
            variables ``SPECWATCH_API_KEY`` then ``OPENAI_API_KEY`` are tried.
        env: The environment to read (default ``os.environ``).

    Raises:
        ValueError: One line saying what is wrong with the address (the key is never in it).
    """
    text = url.strip()
    if not text:
        raise ValueError(f"empty server address; {EXPECTED}")
    shown = text if len(text) <= 80 else text[:77] + "..."
    if "://" in text:
        scheme = text.split("://", 1)[0].lower()
        if scheme not in ("http", "https"):
            raise ValueError(f"unsupported scheme {scheme!r} in {shown!r}; {EXPECTED}")
        has_scheme = True
    else:
        if any(c.isspace() for c in text):
            raise ValueError(f"spaces in server address {shown!r}; {EXPECTED}")
        scheme = "http"
        has_scheme = False
        text = "http://" + text
    parts = urlsplit(text)
    if "@" in parts.netloc:
        raise ValueError("credentials in the server address are not supported; use --api-key")
    model = _routed_model(parts.query, parts.fragment, shown)
    host = parts.hostname
    if not host:
        raise ValueError(f"no host in server address {shown!r}; {EXPECTED}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"bad port in server address {shown!r}; {EXPECTED}") from None
    if port is None and not has_scheme:
        raise ValueError(f"no port in server address {shown!r}; {EXPECTED}")
    if port == 0:
        raise ValueError(f"port 0 in server address {shown!r}; {EXPECTED}")
    path = parts.path.rstrip("/")
    for suffix in PASTED_PATHS:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    host_text = f"[{host}]" if ":" in host else host
    netloc = host_text if port is None else f"{host_text}:{port}"
    problem = host_problem(f"{scheme}://{netloc}")
    if problem is not None:
        raise ValueError(f"{problem} in server address {shown!r}; {EXPECTED}")
    key = api_key or None
    if key is None:
        environ = os.environ if env is None else env
        for name in KEY_ENV_VARS:
            if environ.get(name):
                key = environ[name]
                break
    if key is not None and any(c in key for c in "\r\n"):
        raise ValueError("the API key contains a line break")
    return Endpoint(base_url=f"{scheme}://{netloc}{path}", api_key=key, model=model)


def _routed_model(query: str, fragment: str, shown: str) -> str | None:
    """The model named by an address's ``?model=NAME`` (a router's); any other query or a
    fragment is refused."""
    asked = parse_qs(query, keep_blank_values=True) if query else {}
    names = asked.get("model", [])
    if fragment or set(asked) - {"model"} or len(names) > 1 or (query and not names):
        raise ValueError(f"query or fragment in server address {shown!r}; {EXPECTED}")
    if not names:
        return None
    name = names[0]
    if not name:
        raise ValueError(f"empty model name in server address {shown!r}; {EXPECTED}")
    # a name cut or cleaned would route to another model: refused rather than changed
    if len(name) > MAX_MODEL_NAME or not name.isprintable():
        raise ValueError(
            f"a model name over {MAX_MODEL_NAME} characters or with control characters in "
            f"server address {shown!r}"
        )
    return name


def host_problem(url: str) -> str | None:
    """Why the host of ``url`` cannot be used (``None``: it can): a label over 63 characters,
    or a name IDNA cannot encode (HTTP would refuse it with a traceback)."""
    host = urlsplit(url).hostname or ""
    if any(len(label) > 63 for label in host.split(".")):
        return "a host name label longer than 63 characters"
    if host.isascii():
        return None
    import httpx  # only for a name to IDNA-encode: importing it costs ~50 ms (and rich)

    try:
        httpx.URL(url)
    except httpx.InvalidURL as exc:
        return f"a host name that cannot be used ({sanitize_line(str(exc), 120)})"
    return None


def unnamed_endpoint(url: str) -> Endpoint:
    """An address the user did not name (a Prometheus ``instance`` or scrape URL): no key.

    Neither ``--api-key`` nor the key environment variables go to it; a keyed server is
    reached by naming it (``--url HOST --api-key KEY``).

    Raises:
        ValueError: As :func:`parse_endpoint`.
    """
    endpoint = parse_endpoint(url, None, env={})
    return Endpoint(endpoint.base_url, None, named=False)


def redact(text: str, endpoint: Endpoint | None = None) -> str:
    """Remove the endpoint's API key, and anything that looks like a secret, from ``text``.

    The key itself wherever it appears, then the project's one secret rule
    (:func:`specwatch.core.redaction.redact_text`): URL passwords, ``Bearer <token>``,
    secret-named options and ``"key": "value"`` pairs.
    """
    if endpoint is not None and endpoint.api_key:
        text = text.replace(endpoint.api_key, WITHHELD)
    return redact_text(text)


__all__ = [
    "EXPECTED",
    "KEY_ENV_VARS",
    "Endpoint",
    "host_problem",
    "parse_endpoint",
    "redact",
    "unnamed_endpoint",
]
