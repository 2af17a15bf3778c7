"""A real sshd greets, then hangs up on the HTTP request: named as SSH, not a dropped answer."""

from __future__ import annotations

import asyncio

import pytest

from specwatch.sources.http.client import ServerClient
from specwatch.sources.http.endpoint import parse_endpoint
from specwatch.sources.http.server_errors import ServerError

BANNER = b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n"


@pytest.mark.parametrize("reads_first", [True, False])
async def test_a_banner_then_close_port_speaks_ssh(reads_first: bool) -> None:
    async def sshd(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(BANNER)
        await writer.drain()
        if reads_first:
            await reader.read(4096)
        writer.close()

    server = await asyncio.start_server(sshd, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with ServerClient(parse_endpoint(f"127.0.0.1:{port}", env={})) as client:
            with pytest.raises(ServerError) as info:
                await client.get("/v1/models")
    finally:
        server.close()
        await server.wait_closed()
    assert "this port speaks SSH, not HTTP" in str(info.value)
    assert info.value.kind == "garbage"
