"""Redis as a broker: its facts, its check (a PING) and its durability (the AOF, as the server reports it).

Its private servers are the run's, not a case's: the ledger's and the broker's embedded Redis
(:class:`taskbench.harness.brokers.redis.EmbeddedRedis`, started by ``provide_redis`` for the run).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from taskbench.brokers.base import Broker
from taskbench.brokers.durability import Durability
from taskbench.errors import HarnessError
from taskbench.redaction import redact

__all__ = ["FSYNC_POLICIES", "Redis", "check_reachable", "describe", "judge"]

#: the fsync policies of the broker Redis's AOF (``--redis-fsync``); ``none``: no persistence at all
FSYNC_POLICIES = ("always", "everysec", "no", "none")


def judge(appendonly: str | None, appendfsync: str | None) -> Durability:
    """From the broker Redis's ``CONFIG GET appendonly appendfsync`` (None: it would not say)."""
    if appendonly is None:
        return Durability(False, "unknown: the broker Redis did not report its persistence (CONFIG GET refused)")
    if appendonly != "yes":
        return Durability(False, "none: the broker Redis has no AOF; a restart loses every queued task")
    if appendfsync == "always":
        return Durability(True, "AOF fsync always: every acknowledged write is on disk")
    if appendfsync == "everysec":
        return Durability(False, "AOF fsync everysec: a crash of the broker may lose the last ~1 s of tasks")
    return Durability(False, f"AOF fsync {appendfsync}: the OS decides when tasks reach the disk")


def _judge_config(config: dict[Any, Any]) -> Durability:
    text = {_text(k): _text(v) for k, v in config.items()}
    return judge(text.get("appendonly"), text.get("appendfsync"))


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def describe(url: str) -> str:
    """Where a Redis URL points: ``host:port``, or the socket path of a ``unix://`` URL."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"socket {parts.path or '(no path)'}"
    try:
        port = parts.port
    except ValueError:  # a port that is no number, or out of range: check_reachable says so
        port = None
    return f"{parts.hostname or '127.0.0.1'}:{port or Redis.default_port}"


def check_reachable(url: str, timeout: float = 3.0) -> None:
    """One PING; an unreachable server is reported by host and port (or socket path), not as a traceback,
    and so is a URL that is not a Redis URL (the URL said with its password masked)."""
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    except (ValueError, TypeError) as exc:
        raise HarnessError(f"{redact(url)} is not a Redis URL (redis://[[user]:password@]host[:port][/db], "
                           f"rediss://… or unix:///path.sock): {exc}") from None
    try:
        client.ping()
    except redis.exceptions.AuthenticationError as exc:
        raise HarnessError(f"Redis at {describe(url)} refused authentication: {exc}") from None
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
        raise HarnessError(f"cannot reach Redis at {describe(url)}: {exc}") from None
    except redis.exceptions.ResponseError as exc:
        raise HarnessError(f"Redis at {describe(url)} answered an error: {exc}") from None
    except (redis.exceptions.RedisError, ValueError) as exc:  # a host name that cannot be encoded, …
        raise HarnessError(f"cannot use Redis at {describe(url)}: {type(exc).__name__}: {exc}") from None
    finally:
        client.close()


class Redis(Broker):
    name = "redis"
    label = "Redis"
    default_port = 6379
    schemes = ("redis", "rediss", "unix")
    can_be_ledger = True
    pauses_itself = True
    purge_on_cleanup = False  # its queues are under the run's prefix, deleted with the ledger's keys
    reads_durability = True
    server = "taskbench.harness.brokers.redis:EmbeddedRedis"
    server_options = (("fsync", "redis_fsync"),)

    def where(self, url: str) -> str:
        return describe(url)

    def restart_refused(self, fault: str) -> str:
        return (f"--fault {fault}: needs the embedded broker Redis; a Redis given with --redis-url or "
                "--broker-url is never restarted")

    def check(self, url: str, timeout: float = 3.0) -> None:
        """A PING (a URL of another scheme is named by the Redis client's own error)."""
        check_reachable(url, timeout)

    def read_durability(self, *, client: Any = None, url: str = "") -> Durability:
        """From ``client`` (a client of the broker Redis): its AOF settings as it reports them."""
        import redis

        try:
            config = client.config_get("append*")
        except (redis.exceptions.RedisError, OSError):
            return judge(None, None)
        return _judge_config(config)

    async def read_durability_async(self, *, client: Any = None, url: str = "") -> Durability:
        try:
            config = await client.config_get("append*")
        except Exception:  # CONFIG refused (a managed Redis) or not answering: unknown is not durable
            return judge(None, None)
        return _judge_config(config)
