"""Name the program on a port that greets first: SSH, SMTP, FTP... are not HTTP servers.

An HTTP server never speaks before the request; many other protocols do. ``h11`` waits for a
whole header block that never comes, so without this a port running ``sshd`` looks like a hung
server for the full timeout. :func:`sniff_banner` connects once more and listens briefly.
"""

from __future__ import annotations

import asyncio
import contextlib

from specwatch.core.sanitize import sanitize_line

LISTEN_S = 0.5
"""How long to listen for a greeting (an HTTP server stays silent)."""

_KNOWN = (
    ("SSH-", "SSH"),
    ("220", "FTP or SMTP"),
    ("+OK", "POP3"),
    ("* OK", "IMAP"),
    ("RFB ", "VNC"),
)


def name_banner(banner: bytes) -> str:
    """``"SSH"`` for ``b"SSH-2.0-OpenSSH_9.6"``; a generic phrase for anything else."""
    text = banner.decode("latin-1")
    for prefix, name in _KNOWN:
        if text.startswith(prefix):
            return name
    return "a protocol that is not HTTP"


def banner_message(url: str, banner: bytes) -> str:
    """One line naming the protocol, e.g. ``this port speaks SSH, not HTTP``."""
    name = name_banner(banner)
    greeting = sanitize_line(banner.decode("latin-1").strip(), 60)
    if name.startswith("a protocol"):
        return f"{url}: this port speaks {name} (it greets with {greeting!r})"
    return f"{url}: this port speaks {name}, not HTTP (it greets with {greeting!r})"


async def sniff_banner(host: str, port: int, listen_s: float = LISTEN_S) -> bytes | None:
    """The first bytes the peer sends unasked, or ``None`` (silent, or cannot connect)."""
    writer: asyncio.StreamWriter | None = None
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), listen_s)
        data = await asyncio.wait_for(reader.read(256), listen_s)
        return data or None
    except (OSError, TimeoutError):
        return None
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError, TimeoutError):
                await asyncio.wait_for(writer.wait_closed(), listen_s)


__all__ = ["LISTEN_S", "banner_message", "name_banner", "sniff_banner"]
