"""A private NATS for one run, so a fault may stop, freeze or restart it.

``nats-server -js`` with its JetStream store (file storage) in the run's folder, and a token made for
the run in ``nats.conf`` (mode 0600).
"""

from __future__ import annotations

from taskbench.brokers.nats import Nats
from taskbench.harness.brokers.base import PrivateServer, write_secret

__all__ = ["PrivateNats"]


class PrivateNats(PrivateServer):
    kind = Nats.name
    program = "nats-server"
    persistence = "JetStream file storage"

    def configure(self) -> None:
        store = self.folder / "jetstream"
        store.mkdir(exist_ok=True)
        write_secret(self.folder / "nats.conf", "\n".join([
            "host: 127.0.0.1", f"port: {self.port}",
            f'jetstream {{ store_dir: "{store}" }}',
            f'authorization {{ token: "{self.secret}" }}',
        ]) + "\n")

    def argv(self) -> list[str]:
        return [self.binary, "-c", str(self.folder / "nats.conf")]

    @property
    def url(self) -> str:
        return f"nats://{self.secret}@127.0.0.1:{self.port}"
