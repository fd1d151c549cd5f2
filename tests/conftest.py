"""Shared pytest setup: the real-ZooKeeper fixtures (tests/zk_fixtures.py, tests/zk_helpers.py),
and the sweep of what a killed earlier run left running (tests/leftovers.py)."""

import pytest

from tests.leftovers import sweep

pytest_plugins = ["tests.zk_fixtures", "tests.zk_helpers"]


@pytest.fixture(scope="session", autouse=True)
def _killed_runs_cleared(tmp_path_factory):
    sweep(tmp_path_factory.getbasetemp())
