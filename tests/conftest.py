"""Shared pytest setup: the real-ZooKeeper fixtures (tests/zk_fixtures.py, tests/zk_helpers.py),
the sweep of what a killed earlier run left running (tests/leftovers.py), and no Ray
auto-connect in the test process: a Ray call after a module's ray.shutdown() (a leaked
background thread) must fail loudly, not start a stray local Ray instance whose later loss
makes Ray end the whole pytest process."""

import pytest
from ray._private import auto_init_hook

from tests.leftovers import sweep

pytest_plugins = ["tests.zk_fixtures", "tests.zk_helpers"]
auto_init_hook.enable_auto_connect = False     # this process only; children keep Ray's default


@pytest.fixture(scope="session", autouse=True)
def _killed_runs_cleared(tmp_path_factory):
    sweep(tmp_path_factory.getbasetemp())
