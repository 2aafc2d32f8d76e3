"""Tiny raw asyncio HTTP/1.1 server with scripted misbehaviour, for driver tests.

Run as ``python _server.py``; it binds 127.0.0.1 on a free port and prints the
port on stdout. Behaviour is chosen by request path:

- ``/ok``      200 with Content-Length, keep-alive
- ``/fail``    500 when the task id's sequence number is divisible by 3, else 200
- ``/known``   409 (the API's answer to a known task id) when it is divisible by 4, else 202
- ``/chunked`` 200 with a chunked body written in several pieces (with extensions)
- ``/close``   200 with ``Connection: close``, then closes
- ``/eof``     HTTP/1.0-style 200 without Content-Length, body ends at close
- ``/slow``    200 after 200 ms
- ``/never``   never answers
- ``GET /_stats`` JSON ``{"bodies": [...], "connections": n}``; ``POST /_reset`` clears
"""

from __future__ import annotations

import asyncio
import json
import sys

BODIES: list[str] = []
CONNECTIONS = 0


def _resp(status: int, body: bytes, extra: str = "") -> bytes:
    reason = {200: "OK", 202: "Accepted", 409: "Conflict", 500: "Internal Server Error"}.get(status, "X")
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    global CONNECTIONS
    CONNECTIONS += 1
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            _method, path, _ = lines[0].split(" ", 2)
            length = 0
            for line in lines[1:]:
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            body = (await reader.readexactly(length)).decode() if length else ""
            if path == "/_stats":
                data = json.dumps({"bodies": BODIES, "connections": CONNECTIONS}).encode()
                writer.write(_resp(200, data))
                await writer.drain()
                continue
            if path == "/_reset":
                BODIES.clear()
                CONNECTIONS = 1
                writer.write(_resp(200, b""))
                continue
            BODIES.append(body)
            if path == "/ok":
                writer.write(_resp(200, b'{"ok":true}'))
            elif path == "/fail":
                seq = int(json.loads(body)["id"].rsplit("-", 1)[1])
                writer.write(_resp(500 if seq % 3 == 0 else 200, b"{}"))
            elif path == "/known":
                seq = int(json.loads(body)["id"].rsplit("-", 1)[1])
                writer.write(_resp(409 if seq % 4 == 0 else 202, b"{}"))
            elif path == "/chunked":
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                await writer.drain()
                writer.write(b"5;ext=1\r\nhello\r\n")
                await writer.drain()
                await asyncio.sleep(0.001)
                writer.write(b"7\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n")
            elif path == "/close":
                writer.write(_resp(200, b"bye", "Connection: close\r\n"))
                await writer.drain()
                return
            elif path == "/eof":
                writer.write(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil-eof")
                await writer.drain()
                return
            elif path == "/slow":
                await asyncio.sleep(0.2)
                writer.write(_resp(200, b"{}"))
            elif path == "/never":
                await asyncio.sleep(3600)
            else:
                writer.write(_resp(404, b""))
            await writer.drain()
    finally:
        writer.close()


async def main() -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    print(port, flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
