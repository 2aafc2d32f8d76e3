"""Linux network namespaces as stand-in nodes: each one a host of its own, joined by a bridge.

``taskbench run --nodes N`` runs the pods of a cluster run as processes in separate network namespaces
(Redis, the API, each worker, each driver), so that every connection between them crosses a real network
interface (a veth pair and a bridge), as between pods, instead of the loopback. The bridge lives in the
harness's namespace with the first address of the subnet, so the harness (the collector's role) reaches
every node too.

Everything is named ``tb<tag>...`` with a tag of this run, and :class:`Network` removes what it created
(the processes still inside a namespace, by pid; the veth pairs, the namespaces, the bridge) when its block
ends, also on an error or Ctrl-C; a network whose harness died without removing it (SIGKILL) is removed
by the next one (:func:`remove_stale`, by the owner each network records). Needs root (``CAP_NET_ADMIN``)
and ``ip`` from iproute2; ``delay_ms`` needs the kernel's ``sch_netem`` (``tc qdisc ... netem``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from taskbench.harness import HarnessError

Say = Callable[[str], None]

#: the subnets tried, 10.213.<k>.0/24, the first one no interface of the machine uses
_SUBNET_BASE = "10.213"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and done.returncode != 0:
        raise HarnessError(f"ip {' '.join(args)}: {done.stderr.strip() or f'exit code {done.returncode}'}")
    return done


def unavailable() -> str | None:
    """Why network namespaces cannot be used here (None: they can): not root, no ``ip``, no netns."""
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN); run as root, or in CI"
    probe = f"tbprobe{secrets.token_hex(3)}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _free_subnet() -> str:
    used = _ip("-o", "addr", "show").stdout
    routes = _ip("route", "show").stdout
    for k in range(10, 250):
        net = f"{_SUBNET_BASE}.{k}."
        if net not in used and net not in routes:
            return net
    raise HarnessError(f"no free subnet in {_SUBNET_BASE}.0.0/16 for the namespaces' bridge")


@dataclass(frozen=True)
class Node:
    """One namespace: its role's name (``api``, ``worker-0``, ``driver-1``, ``redis``) and its address."""

    name: str
    netns: str
    ip: str
    veth: str  # the host end of its veth pair (on the bridge)

    def exec(self, argv: list[str]) -> list[str]:
        """``argv`` run inside this node (``ip netns exec`` execs it: the pid stays the program's)."""
        return ["ip", "netns", "exec", self.netns, *argv]


