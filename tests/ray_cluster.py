"""Module-scoped fixtures for tests on real Ray and the real ZooKeeper: a private Ray
instance and one rayka cluster (3 brokers, 2 controllers, embedded ZooKeeper) shared by the
tests of a module. Import both names into a test module to use them."""

from __future__ import annotations

import uuid

import pytest
import ray

import rayka


@pytest.fixture(scope="module")
def ray_session():
    # address="local": always a private Ray instance, never a `ray start` cluster that another
    # process left running on this machine (ray.init would attach to it and refuse num_cpus).
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def cluster(ray_session, tmp_path_factory):
    c = rayka.start_local(name=f"t{uuid.uuid4().hex[:8]}", brokers=3, controllers=2,
                          data_dir=str(tmp_path_factory.mktemp("rayka")),
                          replica_lag_time_max_ms=3000)
    yield c
    c.shutdown()


def kill_brokers_and_wait_back(c, brokers, timeout_s: float = 120.0) -> None:
    """Kill the brokers' actors (Ray restarts them) and return once each is registered under a
    NEW ZooKeeper session and no partition is under-replicated. The old registration lingers
    until its session expires, so "registered" alone would pass before the restart; and an ISR
    has not shrunk yet right after a kill, so "not under-replicated" alone passes too early."""
    before = {b: c.store.get_broker(b) for b in brokers}
    for b in brokers:
        c.kill_broker(b)
    wait_broker_back(c, {b: reg.epoch if reg else -1 for b, reg in before.items()}, timeout_s)


def wait_broker_back(c, old_epochs: dict, timeout_s: float = 120.0) -> None:
    """Wait until every broker in `old_epochs` ({broker: registration epoch before its kill})
    has registered anew and every ISR is full again."""
    from rayka.client.admin import wait_for
    c.wait_registered_anew(old_epochs, timeout_s)
    wait_for(lambda: not c.under_replicated(), timeout_s, "every ISR full again")
