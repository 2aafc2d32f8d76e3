"""Paced users (Locust's constant_pacing): each user starts a request at most every ``pace`` seconds."""

from __future__ import annotations

import pytest

from taskbench.driver import LoadSpec


def test_pace_validation() -> None:
    with pytest.raises(ValueError, match="pace applies to the closed and ramp models"):
        LoadSpec(model="open", rate=10, pace=1.0, requests=10)
    with pytest.raises(ValueError, match="pace must be in"):
        LoadSpec(pace=-1.0, requests=10)
    assert LoadSpec(pace=0.5, requests=10).split()[0].pace == 0.5


def test_keepalive_false_validation() -> None:
    with pytest.raises(ValueError, match="keepalive false applies to the closed and ramp models"):
        LoadSpec(model="open", rate=10, keepalive=False, requests=10)
    with pytest.raises(ValueError, match="keepalive false and a pace"):
        LoadSpec(keepalive=False, pace=1.0, requests=10)
    assert LoadSpec(keepalive=False, users=4, requests=10, processes=2).split()[1].keepalive is False
