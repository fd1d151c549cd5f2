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
