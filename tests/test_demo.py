"""`rayka demo` keeps working: a short run on a real ZooKeeper, and the CLI's error line."""

import pytest

from rayka import cli, demo

pytestmark = pytest.mark.zk


def test_storage_demo_loses_nothing():
    summary = demo.run(records_total=20_000, batch_records=1_000)
    assert summary["lost"] == 0
    assert summary["replicas_identical_to_hw"]
    assert summary["torn_bytes_cut_on_recovery"] == 400
    assert summary["unacked_records_dropped_by_epoch_truncation"] == 1_000
    assert summary["isr"] == [1, 2, 3]
    assert summary["high_watermark"] == summary["records_acknowledged"] == 20_000


def test_cli_prints_one_line_for_a_launcher_error(monkeypatch, capsys):
    monkeypatch.setenv("RAYKA_ZK_CLASSPATH", "/nonexistent/zookeeper.jar")
    assert cli.main(["demo", "--records", "1000"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("rayka: ") and "\n" not in err and "zookeeper" in err.lower()
