"""`rayka demo` (what `make demo` runs: the Spark pipeline) and `rayka demo --log-only` work
end to end on real Ray, ZooKeeper and Spark, and a
launcher failure is one line from the CLI."""

import pytest


from rayka import cli
from rayka.ops import demo

pytestmark = pytest.mark.ray


def test_demo_kills_a_leader_and_loses_nothing():
    s = demo.run(records_total=30_000, partitions=3)
    assert s["records_acknowledged"] == 30_001            # + the probe written after the kill
    assert s["records_read"] == s["records_acknowledged"]
    assert s["lost"] == 0 and s["duplicated"] == 0
    assert s["killed_broker"] in (1, 2, 3)
    assert 0 < s["failover_s"] <= s["isr_rejoin_s"]      # how fast: bench/failover_bench.py


def test_cli_prints_one_line_for_a_launcher_error(monkeypatch, capsys):
    monkeypatch.setenv("RAYKA_ZK_CLASSPATH", "/nonexistent/zookeeper.jar")
    assert cli.main(["demo", "--records", "1000"]) == 1
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if ln.startswith("rayka: ")]
    assert len(errors) == 1 and "zookeeper" in errors[0].lower() and "Traceback" not in err


def test_pipeline_demo_counts_match_and_every_partition_is_pinned():
    from pipeline import demo as pipeline_demo
    s = pipeline_demo.run(clicks_total=30_000, executors=2)
    assert s["mismatched"] == 0 and s["rows_written"] == s["page_minutes"] > 0
    assert s["pinned"] == s["partitions"] == 12
    assert s["task_resolves"] >= 1 and s["new_leader"] not in (None, s["killed_broker"])
