"""The error a user can fix, shared by every layer (the harness re-exports it as its own)."""


class HarnessError(Exception):
    """A problem the user can fix (unreachable Redis, port in use, missing tool): one line, no traceback."""
