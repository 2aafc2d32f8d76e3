"""FastAPI BackgroundTasks passes the parts of the suite that apply to an in-process backend."""

import pytest

from tests.backends.conformance import Conformance

pytestmark = pytest.mark.slow


class TestBackground(Conformance):
    backend = "background"
