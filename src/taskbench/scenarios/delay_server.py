"""A local HTTP API that answers after a delay: seed 003's Sanic app (``await asyncio.sleep(2)``, then
a random number), so that Celery's I/O-bound tasks wait on a real socket.

``python -m taskbench.scenarios.delay_server --port P --delay SECONDS`` (binds 127.0.0.1 only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal

MAX_HEAD = 16_384


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            if len(head) > MAX_HEAD:
                return
            if head.startswith(b"GET /health"):
                body = b'{"status":"ok"}'
            else:
                await asyncio.sleep(delay)
                body = json.dumps({"number": random.randint(1, 10)}).encode()
            keep = b"connection: close" not in head.lower()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                         + str(len(body)).encode() + (b"" if keep else b"\r\nconnection: close")
                         + b"\r\n\r\n" + body)
            await writer.drain()
            if not keep:
                return
    finally:
        writer.close()


async def serve(port: int, delay: float) -> None:
    server = await asyncio.start_server(lambda r, w: _handle(r, w, delay), "127.0.0.1", port, backlog=1024)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=2.0)
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.delay))


if __name__ == "__main__":
    main()