class Network:
    """Namespaces for ``names``, each with a veth pair on one bridge (``with Network(...) as net``)."""

    def __init__(self, names: list[str], *, delay_ms: float = 0.0, say: Say = print) -> None:
        self.names = names
        self.delay_ms = delay_ms
        self.say = say
        self.tag = secrets.token_hex(2)
        self.bridge = f"tb{self.tag}br"
        self.nodes: dict[str, Node] = {}
        self._made_bridge = False
        self.gateway = ""

    def __enter__(self) -> Network:
        try:
            self._create()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.remove()

    def _create(self) -> None:
        remove_stale(self.say)
        owners = _owners()
        owners.mkdir(parents=True, exist_ok=True)
        (owners / self.tag).write_text(f"{os.getpid()} {_start_time(os.getpid())}")
        net = _free_subnet()
        self.gateway = f"{net}1"
        _ip("link", "add", self.bridge, "type", "bridge")
        self._made_bridge = True
        _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for k, name in enumerate(self.names):
            node = Node(name=name, netns=f"tb{self.tag}-{name}", ip=f"{net}{k + 2}", veth=f"tb{self.tag}v{k}")
            self.nodes[name] = node
            _ip("netns", "add", node.netns)
            inner = f"tb{self.tag}i{k}"
            _ip("link", "add", node.veth, "type", "veth", "peer", "name", inner)
            _ip("link", "set", node.veth, "master", self.bridge)
            _ip("link", "set", node.veth, "up")
            _ip("link", "set", inner, "netns", node.netns)
            ns = ("-n", node.netns)
            _ip(*ns, "link", "set", "lo", "up")
            _ip(*ns, "link", "set", inner, "name", "eth0")
            _ip(*ns, "addr", "add", f"{node.ip}/24", "dev", "eth0")
            _ip(*ns, "link", "set", "eth0", "up")
            _ip(*ns, "route", "add", "default", "via", self.gateway)
            if self.delay_ms:
                self._delay(node)
        self.say(f"{len(self.nodes)} network namespaces on bridge {self.bridge} ({net}0/24): "
                 + ", ".join(f"{n.name} {n.ip}" for n in self.nodes.values())
                 + (f"; {self.delay_ms:g} ms netem delay on each" if self.delay_ms else ""))

    def _delay(self, node: Node) -> None:
        done = subprocess.run(["ip", "netns", "exec", node.netns, "tc", "qdisc", "add", "dev", "eth0", "root",
                               "netem", "delay", f"{self.delay_ms:g}ms"],
                              capture_output=True, text=True, timeout=30, check=False)
        if done.returncode != 0:
            raise HarnessError(f"--node-delay: tc netem failed on {node.name}: {done.stderr.strip()} "
                               "(the kernel needs sch_netem)")

    def remove(self) -> None:
        """Remove what was created: processes left inside a namespace (SIGKILL by pid: the stack stopped
        its own before), each veth pair, each namespace, the bridge. Idempotent; errors are said, not raised."""
        for node in list(self.nodes.values()):
            found = _ip("netns", "pids", node.netns, check=False).stdout.split()
            for pid in found:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
                    self.say(f"killed pid {pid} left in {node.netns}")
            for args in (("link", "del", node.veth), ("netns", "del", node.netns)):
                done = _ip(*args, check=False)
                if done.returncode != 0 and "Cannot find" not in done.stderr and "No such" not in done.stderr:
                    self.say(f"ip {' '.join(args)}: {done.stderr.strip()}")
            del self.nodes[node.name]
        if self._made_bridge:
            _ip("link", "del", self.bridge, check=False)
            self._made_bridge = False
        (_owners() / self.tag).unlink(missing_ok=True)

    def leftovers(self) -> list[str]:
        """Namespaces and links of this run's tag still present (none once :meth:`remove` ran)."""
        names = _ip("netns", "list", check=False).stdout + _ip("-o", "link", "show", check=False).stdout
        return sorted({word.split("@")[0].rstrip(":") for word in names.split() if word.startswith(f"tb{self.tag}")})


def _owners() -> Path:
    """Where each live network records its owner: ``<tag>`` holding the owner's pid and start time."""
    return Path(tempfile.gettempdir()) / f"taskbench-{os.getuid()}" / "netns"


def _start_time(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _tagged(tag: str) -> tuple[list[str], list[str]]:
    """The namespaces and the host-side links (veth ends, the bridge) named for ``tag``."""
    spaces = [line.split()[0] for line in _ip("netns", "list", check=False).stdout.splitlines()
              if line.startswith(f"tb{tag}-")]
    links = [line.split(":")[1].strip().split("@")[0] for line in _ip("-o", "link", "show", check=False).stdout
             .splitlines() if line.count(":") >= 2 and line.split(":")[1].strip().startswith(f"tb{tag}")]
    return spaces, links


def _remove_tagged(tag: str, say: Say) -> None:
    spaces, links = _tagged(tag)
    for space in spaces:
        for pid in _ip("netns", "pids", space, check=False).stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
                say(f"killed pid {pid} left in {space}")
    for link in sorted(links, key=lambda name: name.endswith("br")):  # the veth ends, then the bridge
        _ip("link", "del", link, check=False)
    for space in spaces:
        _ip("netns", "del", space, check=False)


def remove_stale(say: Say = print) -> list[str]:
    """Remove the networks of runs that died without removing theirs (a SIGKILLed harness): each network
    records its owner (pid and start time) while it lives; an owner gone, its namespaces, links and any
    process left inside are removed. The tags removed."""
    removed = []
    folder = _owners()
    for record in sorted(folder.glob("*")) if folder.is_dir() else []:
        pid, _, started = record.read_text().partition(" ")
        if pid.isdigit() and _start_time(int(pid)) == started.strip():
            continue  # its owner still runs
        say(f"removing the network namespaces of a dead run (tag {record.name})")
        _remove_tagged(record.name, say)
        record.unlink(missing_ok=True)
        removed.append(record.name)
    return removed
