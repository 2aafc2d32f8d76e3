"""FastStream passes the conformance suite."""

import pytest

from tests.backends.conformance import Conformance

pytestmark = pytest.mark.slow


class TestFaststream(Conformance):
    backend = "faststream"
