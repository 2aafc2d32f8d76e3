"""A private RabbitMQ for one run, so a fault may stop, freeze or restart it.

``rabbitmq-server`` (Debian's wrapper is skipped: it would switch to the rabbitmq user) as node
``taskbench-<port>@localhost``, no plugins, its Mnesia and message store in the run's folder; a
restart finds its durable queues and persistent messages there. It registers with the machine's epmd
like any other node. A user and password made for the run are in ``rabbitmq.conf`` (mode 0600).
"""

from __future__ import annotations

from pathlib import Path

from taskbench.brokers.rabbitmq import RabbitMQ
from taskbench.harness.brokers.base import PrivateServer, write_secret
from taskbench.net import free_port

__all__ = ["PrivateRabbit"]


class PrivateRabbit(PrivateServer):
    kind = RabbitMQ.name
    program = "rabbitmq-server"
    persistence = "durable queues, persistent messages (Mnesia and message store on disk)"

    def configure(self) -> None:
        folder = self.folder
        self.dist_port = free_port()
        self.node = f"taskbench-{self.port}@localhost"
        self.user = "taskbench"
        for sub in ("home", "mnesia", "log"):
            (folder / sub).mkdir(exist_ok=True)
        (folder / "enabled_plugins").write_text("[].\n")
        write_secret(folder / "rabbitmq.conf", "\n".join([
            f"listeners.tcp.local = 127.0.0.1:{self.port}",
            f"default_user = {self.user}", f"default_pass = {self.secret}",
            "log.console = true", "log.file = false",
        ]) + "\n")

    def find(self) -> str:
        found = Path(super().find()).resolve()
        if found.name == "rabbitmq-script-wrapper":  # Debian's: su to the rabbitmq user, logs elsewhere
            found = found.with_name("rabbitmq-server")
        return str(found)

    def argv(self) -> list[str]:
        return [self.binary]

    def server_env(self) -> dict[str, str]:
        folder = self.folder
        return {
            "HOME": str(folder / "home"),  # its own Erlang cookie
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONFIG_FILE": str(folder / "rabbitmq.conf"),
            "RABBITMQ_CONF_ENV_FILE": str(folder / "rabbitmq-env.conf"),  # not the machine's
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(folder / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(folder / "mnesia"),
            "RABBITMQ_LOG_BASE": str(folder / "log"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }

    @property
    def url(self) -> str:
        return f"amqp://{self.user}:{self.secret}@127.0.0.1:{self.port}/"
