"""Shared pytest setup: the real-ZooKeeper fixtures (tests/zk_fixtures.py, tests/zk_helpers.py),
the sweep of what a killed earlier run left running (tests/leftovers.py), and no Ray
auto-connect in the test process: a Ray call after a module's ray.shutdown() (a leaked
background thread) must fail loudly, not start a stray local Ray instance whose later loss
makes Ray end the whole pytest process."""

import pytest
from ray._private import auto_init_hook

from tests.leftovers import sweep
from tests.ray_cluster import stop_shared_cluster, stop_shared_ray

pytest_plugins = ["tests.zk_fixtures", "tests.zk_helpers"]
auto_init_hook.enable_auto_connect = False     # this process only; children keep Ray's default


@pytest.fixture(scope="session", autouse=True)
def _killed_runs_cleared(tmp_path_factory):
    sweep(tmp_path_factory.getbasetemp())


def pytest_collection_modifyitems(session, config, items):
    """The modules on the shared cluster (tests/ray_cluster.py) run first, then the others on
    the shared Ray instance, then the rest, each group in its usual order: each shared thing
    starts once and is stopped before the modules that do without it."""
    def uses(item, name: str, shared: bool = False) -> bool:
        defs = item._fixtureinfo.name2fixturedefs.get(name)
        return bool(defs) and (not shared or defs[-1].func.__module__ == "tests.ray_cluster")
    on_cluster = {i.module.__name__ for i in items if uses(i, "cluster", shared=True)}
    on_ray = {i.module.__name__ for i in items if uses(i, "ray_session")} | on_cluster
    items.sort(key=lambda i: (i.module.__name__ not in on_cluster,
                              i.module.__name__ not in on_ray))
    config.stash[_SHARED] = (on_cluster, on_ray)


_SHARED = pytest.StashKey[tuple]()


@pytest.fixture(scope="module", autouse=True)
def _shared_ray_stopped_for_modules_without_it(request):
    on_cluster, on_ray = request.config.stash.get(_SHARED, (set(), set()))
    if request.module.__name__ not in on_ray:
        stop_shared_ray()
    elif request.module.__name__ not in on_cluster:
        stop_shared_cluster()
