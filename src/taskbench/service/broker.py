"""The API's view of its broker: is it answering (``/health``), and does it keep what it acknowledged?"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from taskbench import brokers
from taskbench.backends.base import ChecksBroker
from taskbench.brokers.durability import Durability

if TYPE_CHECKING:
    from taskbench.settings import Settings

class BrokerDownError(Exception):
    """The broker did not answer; the message names it with host and port."""


@dataclass
class BrokerProbe:
    """How the API checks its broker: the producer's own connection where the backend offers one
    (:class:`~taskbench.backends.base.ChecksBroker`), a PING on Redis, else a TCP connect."""

    settings: Settings
    redis: Any  # a client of the broker's Redis (the ledger's client when they share a server)
    producer: object

    @property
    def name(self) -> str:
        return brokers.describe(self.settings.broker, self.settings.broker_address)

    async def check(self, timeout: float) -> None:
        """Return once the broker answered within ``timeout``; else raise :class:`BrokerDownError`."""
        try:
            async with asyncio.timeout(timeout):
                if isinstance(self.producer, ChecksBroker):
                    await self.producer.check_broker()
                elif brokers.info(self.settings.broker).can_be_ledger:  # a Redis: the client at hand
                    await self.redis.ping()
                else:
                    host, port = brokers.address(self.settings.broker, self.settings.broker_address)
                    _, writer = await asyncio.open_connection(host, port)
                    writer.close()
                    await writer.wait_closed()
        except TimeoutError:
            raise BrokerDownError(f"{self.name} did not answer within {timeout:g} s") from None
        except Exception as exc:
            raise BrokerDownError(f"{self.name} failed: {type(exc).__name__}: {exc}") from None

    async def durability(self) -> Durability:
        """What the broker's configuration keeps across its restart (Redis, PostgreSQL: as it reports it)."""
        broker = brokers.info(self.settings.broker)
        return await broker.read_durability_async(client=self.redis, url=self.settings.broker_address)
