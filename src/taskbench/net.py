"""Loopback helpers every layer may use: a free port, a port check, a service's health probe."""

from __future__ import annotations

import socket

from taskbench.errors import HarnessError


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # as the servers bind: connections of a stopped server in TIME_WAIT do not hold the port,
        # a listening socket does
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise HarnessError(f"port {host}:{port} is in use ({exc.strerror})") from None


def healthy(port: int) -> bool:
    """True when the service on 127.0.0.1:port answers 200 on /health."""
    # lazy: urllib.request costs tens of milliseconds, and a worker process imports this module
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def listening(port: int, host: str = "127.0.0.1") -> bool:
    """True when something accepts TCP connections on host:port."""
    try:
        socket.create_connection((host, port), timeout=0.5).close()
    except OSError:
        return False
    return True


#: /proc/net/tcp's state of an established connection
_ESTABLISHED = "01"


def established(port: int) -> int | None:
    """How many TCP connections to local port ``port`` are established now (the server's ends: the local
    address has the port), from /proc/net/tcp and tcp6; None where there is no /proc (not Linux).

    Counted by their remote ends, each once: the kernel writes these tables a chunk at a time, and a
    table read while thousands of connections open and close can list one twice."""
    wanted = f":{port:04X}"
    peers: set[str] = set()
    found = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                next(fh, None)  # the header
                found = True
                for line in fh:
                    fields = line.split(None, 4)
                    if len(fields) > 3 and fields[3] == _ESTABLISHED and fields[1].endswith(wanted):
                        peers.add(fields[2])
        except OSError:
            continue
    return len(peers) if found else None
