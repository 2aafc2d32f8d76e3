"""The harness: starts every process of a run, drives load, audits, and stops everything."""

from taskbench.errors import HarnessError

__all__ = ["HarnessError"]
