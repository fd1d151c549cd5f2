"""bench/run_all.py's bookkeeping on synthetic results: target table, ratios, labels, paths,
failure accounting, plots, and the child-process isolation (no Ray, no ZooKeeper)."""

from __future__ import annotations

import datetime
import json
import textwrap

import pytest

from bench import run_all
from bench.common import figure

pytestmark = pytest.mark.unit


def synthetic() -> dict:
    return {
        "controller": {"bench": "controller", "setup": {}, "extra": {}, "figures": [
            figure("controller.failover_s", "s", [0.1, 0.2, 0.3], better="lower", partitions=100),
            figure("controller.failover_s", "s", [6.0, 7.0, 5.5], target=5.0, better="lower",
                   partitions=10_000),
        ]},
        "produce": {"bench": "produce", "setup": {}, "extra": {}, "figures": [
            figure(run_all.RAYKA_PRODUCE, "records/s", [900_000, 1_100_000, 1_000_000],
                   target=1_000_000, record_bytes=100),
            figure(run_all.RAYKA_CONSUME, "records/s", [3e6, 2e6, 4e6], target=2_000_000),
            figure("latency.e2e.p99_ms", "ms", [15, 18, 25], target=20.0, better="lower", rate=10_000),
            figure("latency.e2e.p50_ms", "ms", [2, 3, 4], target=5.0, better="lower", rate=10_000),
            figure("latency.e2e.p99_ms", "ms", [30, 40, 50], better="lower", rate=50_000),
            figure("latency.rate_50000.p999_ms", "ms", [60, 70, 80], better="lower", rate=50_000),
            figure("latency.rate_50000.achieved_rate", "records/s", [49_000], rate=50_000),
        ]},
        "peers": {"bench": "peers", "setup": {}, "extra": {}, "figures": [
            figure(run_all.NATS_PRODUCE, "records/s", [15_000, 20_000, 25_000]),
            figure(run_all.NATS_CONSUME, "records/s", [40_000, 50_000, 60_000]),
            figure(run_all.QUEUE_PUT, "records/s", [200_000, 250_000, 300_000]),
        ]},
        "scale": {"error": "bench/scale_bench.py does not exist"},
    }


def test_target_table_has_exactly_the_targeted_figures_with_verdicts():
    rows = run_all.target_table(synthetic())
    by_label = {r["label"]: r for r in rows}
    assert set(by_label) == {
        "controller.failover_s[partitions=10000]", run_all.RAYKA_PRODUCE, run_all.RAYKA_CONSUME,
        "latency.e2e.p99_ms[rate=10000]", "latency.e2e.p50_ms"}
    failover = by_label["controller.failover_s[partitions=10000]"]
    assert (failover["median"], failover["min"], failover["max"]) == (6.0, 5.5, 7.0)
    assert failover["target"] == 5.0 and failover["met"] is False      # lower is better: 6 > 5
    assert by_label[run_all.RAYKA_PRODUCE]["met"] is True               # median 1.0 M >= 1.0 M
    assert by_label["latency.e2e.p99_ms[rate=10000]"]["met"] is True    # 18 <= 20
    assert all(r["bench"] != "scale" for r in rows)                     # errors carry no figures


def test_target_table_recomputes_missing_verdict():
    f = figure("x", "s", [3.0], target=2.0, better="lower")
    del f["met"]
    [row] = run_all.target_table({"b": {"figures": [f]}})
    assert row["met"] is False


def test_ratios_from_medians_and_missing_figures():
    ratios = {r["name"]: r for r in run_all.compute_ratios(synthetic())}
    nats = ratios["produce_vs_nats_jetstream_r3"]
    assert nats["ratio"] == pytest.approx(1_000_000 / 20_000)          # 50x
    assert nats["ratio_worst"] == pytest.approx(900_000 / 25_000)      # rayka min / peer max
    assert nats["target"] == 10.0 and nats["met"] is True
    assert ratios["produce_vs_ray_queue_put_batch"]["ratio"] == pytest.approx(4.0)
    assert ratios["produce_vs_ray_queue_put_batch"]["met"] is None      # no target
    consume = ratios["consume_vs_nats_jetstream_r3"]
    assert consume["ratio"] == pytest.approx(60.0) and consume["met"] is True
    missing = ratios["consume_vs_ray_queue_get_batch"]
    assert missing["ratio"] is None and missing["missing"] == [run_all.QUEUE_GET]


