"""Which broker each backend's case runs on: ``--broker`` for all, else each backend's own default."""

from __future__ import annotations

import pytest

from taskbench.cli._common import backend_names
from taskbench.harness.commands.run import on_broker
from taskbench.harness.config import RunConfig


def test_without_broker_each_backend_runs_on_its_default() -> None:
    cfg = RunConfig(backends=("arq", "pgqueuer", "faststream"))
    assert cfg.brokers == {"arq": "redis", "pgqueuer": "postgres", "faststream": "redis"}
    assert on_broker(cfg, "postgres").backends == ("pgqueuer",)
    assert on_broker(cfg, "redis").backends == ("arq", "faststream")
    assert on_broker(cfg, "redis").broker == "redis"


def test_a_broker_for_all_must_suit_every_backend() -> None:
    assert RunConfig(backends=("faststream",), broker="nats").brokers == {"faststream": "nats"}
    with pytest.raises(ValueError, match="'pgqueuer' does not run on 'redis'"):
        RunConfig(backends=("arq", "pgqueuer"), broker="redis")
    with pytest.raises(ValueError, match="--broker-url names one broker"):
        RunConfig(backends=("arq", "pgqueuer"), broker_url="redis://127.0.0.1:1/0")


def test_all_is_every_backend_or_those_of_a_broker() -> None:
    everything = backend_names("all")
    assert {"arq", "procrastinate", "pgqueuer", "saq-postgres"} <= set(everything)
    assert set(backend_names("all", "postgres")) == {"procrastinate", "pgqueuer", "saq-postgres"}
    assert "pgqueuer" not in backend_names("all", "redis")


def test_up_runs_each_backend_on_its_own_broker_or_the_one_named() -> None:
    from taskbench.harness.commands.up import UpConfig

    assert UpConfig(backends=("arq", "saq-postgres")).brokers == {"arq": "redis", "saq-postgres": "postgres"}
    assert UpConfig(backends=("faststream",), broker="nats").brokers == {"faststream": "nats"}
    with pytest.raises(ValueError, match="'saq-postgres' does not run on 'redis'"):
        UpConfig(backends=("arq", "saq-postgres"), broker="redis")
    with pytest.raises(ValueError, match="--broker-url names one broker"):
        UpConfig(backends=("arq", "pgqueuer"), broker_url="postgresql://127.0.0.1:1/x")
    with pytest.raises(ValueError, match="broker"):
        UpConfig(backends=("arq",), broker="kafka")
