"""The connection count of HTTP scenarios (seed 004's netstat): established TCP connections to a port."""

from __future__ import annotations

import socket
import sys

import pytest

from taskbench.net import established, free_port


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/net/tcp")
def test_established_counts_the_server_s_ends_of_open_connections_to_its_port() -> None:
    port = free_port()
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen(16)
        assert established(port) == 0
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
        # four accepted, one still in the accept queue: established all the same, as netstat shows it
        accepted = [server.accept()[0] for _ in range(4)]
        try:
            assert established(port) == 5, "the clients' own ends (their ports are others) are not counted"
            for sock in clients[:2]:
                sock.close()
            for sock in accepted[:2]:
                sock.close()
            assert established(port) == 3
        finally:
            for sock in clients + accepted:
                sock.close()
    assert established(port) == 0
