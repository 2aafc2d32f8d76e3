"""deploy/Dockerfile: the image the manifests run, built where a Docker daemon answers (skipped elsewhere)."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from taskbench.k8s.manifests import IMAGE_UID

ROOT = Path(__file__).resolve().parents[2]


def _docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture
def image() -> Iterator[str]:
    """The arq image, built for this test and removed after it."""
    if shutil.which("docker") is None or _docker("info").returncode != 0:
        pytest.skip("no Docker daemon here: the image is built where one answers (docs/scale-out.md)")
    tag = f"taskbench-test-{uuid.uuid4().hex[:8]}:arq"
    built = _docker("build", "--build-arg", "BACKEND=arq", "-f", str(ROOT / "deploy" / "Dockerfile"), "-t", tag,
                    str(ROOT), timeout=1800)
    assert built.returncode == 0, built.stderr[-2000:]
    try:
        yield tag
    finally:
        _docker("image", "rm", "-f", tag)


def test_the_image_runs_every_pod_command_as_its_non_root_user(image: str) -> None:
    uid = _docker("run", "--rm", "--entrypoint", "id", image, "-u")
    assert uid.returncode == 0 and uid.stdout.strip() == str(IMAGE_UID)
    for command in ("serve", "worker", "drive", "collector", "collect", "deploy"):
        shown = _docker("run", "--rm", "--read-only", "--tmpfs", "/tmp", image, "taskbench", command, "--help")
        assert shown.returncode == 0, (command, shown.stderr)
