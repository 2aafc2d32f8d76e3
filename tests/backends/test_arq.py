"""ARQ passes the conformance suite."""

import pytest

from tests.backends.conformance import Conformance

pytestmark = pytest.mark.slow


class TestArq(Conformance):
    backend = "arq"
