"""``--broker-delay MS``: the API and the workers reach the broker through a delay line.

A TCP proxy on 127.0.0.1 in a process of its own (its own process group, stopped with the case)
forwards every connection to the broker and holds each chunk it reads for MS milliseconds before it
writes it on, in both directions and in order: a request and its answer each take MS longer, so a
round trip costs 2 x MS more, as ``tc netem delay MS`` on one link crossed both ways would. The delay is
latency, not a bandwidth cap: chunks behind each other are held for MS each, not one after another.

Why not ``tc netem`` in a network namespace: the kernel taskbench was developed on has no netem
qdisc (``tc qdisc add ... netem`` answers "Specified qdisc kind is unknown"), and a proxy needs no
root. Its own cost is one more loopback hop per chunk (measured at 0 ms, docs/faults.md). The
ledger's Redis is reached directly: only the broker is behind the delay.

Run as ``python -m taskbench.harness.brokers.delay_proxy --port P --target HOST:PORT --delay-ms MS``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import time
from urllib.parse import urlsplit, urlunsplit

__all__ = ["behind", "main", "target_of"]

CHUNK = 65536


def behind(url: str, port: int) -> str:
    """``url`` with its host and port replaced by the proxy's (127.0.0.1:``port``); user info is kept."""
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = (f"{userinfo}@" if userinfo else "") + f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def target_of(url: str, default_port: int) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or default_port


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy ``reader`` to ``writer``, each chunk written ``delay`` seconds after it was read."""
    line: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def read() -> None:
        try:
            while chunk := await reader.read(CHUNK):
                line.put_nowait((time.monotonic() + delay, chunk))
        except (ConnectionError, OSError):
            pass
        finally:
            line.put_nowait((time.monotonic() + delay, b""))

    reading = asyncio.ensure_future(read())
    try:
        while True:
            due, chunk = await line.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not chunk:
                break
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        reading.cancel()
        with contextlib.suppress(Exception):
            writer.close()


async def _serve(port: int, host: str, target_port: int, delay: float) -> None:
    async def connect(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(host, target_port)
        except OSError:
            client_w.close()  # the broker is down: the client sees its connection closed, as it would
            return
        for writer in (client_w, server_w):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                import socket

                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(_pipe(client_r, server_w, delay), _pipe(server_r, client_w, delay))

    server = await asyncio.start_server(connect, "127.0.0.1", port, reuse_address=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"delay proxy 127.0.0.1:{port} -> {host}:{target_port}, {delay * 1000:g} ms each way", flush=True)
    async with server:
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m taskbench.harness.brokers.delay_proxy")
    parser.add_argument("--port", type=int, required=True, help="where to listen (127.0.0.1)")
    parser.add_argument("--target", required=True, help="HOST:PORT of the broker")
    parser.add_argument("--delay-ms", type=float, required=True, help="one-way delay per chunk")
    args = parser.parse_args(argv)
    host, _, port = args.target.rpartition(":")
    asyncio.run(_serve(args.port, host or "127.0.0.1", int(port), args.delay_ms / 1000.0))


if __name__ == "__main__":
    main()
