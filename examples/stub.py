"""A local HTTP stub for examples/tasks.py:call_stub: answers ``GET /?delay_ms=N`` with 200 after N ms.

Standard library only (asyncio), loopback only. It exits by itself after ``--idle`` seconds without a
request, so a stub that outlives the run that started it (a task's process that exited) goes away.

    python examples/stub.py --port 18765
"""

from __future__ import annotations

import argparse
import asyncio
import time
from urllib.parse import parse_qs, urlsplit

MAX_DELAY_MS = 60_000


async def serve(port: int, idle: float) -> None:
    last = time.monotonic()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal last
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                last = time.monotonic()
                target = head.split(b" ", 2)[1].decode("latin-1") if head.count(b" ") >= 2 else "/"
                query = parse_qs(urlsplit(target).query)
                try:
                    delay = min(MAX_DELAY_MS, max(0, int(query.get("delay_ms", ["0"])[0])))
                except ValueError:
                    delay = 0
                await asyncio.sleep(delay / 1000)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
                last = time.monotonic()
                if b"connection: close" in head.lower():
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", port)
    async with server:
        while time.monotonic() - last < idle:  # noqa: ASYNC110 - a timer, not a wait for an event
            await asyncio.sleep(min(1.0, idle))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--idle", type=float, default=10.0, help="exit after this many seconds without a request")
    args = parser.parse_args()
    try:
        asyncio.run(serve(args.port, args.idle))
    except OSError as exc:  # another process's stub took the port first: that one serves
        raise SystemExit(f"stub: port {args.port}: {exc.strerror}") from None


if __name__ == "__main__":
    main()
