"""Where the exporter listens: ``--listen HOST:PORT`` (light: parsed with the arguments)."""

from __future__ import annotations

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9877


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` or ``PORT`` (host 127.0.0.1); ``[::1]:PORT`` for IPv6.

    Raises:
        ValueError: Not a host and a port in 0..65535.
    """
    host, sep, port_text = text.strip().rpartition(":")
    if not sep:
        host, port_text = "", text.strip()
    host = host.strip("[]") or DEFAULT_HOST
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"expected HOST:PORT, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port out of range in {text!r}")
    return host, port


__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "parse_listen"]
