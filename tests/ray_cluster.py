"""Fixtures for tests on real Ray and the real ZooKeeper, shared by every module that asks
for them (starting Ray or a cluster costs 10-15 s on 2 cores): `ray_session`, a private Ray
instance, and `cluster`, one rayka cluster (3 brokers, 2 controllers, embedded ZooKeeper).
Import the names into a test module to use them. A test on `cluster` leaves it healthy (every
broker back, every ISR full) and names its topics for itself.

Both live from the first module that asks for them. conftest runs the modules on the shared
cluster first, then the other modules on the shared Ray (the shared cluster stopped), then
the rest, each starting a Ray of its own (a multi-node test cluster, a chaos run), with the
shared Ray stopped: Ray is one per process."""

from __future__ import annotations

import uuid

import pytest
import ray

import rayka


_shared_cluster = None


@pytest.fixture(scope="session")
def ray_session():
    # address="local": always a private Ray instance, never a `ray start` cluster that another
    # process left running on this machine (ray.init would attach to it and refuse num_cpus).
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield
    stop_shared_ray()


@pytest.fixture(scope="session")
def cluster(ray_session, tmp_path_factory):
    global _shared_cluster
    _shared_cluster = rayka.start_local(name=f"t{uuid.uuid4().hex[:8]}", brokers=3,
                                        controllers=2,
                                        data_dir=str(tmp_path_factory.mktemp("rayka")),
                                        replica_lag_time_max_ms=3000)
    yield _shared_cluster
    stop_shared_ray()


def stop_shared_cluster() -> None:
    """The shared cluster stops: before a module with a cluster of its own (two idle
    clusters on 2 cores slow each other's ZooKeeper sessions)."""
    global _shared_cluster
    if _shared_cluster is not None:
        _shared_cluster.shutdown()
        _shared_cluster = None


def stop_shared_ray() -> None:
    """The shared cluster and Ray instance stop: at the end, or before a module that starts
    a Ray of its own."""
    stop_shared_cluster()
    if ray.is_initialized():
        ray.shutdown()


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
