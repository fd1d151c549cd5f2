"""Shared pytest setup: the real-ZooKeeper fixtures (tests/zk_fixtures.py, tests/zk_helpers.py)."""

pytest_plugins = ["tests.zk_fixtures", "tests.zk_helpers"]
