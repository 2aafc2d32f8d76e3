"""What the API tests share: one run id per module, for a module-scoped API process."""

from __future__ import annotations

import uuid

import pytest


@pytest.fixture(scope="module")
def module_run_id() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"

