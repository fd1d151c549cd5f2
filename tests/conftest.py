"""Shared pytest setup: the real-ZooKeeper fixtures (tests/zk_fixtures.py)."""

pytest_plugins = ["tests.zk_fixtures"]
