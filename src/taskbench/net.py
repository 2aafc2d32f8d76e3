"""Loopback helpers every layer may use: is an API answering, which port is free."""

from __future__ import annotations

import urllib.error
import urllib.request


def healthy(port: int, host: str = "127.0.0.1") -> bool:
    """True when ``GET /health`` answers 200 within a second."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=1) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False
