"""Suite-wide settings: the one outer bound on every test.

Waits inside tests are either unbounded (a blocking read of the worker's reply) or scaled by
``NX_JAX_TEST_TIME_SCALE`` (tests/helpers.py ``scaled``; the ExUnit suite reads the same
variable). What bounds an unbounded wait is this per-test limit, scaled the same way, so a hung
worker fails its test with a traceback instead of hanging the suite.
"""

from __future__ import annotations

import pytest

from tests.helpers import scaled

# seconds a single test may take on a quiet 2-core machine, many times over (the slowest
# tests take about 20 s there)
TEST_LIMIT_S = 300


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(scaled(TEST_LIMIT_S)))
