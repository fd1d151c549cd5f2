"""pytest fixtures around the real embedded ZooKeeper (controller.zookeeper.server).

Use from tests/conftest.py with ``from tests.zk_fixtures import *`` or
``pytest_plugins = ["tests.zk_fixtures"]``.

* ``zk_server``   (module scope): one standalone ZooKeeperServer (tickTime 200 ms, so
  sessions negotiate 400..4000 ms) per test module; stopped, data dir removed, after it.
* ``zk_ensemble`` (module scope): a 3-server ZooKeeperEnsemble on loopback.
* ``zk_client``   (function scope): a started kazoo KazooClient (timeout 4 s) on zk_server;
  stopped and closed after the test.
* ``zk_chroot``   (function scope): a unique path string "/t-<uuid hex>" for test isolation.
"""
from __future__ import annotations

import uuid

import pytest
from kazoo.client import KazooClient

from controller.zookeeper.server import ZooKeeperEnsemble, ZooKeeperServer

__all__ = ["zk_server", "zk_ensemble", "zk_client", "zk_chroot"]


@pytest.fixture(scope="module")
def zk_server():
    server = ZooKeeperServer(tick_time_ms=200).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def zk_ensemble():
    ensemble = ZooKeeperEnsemble(3, tick_time_ms=200).start()
    try:
        yield ensemble
    finally:
        ensemble.stop()


@pytest.fixture
def zk_client(zk_server):
    client = KazooClient(hosts=zk_server.connect_string, timeout=4.0)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def zk_chroot():
    return f"/t-{uuid.uuid4().hex}"
