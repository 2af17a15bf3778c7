"""GET a dcgm-exporter ``/metrics`` body within a wall-clock deadline and a size limit."""

from __future__ import annotations

import http.client
import time
from urllib.parse import urlsplit

DEFAULT_TIMEOUT_S = 2.0
DEFAULT_MAX_BYTES = 8 * 1024 * 1024
"""An 8-GPU exporter with every field is ~100 KiB; a body past this is not a dcgm-exporter."""


class DcgmFetchError(Exception):
    """The exporter could not be read (refused, timed out, not 200, too large)."""


def fetch_metrics(
    url: str, timeout_s: float = DEFAULT_TIMEOUT_S, max_bytes: int = DEFAULT_MAX_BYTES
) -> str:
    """GET ``url`` within a wall-clock deadline and a size limit.

    Raises:
        DcgmFetchError: With a short reason.
    """
    parts = urlsplit(url)
    deadline = time.monotonic() + timeout_s
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname or "", parts.port, timeout=timeout_s)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request("GET", path, headers={"Accept": "text/plain", "Accept-Encoding": "identity"})
        sock = conn.sock  # getresponse() drops conn.sock when the server closes after answering
        resp = conn.getresponse()
        if resp.status != 200:
            raise DcgmFetchError(f"HTTP {resp.status} {resp.reason}")
        chunks: list[bytes] = []
        size = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DcgmFetchError(f"no complete answer within {timeout_s:g} s")
            if sock is not None:
                sock.settimeout(remaining)
            chunk = resp.read1(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise DcgmFetchError(f"answer larger than {max_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", errors="replace")
    except DcgmFetchError:
        raise
    except TimeoutError as exc:
        raise DcgmFetchError(f"no complete answer within {timeout_s:g} s") from exc
    except (OSError, http.client.HTTPException) as exc:
        raise DcgmFetchError(" ".join(str(exc).split()) or type(exc).__name__) from exc
    finally:
        conn.close()


__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_TIMEOUT_S", "DcgmFetchError", "fetch_metrics"]
