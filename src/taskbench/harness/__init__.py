"""The harness: starts every process of a run, drives load, audits, and stops everything."""


class HarnessError(Exception):
    """A problem the user can fix (unreachable Redis, port in use, missing tool): one line, no traceback."""