def test_ratio_below_target_is_not_met_and_failed_bench_figures_are_ignored():
    benches = synthetic()
    benches["peers"]["figures"][0] = figure(run_all.NATS_PRODUCE, "records/s", [200_000])
    ratio = {r["name"]: r for r in run_all.compute_ratios(benches)}["produce_vs_nats_jetstream_r3"]
    assert ratio["ratio"] == pytest.approx(5.0) and ratio["met"] is False
    benches["produce"] = {"error": "boom", "figures": benches["produce"]["figures"]}
    ratio = {r["name"]: r for r in run_all.compute_ratios(benches)}["produce_vs_nats_jetstream_r3"]
    assert ratio["ratio"] is None and run_all.RAYKA_PRODUCE in ratio["missing"]


def test_report_shape_failures_and_results_path(tmp_path):
    day = datetime.date(2025, 1, 2)
    report = run_all.build_report(synthetic(), {"scale": 0.0}, 12.345, {"cpus": 2}, day, True, 1)
    assert report["date"] == "2025-01-02" and report["total_s"] == 12.35
    assert report["failed"] == ["scale"]
    json.dumps(report)                                                  # serialisable as is
    assert run_all.results_path(tmp_path, day).name == "2025-01-02.json"
    (tmp_path / "2025-01-02.json").write_text("{}")
    assert run_all.results_path(tmp_path, day).name == "2025-01-02-2.json"
    (tmp_path / "2025-01-02-2.json").write_text("{}")
    assert run_all.results_path(tmp_path, day).name == "2025-01-02-3.json"


def test_validate_result():
    assert run_all.validate_result({"figures": [figure("a", "s", [1])]}, "a") is None
    assert "figures" in run_all.validate_result({"bench": "a"}, "a")
    assert "lacks" in run_all.validate_result({"figures": [{"name": "a"}]}, "a")
    assert "not dict" in run_all.validate_result([1], "a")


def test_latency_points_group_by_percentile_and_rate():
    points = run_all.latency_points(synthetic())
    assert sorted(points) == ["p50", "p99", "p99.9"]                   # achieved_rate is no latency
    assert sorted(rate for rate, _ in points["p99"]) == [10_000, 50_000]


def test_plots_are_written(tmp_path):
    report = run_all.build_report(synthetic(), {}, 1.0, {}, datetime.date(2025, 1, 2), True, 1)
    pngs = run_all.write_plots(report, tmp_path / "2025-01-02.json")
    names = sorted(p.name for p in pngs)
    assert names == ["2025-01-02-bench-controller.png", "2025-01-02-bench-peers.png",
                     "2025-01-02-bench-produce.png", "2025-01-02-latency.png", "2025-01-02-peers.png"]
    assert all(p.stat().st_size > 1000 for p in pngs)


def _write_bench(bench_dir, name, body):
    (bench_dir / f"{name}_bench.py").write_text(textwrap.dedent(body))


def test_child_isolation_ok_crash_missing_and_timeout(tmp_path):
    _write_bench(tmp_path, "fine", """
        from bench.common import figure
        def run(quick=False, runs=3):
            print("progress line")
            return {"bench": "fine", "setup": {"quick": quick}, "extra": {},
                    "figures": [figure("fine.x", "s", [1.0] * runs)]}
    """)
    _write_bench(tmp_path, "crash", """
        def run(quick=False, runs=3):
            raise RuntimeError("kaboom")
    """)
    _write_bench(tmp_path, "hang", """
        import subprocess, time
        def run(quick=False, runs=3):
            # a grandchild in its own process group, like a server a bench starts
            p = subprocess.Popen(["sleep", "300"], start_new_session=True)
            open(__file__ + ".pid", "w").write(str(p.pid))
            time.sleep(300)
    """)
    lines = []
    ok = run_all.run_bench("fine", True, 2, 60, bench_dir=tmp_path, echo=lines.append)
    assert "error" not in ok and ok["setup"] == {"quick": True}
    assert ok["figures"][0]["samples"] == [1.0, 1.0]
    assert any("progress line" in line for line in lines)

    crash = run_all.run_bench("crash", False, 1, 60, bench_dir=tmp_path, echo=lines.append)
    assert "kaboom" in crash["error"] and "RuntimeError" in crash["traceback"]

    missing = run_all.run_bench("nope", False, 1, 60, bench_dir=tmp_path, echo=lines.append)
    assert "does not exist" in missing["error"]

    hang = run_all.run_bench("hang", False, 1, 5, bench_dir=tmp_path, echo=lines.append)
    assert "timed out after 5 s" in hang["error"]
    grandchild = int((tmp_path / "hang_bench.py.pid").read_text())
    assert not run_all._alive(grandchild)                               # its tree was stopped
