"""`rayka demo --log-only` works end to end on real Ray and ZooKeeper (on the suite's shared
Ray instance). The Spark job `make demo` runs is tested in tests/test_pipeline.py, on that
module's Spark; a launcher failure of the demo, in tests/test_cli.py."""

import pytest

from rayka.ops import demo
from tests.ray_cluster import ray_session  # noqa: F401  (fixture)

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


def test_demo_kills_a_leader_and_loses_nothing():
    s = demo.run(records_total=30_000, partitions=3)
    assert s["records_acknowledged"] == 30_001            # + the probe written after the kill
    assert s["records_read"] == s["records_acknowledged"]
    assert s["lost"] == 0 and s["duplicated"] == 0
    assert s["killed_broker"] in (1, 2, 3)
    assert 0 < s["failover_s"] <= s["isr_rejoin_s"]      # how fast: bench/failover_bench.py

