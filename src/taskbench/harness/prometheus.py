"""A private Prometheus for ``taskbench up`` and the dashboard test: config, targets, process, queries."""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from taskbench.files import write_atomic
from taskbench.harness import HarnessError
from taskbench.procgroup import Managed
from taskbench.wait import WaitTimeoutError, wait_until

CONFIG = """\
# written by taskbench: scrapes every API and worker of the stack, found through targets.json
global:
  scrape_interval: {interval}
  evaluation_interval: {interval}
scrape_configs:
  - job_name: taskbench
    # the task metrics carry their own backend label; keep it rather than renaming it exported_backend
    honor_labels: true
    file_sd_configs:
      - files: [{targets}]
        refresh_interval: 2s
"""


@dataclass(frozen=True, kw_only=True)
class Target:
    """One /metrics endpoint and the labels Prometheus attaches to its series."""

    url: str
    backend: str
    component: str  # api | worker | dashboard

    def to_file_sd(self) -> dict[str, Any]:
        parts = urllib.parse.urlsplit(self.url)
        return {
            "targets": [parts.netloc],
            "labels": {"backend": self.backend, "component": self.component, "__metrics_path__": parts.path},
        }


def find_prometheus() -> str | None:
    return shutil.which("prometheus") or (
        "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
    )


class Prometheus:
    """A prometheus server on 127.0.0.1, its config and data in ``folder``, in its own process group."""

    def __init__(self, folder: Path, port: int, *, binary: str | None = None, interval: str = "1s") -> None:
        found = binary or find_prometheus()
        if not found:
            raise HarnessError("prometheus is not installed (Debian/Ubuntu: apt-get install prometheus)")
        self.folder = folder
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.targets_path = folder / "targets.json"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "prometheus.yml").write_text(
            CONFIG.format(interval=interval, targets=json.dumps(str(self.targets_path)))
        )
        self.set_targets([])
        self.proc = Managed(
            name="prometheus",
            argv=[
                found,
                f"--config.file={folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=1d",
            ],
            log_path=folder / "prometheus.log",
        )

    def set_targets(self, targets: list[Target]) -> None:
        # atomic: Prometheus never reads half a file
        write_atomic(self.targets_path, json.dumps([t.to_file_sd() for t in targets], indent=1))

    def start(self, env: dict[str, str], timeout: float = 30.0) -> None:
        self.proc.start(env)

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as resp:  # noqa: S310
                    return bool(resp.status == 200)
            except (urllib.error.URLError, OSError):
                return False

        try:
            wait_until(ready, timeout, what="prometheus to be ready", interval=0.2,
                       abort=lambda: None if self.proc.alive() else "prometheus exited")
        except WaitTimeoutError:
            self.proc.stop()
            raise HarnessError(f"prometheus did not start on 127.0.0.1:{self.port}: {self.proc.tail(5)}") from None

    def stop(self) -> None:
        self.proc.stop(timeout=10)

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query through the HTTP API; an invalid expression raises ValueError."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310
                answer = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raise ValueError(f"{expr}: {exc.read().decode(errors='replace')}") from None
        if answer.get("status") != "success":
            raise ValueError(f"{expr}: {answer}")
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def active_targets(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=10) as resp:  # noqa: S310
            targets: list[dict[str, Any]] = json.loads(resp.read())["data"]["activeTargets"]
        return targets
