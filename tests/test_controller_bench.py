"""bench/controller_bench.py runs end to end on the real ZooKeeper at a tiny size."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.zk

BENCH = Path(__file__).resolve().parent.parent / "bench" / "controller_bench.py"


def test_controller_bench_tiny(tmp_path):
    out = tmp_path / "controller_bench.json"
    proc = subprocess.run([sys.executable, str(BENCH), "--sizes", "20", "--runs", "1",
                           "--timeout", "15", "--out", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert json.loads(proc.stdout) == report
    run = report["results"]["20"]["runs"][0]
    assert run["failover_s"] > 0                 # measured; how fast: the bench's own figure
    assert run["failover_request_partitions"]["UpdateMetadataRequest"] == 3 * 20
    assert report["target"]["met"] is None        # 10,000 not measured
    assert report["machine"]["cpus"] and report["machine"]["kazoo"]
    assert out.with_suffix(".png").stat().st_size > 0
