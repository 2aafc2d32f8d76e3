"""The brokers' modules: each answers what the code asks of it, and names a private server that exists."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from taskbench import brokers
from taskbench.brokers import durability
from taskbench.errors import HarnessError
from taskbench.harness.brokers import PrivateServer, server_class


@pytest.mark.parametrize("name", brokers.NAMES)
def test_each_broker_names_a_private_server_of_its_own_kind(name: str) -> None:
    cls = server_class(name)
    assert issubclass(cls, PrivateServer)
    assert cls.kind == name


def test_only_redis_can_be_the_ledger_and_pause_itself() -> None:
    assert [b.name for b in brokers.BROKERS.values() if b.can_be_ledger] == ["redis"]
    assert [b.name for b in brokers.BROKERS.values() if b.pauses_itself] == ["redis"]
    assert [b.name for b in brokers.BROKERS.values() if not b.purge_on_cleanup] == ["redis"]


def test_when_a_case_gets_a_private_server() -> None:
    postgres, nats = brokers.info("postgres"), brokers.info("nats")
    assert postgres.needs_private_server(None, None)  # embedded: every case without --broker-url
    assert not postgres.needs_private_server("postgresql://u:p@db/x", "broker")
    assert nats.needs_private_server(None, "broker") and not nats.needs_private_server(None, "worker-0")


def test_a_broker_reads_its_server_options_from_a_config() -> None:
    @dataclass
    class Config:
        redis_fsync: str = "everysec"
        postgres_durability: str = "none"

    assert brokers.info("redis").options_from(Config()) == {"fsync": "everysec"}
    assert brokers.info("postgres").options_from(Config()) == {"durability": "none"}
    assert brokers.info("nats").options_from(Config()) == {}


def test_durability_is_read_or_stated() -> None:
    assert brokers.info("rabbitmq").read_durability().durable
    assert brokers.info("nats").read_durability(url="nats://x").durable

    class Refusing:
        def config_get(self, _: str) -> dict[str, str]:
            import redis

            raise redis.exceptions.ResponseError("unknown command CONFIG")

    assert not brokers.info("redis").read_durability(client=Refusing()).durable
    case = durability.of_case(True, "after-response", brokers.info("nats").read_durability())
    assert not case.durable and "after-response" in case.text


def test_a_wrong_scheme_is_named_before_any_connection() -> None:
    with pytest.raises(HarnessError, match="is not a RabbitMQ URL"):
        brokers.info("rabbitmq").check("nats://127.0.0.1:4222")
    assert brokers.describe("postgres", "postgresql://u:p@db/x") == "PostgreSQL at db:5432"


def test_an_unknown_broker_is_a_value_error_naming_the_known() -> None:
    with pytest.raises(ValueError, match="known: redis, rabbitmq, nats, postgres"):
        brokers.info("kafka")
