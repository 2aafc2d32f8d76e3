"""What ``taskbench run --target`` needs of the driver: a per-request header, and a load stopped early."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from taskbench.driver import LoadSpec, RequestTemplate, run_load


class _Seen:
    def __init__(self) -> None:
        self.headers: list[str | None] = []
        self.bodies: list[str] = []
        self.lock = threading.Lock()
        self.enough = threading.Event()
        self.stop_after: int | None = None


@pytest.fixture
def server() -> Iterator[tuple[int, _Seen]]:
    seen = _Seen()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"] or 0)).decode()
            with seen.lock:
                seen.headers.append(self.headers.get("X-Taskbench-Task"))
                seen.bodies.append(body)
                if seen.stop_after is not None and len(seen.headers) >= seen.stop_after:
                    seen.enough.set()
            self.send_response(202)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1], seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_task_reference_header_carries_each_requests_id_and_send_time(server: tuple[int, _Seen]) -> None:
    port, seen = server
    template = RequestTemplate(host="127.0.0.1", port=port, path="/orders", body='{{"n": 1}}',
                               headers=(("X-Taskbench-Task", "{task_id}@{enqueued_at}"),))
    result = run_load(template, LoadSpec(users=4, requests=40, id_prefix="run1."))
    assert result.ok == 40
    refs = [h for h in seen.headers if h is not None]
    assert len(refs) == 40
    ids = {ref.split("@")[0] for ref in refs}
    assert ids == set(result.accepted_ids)
    assert all(float(ref.split("@")[1]) > 0 for ref in refs)
    assert set(seen.bodies) == {'{"n": 1}'}


def test_a_header_value_on_two_lines_is_refused() -> None:
    with pytest.raises(ValueError, match="one line"):
        RequestTemplate(host="127.0.0.1", port=80, path="/", headers=(("X-A", "a\r\nX-B: b"),))
    with pytest.raises(ValueError, match="header name"):
        RequestTemplate(host="127.0.0.1", port=80, path="/", headers=(("X A", "a"),))


def test_a_set_stop_event_ends_the_load_before_its_bound(server: tuple[int, _Seen]) -> None:
    port, seen = server
    seen.stop_after = 30
    stop = threading.Event()
    threading.Thread(target=lambda: (seen.enough.wait(60), stop.set()), daemon=True).start()
    template = RequestTemplate(host="127.0.0.1", port=port, path="/orders", body="{{}}")
    result = run_load(template, LoadSpec(users=2, requests=10_000_000), stop=stop)
    assert stop.is_set()
    assert 30 <= result.requests < 10_000_000
    assert result.requests == len(seen.headers)
