"""The bench suite on synthetic results: the report's target table, ratios, labels, paths and
failure accounting (bench/report.py), the plots (bench/plots.py), the terminal summary
(bench/summary.py), and the runner's child-process isolation (bench/run_all.py); no Ray,
no ZooKeeper."""

from __future__ import annotations

import datetime
import json
import textwrap

import pytest

from bench import plots, report, run_all, summary
from bench.common import figure
from bench.systems import System
from rayka.ops.procs import pid_alive

pytestmark = pytest.mark.unit


def synthetic() -> dict:
    return {
        "controller": {"bench": "controller", "setup": {}, "extra": {}, "figures": [
            figure("controller.failover_s", "s", [0.1, 0.2, 0.3], better="lower", partitions=100),
            figure("controller.failover_s", "s", [6.0, 7.0, 5.5], target=5.0, better="lower",
                   partitions=10_000),
        ]},
        "produce": {"bench": "produce", "setup": {}, "extra": {}, "figures": [
            figure(report.RAYKA_PRODUCE, "records/s", [900_000, 1_100_000, 1_000_000],
                   target=1_000_000, record_bytes=100),
            figure(report.RAYKA_CONSUME, "records/s", [3e6, 2e6, 4e6], target=2_000_000),
            figure("latency.e2e.p99_ms", "ms", [15, 18, 25], target=20.0, better="lower", rate=10_000),
            figure("latency.e2e.p50_ms", "ms", [2, 3, 4], target=5.0, better="lower", rate=10_000),
            figure("latency.e2e.p99_ms", "ms", [30, 40, 50], better="lower", rate=50_000),
            figure("latency.rate_50000.p999_ms", "ms", [60, 70, 80], better="lower", rate=50_000),
            figure("latency.rate_50000.achieved_rate", "records/s", [49_000], rate=50_000),
        ]},
        "peers": {"bench": "peers", "setup": {}, "extra": {}, "figures": [
            figure(report.NATS_PRODUCE, "records/s", [15_000, 20_000, 25_000]),
            figure(report.NATS_CONSUME, "records/s", [40_000, 50_000, 60_000]),
            figure(report.QUEUE_PUT, "records/s", [200_000, 250_000, 300_000]),
        ]},
        "scale": {"error": "bench/scale_bench.py does not exist"},
    }


def test_target_table_has_exactly_the_targeted_figures_with_verdicts():
    rows = report.target_table(synthetic())
    by_label = {r["label"]: r for r in rows}
    assert set(by_label) == {
        "controller.failover_s[partitions=10000]", report.RAYKA_PRODUCE, report.RAYKA_CONSUME,
        "latency.e2e.p99_ms[rate=10000]", "latency.e2e.p50_ms"}
    failover = by_label["controller.failover_s[partitions=10000]"]
    assert (failover["median"], failover["min"], failover["max"]) == (6.0, 5.5, 7.0)
    assert failover["target"] == 5.0 and failover["met"] is False      # lower is better: 6 > 5
    assert by_label[report.RAYKA_PRODUCE]["met"] is True               # median 1.0 M >= 1.0 M
    assert by_label["latency.e2e.p99_ms[rate=10000]"]["met"] is True    # 18 <= 20
    assert all(r["bench"] != "scale" for r in rows)                     # errors carry no figures


def test_target_table_recomputes_missing_verdict():
    f = figure("x", "s", [3.0], target=2.0, better="lower")
    del f["met"]
    [row] = report.target_table({"b": {"figures": [f]}})
    assert row["met"] is False


def test_ratios_from_medians_and_missing_figures():
    ratios = {r["name"]: r for r in report.compute_ratios(synthetic())}
    nats = ratios["produce_vs_nats_jetstream_r3"]
    assert nats["ratio"] == pytest.approx(1_000_000 / 20_000)          # 50x
    assert nats["ratio_worst"] == pytest.approx(900_000 / 25_000)      # rayka min / peer max
    assert nats["target"] == 10.0 and nats["met"] is True
    assert ratios["produce_vs_ray_queue_put_batch"]["ratio"] == pytest.approx(4.0)
    assert ratios["produce_vs_ray_queue_put_batch"]["met"] is None      # no target
    consume = ratios["consume_vs_nats_jetstream_r3"]
    assert consume["ratio"] == pytest.approx(60.0) and consume["met"] is True
    missing = ratios["consume_vs_ray_queue_get_batch"]
    assert missing["ratio"] is None and missing["missing"] == [report.QUEUE_GET]


def test_ratio_below_target_is_not_met_and_failed_bench_figures_are_ignored():
    benches = synthetic()
    benches["peers"]["figures"][0] = figure(report.NATS_PRODUCE, "records/s", [200_000])
    ratio = {r["name"]: r for r in report.compute_ratios(benches)}["produce_vs_nats_jetstream_r3"]
    assert ratio["ratio"] == pytest.approx(5.0) and ratio["met"] is False
    benches["produce"] = {"error": "boom", "figures": benches["produce"]["figures"]}
    ratio = {r["name"]: r for r in report.compute_ratios(benches)}["produce_vs_nats_jetstream_r3"]
    assert ratio["ratio"] is None and report.RAYKA_PRODUCE in ratio["missing"]


def test_report_shape_failures_and_results_path(tmp_path):
    day = datetime.date(2025, 1, 2)
    built = report.build_report(synthetic(), {"scale": 0.0}, 12.345, {"cpus": 2}, day, True, 1,
                                budget_s=1200)
    assert built["date"] == "2025-01-02" and built["total_s"] == 12.35
    assert built["failed"] == ["scale"] and built["budget_s"] == 1200
    json.dumps(built)                                                   # serialisable as is
    assert report.results_path(tmp_path, day).name == "2025-01-02.json"
    (tmp_path / "2025-01-02.json").write_text("{}")
    assert report.results_path(tmp_path, day).name == "2025-01-02-2.json"
    (tmp_path / "2025-01-02-2.json").write_text("{}")
    assert report.results_path(tmp_path, day).name == "2025-01-02-3.json"


def test_validate_result():
    assert run_all.validate_result({"figures": [figure("a", "s", [1])]}, "a") is None
    assert "figures" in run_all.validate_result({"bench": "a"}, "a")
    assert "lacks" in run_all.validate_result({"figures": [{"name": "a"}]}, "a")
    assert "not dict" in run_all.validate_result([1], "a")


def test_latency_points_group_by_percentile_and_rate():
    points = plots.latency_points(synthetic())
    assert sorted(points) == ["p50", "p99", "p99.9"]                   # achieved_rate is no latency
    assert sorted(rate for rate, _ in points["p99"]) == [10_000, 50_000]


def test_plots_are_written(tmp_path):
    built = report.build_report(synthetic(), {}, 1.0, {}, datetime.date(2025, 1, 2), True, 1,
                                budget_s=1200)
    pngs = plots.write_plots(built, tmp_path / "2025-01-02.json")
    names = sorted(p.name for p in pngs)
    assert names == ["2025-01-02-bench-controller.png", "2025-01-02-bench-peers.png",
                     "2025-01-02-bench-produce.png", "2025-01-02-latency.png", "2025-01-02-peers.png"]
    assert all(p.stat().st_size > 1000 for p in pngs)


def test_summary_prints_every_figure_ratio_and_failure(tmp_path, capsys):
    walls = {"controller": 1.0, "produce": 2.0, "peers": 3.0, "scale": 0.0}
    machine = {"cpus": 2, "load_average": {"at_start": [0.21, 0.1, 0.05],
                                           "at_end": [1.5, 1.2, 0.7]}}
    built = report.build_report(synthetic(), walls, 1500.0, machine, datetime.date(2025, 1, 2),
                                True, 1, budget_s=1200)
    summary.print_summary(built, tmp_path / "2025-01-02.json", [], {"scale": 900})
    out = capsys.readouterr().out
    assert "at the start [0.21, 0.1, 0.05]" in out
    assert "controller.failover_s[partitions=10000]" in out             # labels are not markup
    assert "produce_vs_nats_jetstream_r3" in out and "50.0" in out
    assert "budget 20 min EXCEEDED" in out
    assert "failed benches: scale" in out


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
    assert not pid_alive(grandchild)                               # its tree was stopped


# -- the side-by-side bench (bench/kafka_bench.py) ----------------------------------------------
def _sheets():
    from bench.versus import Sheet
    ray_sheet, kafka_sheet = Sheet("rayka"), Sheet("kafka")
    for sheet, produce, ack, lost in ((ray_sheet, [200.0, 300.0, 250.0], [2.0, 4.0, 3.0], [0, 0, 0]),
                                      (kafka_sheet, [100.0, 100.0, 200.0], [4.0, 2.0, 6.0], [0, 1, 0])):
        sheet.family = "data"
        for p, a in zip(produce, ack):
            sheet.add("produce.records_per_s", p, "records/s", "higher", records=10)
            sheet.add("latency.ack_p50_ms", a, "ms", "lower", rate=1000)
        sheet.family = "failover"
        for n in lost:
            sheet.add("rolling_restart.lost", n, "records", "lower", target=0)
    ray_sheet.add("rayka_only.s", 1.0, "s", "lower")
    return {"rayka": ray_sheet, "kafka": kafka_sheet}


class ScriptedWindows:
    """Paced windows whose compiler CPU follows a script; the clock advances WINDOW_S a
    window (bench/settle.py's settle_windows)."""

    def __init__(self, compilers):
        self.compilers, self.calls, self.now = list(compilers), [], 0.0

    def clock(self) -> float:
        return self.now

    def __call__(self, rate, linger_ms, duration_s):
        self.calls.append((rate, linger_ms, duration_s))
        self.now += duration_s
        c = self.compilers.pop(0)
        return {"rate": rate, "linger_ms": linger_ms, "compiler_cpu_per_s_per_broker": c,
                "quiet": c <= 0.02}


@pytest.mark.parametrize("compilers, settled, windows", [
    ([0.2, 0.1, 0.01, 0.3, 0.01, 0.015], True, 6),     # a loud window resets the quiet run
    ([0.0, 0.0], True, 2),                              # rayka: no compilers at all
    ([0.2] * 100, False, 60),                           # never quiet: stops at MAX_S
])
def test_settle_waits_for_quiet_compilers_in_a_row(compilers, settled, windows):
    from bench import settle
    fake = ScriptedWindows(compilers)
    got = settle.settle_windows(fake, False, settle.MAX_S, clock=fake.clock)
    assert got["settled"] is settled
    assert len(got["windows"]) == windows
    assert [c[:2] for c in fake.calls[:2]] == [(1_000, 0), (10_000, 2)]   # the rates alternate
    assert [w["t_s"] for w in got["windows"]] == [i * settle.WINDOW_S for i in range(windows)]


def test_settle_quick_is_one_window_of_each_rate():
    from bench import settle
    fake = ScriptedWindows([0.5, 0.5, 0.5])
    got = settle.settle_windows(fake, True, settle.MAX_S, clock=fake.clock)
    assert (got["settled"], len(got["windows"])) == (False, 2)
    assert {c[2] for c in fake.calls} == {settle.QUICK_WINDOW_S}


class UnreachableSystem(System):
    """A system whose topics cannot be created (its brokers gone)."""
    name = "kafka"

    def bootstrap_servers(self) -> str:
        return "127.0.0.1:9"

    def create_topic(self, name, partitions, replication_factor=3, config=None,
                     timeout_s=300.0):
        raise TimeoutError(f"{name}: no broker answered")


def test_a_settle_that_fails_is_a_family_error_and_the_families_still_run():
    from bench.kafka_bench import _settle
    errors: list = []
    note = _settle(UnreachableSystem(), True, 2, errors)
    assert note["settled"] is False and note["run"] == 2
    assert "no broker answered" in note["error"]
    assert [(e["system"], e["family"], e["run"]) for e in errors] == [("kafka", "settle", 2)]


class LoggedSystem(System):
    """A system that only records what the bench does with it, in one shared log."""

    def __init__(self, name, log, heals=True):
        self.name, self.log, self.heals = name, log, heals
        self.settings = {"brokers": 0}

    def wait_healed(self, timeout_s=180.0):
        self.log.append((self.name, "heal"))
        if not self.heals:
            raise TimeoutError(f"{self.name} did not heal")

    def close(self):
        self.log.append((self.name, "close"))


class StepFamily:
    """A family of two steps recording one figure each; step "b" raises on `fails`."""

    def __init__(self, log, fails=()):
        self.log, self.fails = log, set(fails)

    def steps(self, quick):
        def step(label):
            def run(system, sheet):
                self.log.append((system.name, label))
                if (system.name, label) in self.fails:
                    raise RuntimeError(f"{label} broke")
                sheet.add(f"fig.{label}", 1.0, "s", "lower")
            return run
        return [(label, step(label)) for label in ("a", "b")]


def _paired(log, runs, fails=(), heals=True):
    from bench.kafka_bench import run_paired
    from bench.versus import Sheet
    sheets = {n: Sheet(n) for n in ("rayka", "kafka")}
    errors: list = []
    systems = {n: LoggedSystem(n, log, heals or n != "kafka") for n in sheets}
    note = run_paired(["rayka", "kafka"], sheets, ["data"], True, runs, errors, {}, {},
                      open_=systems.__getitem__,
                      settle_=lambda system, quick, run_i, errs: log.append(
                          (system.name, "settle")) or {"settled": True},
                      module=lambda fam: StepFamily(log, fails))
    return sheets, errors, note


def test_paired_family_takes_each_step_on_both_systems_back_to_back():
    log: list = []
    sheets, errors, note = _paired(log, runs=2)
    assert log == [("rayka", "settle"), ("kafka", "settle"),
                   ("rayka", "a"), ("kafka", "a"), ("rayka", "b"), ("kafka", "b"),
                   ("kafka", "a"), ("rayka", "a"), ("kafka", "b"), ("rayka", "b"),
                   ("kafka", "close"), ("rayka", "close")]
    assert note["orders"] == [["rayka", "kafka"], ["kafka", "rayka"]]
    assert note["idle_cores"] >= 0 and note["left_out"] == [] and errors == []
    for sheet in sheets.values():
        assert sheet.series["fig.a"].samples == [1.0, 1.0]
        assert sheet.series["fig.a"].params == {"family": "data"}
        assert [m["paired"] for m in sheet.extra["machine"]] == [True, True]


def test_paired_step_that_fails_is_a_family_error_and_an_unhealed_system_is_left_out():
    log: list = []
    sheets, errors, note = _paired(log, runs=2, fails={("kafka", "b")}, heals=False)
    assert [(e["system"], e["family"], e["run"]) for e in errors] == [("kafka", "data", 0)]
    assert "b broke" in errors[0]["error"]
    assert ("kafka", "heal") in log
    assert [e for e in log if e[0] == "kafka" and e[1] in ("a", "b")] == [("kafka", "a"),
                                                                      ("kafka", "b")]
    assert note["left_out"] == ["kafka"]
    assert sheets["rayka"].series["fig.b"].samples == [1.0, 1.0]


def test_after_ctrl_c_a_failed_step_stops_the_bench_and_closes_every_system():
    """librdkafka hands a Ctrl-C back as a SystemError: once the handler has seen it, the
    bench raises KeyboardInterrupt instead of recording a family error and going on."""
    from bench import kafka_bench
    log: list = []
    kafka_bench.interrupted.set()
    try:
        with pytest.raises(KeyboardInterrupt):
            _paired(log, runs=2, fails={("rayka", "a")})
    finally:
        kafka_bench.interrupted.clear()
    assert ("kafka", "a") not in log and ("rayka", "b") not in log
    assert log[-2:] == [("kafka", "close"), ("rayka", "close")]


def test_data_family_steps_are_the_throughput_then_each_paced_run():
    from bench import versus_data
    labels = [label for label, _ in versus_data.steps(True)]
    assert labels == ["produce and consume"] + [
        f"latency {rate}/s linger.ms {linger}" for rate, linger in versus_data.LATENCY_RUNS]


def test_only_families_with_steps_are_paired_and_only_with_two_systems():
    from bench.kafka_bench import paired_families
    assert paired_families(["data", "groups", "failover"], ["rayka", "kafka"]) == ["data"]
    assert paired_families(["data"], ["rayka"]) == []


def test_compiler_cpu_counts_only_a_jvms_compiler_threads():
    from bench.settle import compiler_cpu_s
    assert compiler_cpu_s({"C2 CompilerThre": 1.5, "C1 CompilerThre": 0.5,
                           "data-plane-kafka-request-handler-#": 3.0,
                           "ray::broker-#:B": 2.0}) == 2.0


def test_sheet_keeps_one_unit_and_direction_per_name():
    from bench.versus import Sheet
    sheet = Sheet("rayka")
    sheet.add("x", 1, "s", "lower")
    with pytest.raises(ValueError, match="recorded as s/lower"):
        sheet.add("x", 2, "ms", "lower")
    with pytest.raises(ValueError, match="better"):
        sheet.add("y", 2, "ms", "smaller")
    sheet.family = "data"
    sheet.add("z", 3, "ms", "lower", rate=5)
    assert sheet.series["z"].params == {"family": "data", "rate": 5}
    assert sheet.series["x"].samples == [1.0]


def test_versus_figures_pair_the_systems_run_by_run():
    from bench.kafka_bench import versus_figures
    figs = {f["name"]: f for f in versus_figures(_sheets())}
    produce = figs["versus.produce.records_per_s.ratio"]
    assert produce["samples"] == [2.0, 3.0, 1.25] and produce["target"] == 1.0
    assert produce["met"] is True and produce["params"]["family"] == "data"
    ack = figs["versus.latency.ack_p50_ms.ratio"]
    assert ack["samples"] == [0.5, 2.0, 0.5] and ack["better"] == "lower" and ack["met"] is True
    # Kafka's zero samples have no ratio; a target of the family's own stays on both sides
    assert figs["versus.rolling_restart.lost.ratio"]["samples"] == [0.0]
    assert figs["versus.rolling_restart.lost.kafka"]["target"] == 0
    assert figs["versus.rolling_restart.lost.kafka"]["met"] is True     # median 0
    # a figure only one system recorded still gets both sides (one empty), no ratio
    assert figs["versus.rayka_only.s.kafka"]["samples"] == []
    assert "versus.rayka_only.s.ratio" not in figs


def test_versus_rows_ratio_ahead_and_family_errors_fail_the_bench():
    from bench.kafka_bench import versus_figures
    benches = {"kafka": {"bench": "kafka", "setup": {}, "extra": {},
                         "figures": versus_figures(_sheets()),
                         "family_errors": [{"system": "kafka", "family": "scale", "run": 1,
                                            "error": "boom"}]}}
    rows = {r["name"]: r for r in report.compute_versus(benches)}
    produce = rows["produce.records_per_s"]
    assert produce["rayka"]["median"] == 250.0 and produce["kafka"]["median"] == 100.0
    assert produce["ratio"] == pytest.approx(2.5) and produce["ahead"] is True
    assert produce["ratio_runs"]["median"] == 2.0 and produce["family"] == "data"
    ack = rows["latency.ack_p50_ms"]
    assert ack["ratio"] == pytest.approx(0.75) and ack["ahead"] is True  # lower is better
    assert rows["rolling_restart.lost"]["ratio"] is None                 # Kafka's median is 0
    assert rows["rayka_only.s"]["kafka"]["median"] is None and rows["rayka_only.s"]["ahead"] is None
    built = report.build_report(benches, {}, 1.0, {}, datetime.date(2025, 1, 2), False, 3,
                                budget_s=3600)
    assert built["failed"] == ["kafka: kafka scale run 1"]
    assert len(built["versus"]) == 4


def test_versus_plots_per_family_and_summary_table(tmp_path, capsys):
    from bench.kafka_bench import versus_figures
    benches = {"kafka": {"bench": "kafka", "setup": {}, "extra": {},
                         "figures": versus_figures(_sheets())}}
    built = report.build_report(benches, {"kafka": 5.0}, 5.0, {}, datetime.date(2025, 1, 2),
                                False, 3, budget_s=3600)
    pngs = plots.write_plots(built, tmp_path / "2025-01-02.json")
    assert sorted(p.name for p in pngs) == ["2025-01-02-versus-data.png",
                                            "2025-01-02-versus-failover.png"]
    assert plots.latency_points(benches) == {}          # versus.* latencies are not rayka's own
    summary.print_summary(built, tmp_path / "2025-01-02.json", pngs, {"kafka": 3600})
    out = capsys.readouterr().out
    assert "rayka beside Apache Kafka" in out and "produce.records_per_s" in out
    assert "2.50" in out and "0.75" in out
    assert "versus.produce" not in out                  # not repeated in the figure table


@pytest.mark.parametrize("wait_s, timeout_s", [
    (0.0008, 0.001),      # int(0.8) would be 0 ms: poll would return at once, a spin
    (0.001, 0.001),
    (0.0021, 0.003),
    (0.0, 0.0),
    (-0.5, 0.0),          # behind schedule: serve what is there, wait for nothing
])
def test_poll_timeout_rounds_waits_up_to_whole_milliseconds(wait_s, timeout_s):
    from bench.common import poll_timeout_s
    assert poll_timeout_s(wait_s) == pytest.approx(timeout_s)


def test_thread_cpu_names_this_process_threads_and_counts_their_cpu():
    import threading
    import time

    from bench.common import thread_cpu_s
    done, release = threading.Event(), threading.Event()

    def spin():
        end = time.thread_time() + 0.2       # CPU time, not wall time: a busy thread
        while time.thread_time() < end:
            pass
        done.set()
        release.wait(30)                     # alive while sampled: ended threads are missing
    t = threading.Thread(target=spin, name="spinner")
    before = thread_cpu_s()
    t.start()
    assert done.wait(30)
    after = thread_cpu_s()
    release.set()
    t.join(30)
    assert threading.get_native_id() in after
    name, cpu = after[t.native_id]          # Python 3.11 leaves its threads' OS name
    assert cpu - before.get(t.native_id, (name, 0.0))[1] >= 0.1


def test_thread_cpu_survives_threads_ending_while_it_reads():
    """Threads that end between the listing and the read (ENOENT) or during the read
    (ESRCH) are left out, never raised: the latency bench samples beside librdkafka's
    threads coming and going."""
    import threading
    import time

    from bench.common import thread_cpu_s
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            t = threading.Thread(target=lambda: None)
            t.start()
            t.join()
    churners = [threading.Thread(target=churn) for _ in range(2)]
    for t in churners:
        t.start()
    try:
        deadline = time.monotonic() + 1.0
        samples = 0
        while time.monotonic() < deadline:
            assert threading.get_native_id() in thread_cpu_s()
            samples += 1
    finally:
        stop.set()
        for t in churners:
            t.join(30)
    assert samples > 10


def test_threads_cpu_by_name_sums_every_brokers_thread_of_a_name():
    """Threads of one name in several processes (a JVM's compilers, one per broker) make
    one entry, a number after '-' made '#'; a thread new since the first sample counts whole;
    tiny entries are left out; the largest comes first."""
    from bench.common import threads_cpu_by_name
    before = {11: ("C2 CompilerThre", 5.0), 21: ("C2 CompilerThre", 1.0),
              12: ("data-plane-kafka-1", 2.0), 13: ("GC Thread#0", 1.0),
              14: ("C1 CompilerThre", 1.0)}
    after = {11: ("C2 CompilerThre", 6.5), 21: ("C2 CompilerThre", 1.5),
             12: ("data-plane-kafka-1", 2.25), 22: ("data-plane-kafka-2", 0.25),
             13: ("GC Thread#0", 1.001), 14: ("C1 CompilerThre", 1.25)}
    got = threads_cpu_by_name(before, after)
    assert got == {"C2 CompilerThre": 2.0, "data-plane-kafka-#": 0.5, "C1 CompilerThre": 0.25}
    assert list(got) == ["C2 CompilerThre", "data-plane-kafka-#", "C1 CompilerThre"]


def test_thread_cpu_of_another_process_by_pid():
    import os
    import subprocess
    import sys

    from bench.common import thread_cpu_s
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        assert child.pid in thread_cpu_s(child.pid)      # its main thread's id is its pid
        assert os.getpid() not in thread_cpu_s(child.pid)
    finally:
        child.stdin.close()
        child.wait(30)


class StepClock:
    """(cpu, wall) clocks that move on by the next of `steps` (cpu ms, wall ms) when a
    measured loop ends: at every second read of the CPU clock (machine_pace reads it
    first, before and after each loop)."""

    def __init__(self, steps):
        self.steps, self.cpu_s, self.wall_s, self._reads = list(steps), 0.0, 0.0, 0

    def cpu(self) -> float:
        self._reads += 1
        if self._reads % 2 == 0:
            c, w = self.steps.pop(0)
            self.cpu_s += c / 1000
            self.wall_s += w / 1000
        return self.cpu_s

    def wall(self) -> float:
        return self.wall_s


def test_machine_pace_is_the_best_of_its_tries_by_wall_time():
    from bench.common import machine_pace
    clock = StepClock([(90.0, 140.0), (95.0, 100.0), (80.0, 120.0)])
    assert machine_pace(loops=10, tries=3, clock=(clock.cpu, clock.wall)) == \
        {"loops": 10, "cpu_ms": 95.0, "wall_ms": 100.0}
    real = machine_pace(loops=20_000, tries=2)
    assert real["wall_ms"] > 0 and real["cpu_ms"] >= 0


def test_steal_is_the_eighth_value_of_the_cpu_line():
    import os
    from bench.common import steal_s
    tick = os.sysconf("SC_CLK_TCK")
    assert steal_s(f"cpu  10 0 5 900 1 0 2 {3 * tick} 0 0") == 3.0
    assert steal_s("cpu  10 0 5 900 1 0 2") == 0.0          # not counted there
    assert steal_s() >= 0.0


def test_busy_share_since_a_sample_is_a_share_of_every_cpu():
    from bench.common import busy_share_since, machine_busy
    assert 0.0 <= busy_share_since(machine_busy()) <= 1.0
    busy, total = machine_busy()
    assert busy_share_since((0, 0)) == pytest.approx(busy / total, rel=0.01)


def test_each_systems_run_notes_the_machines_pace_and_steal():
    from bench.kafka_bench import run_system_once
    from bench.versus import Sheet
    sheet = Sheet("rayka")
    run_system_once("rayka", sheet, [], True, 0, [], {}, {})     # no family: no cluster
    (machine,) = sheet.extra["machine"]
    assert set(machine) == {"loops", "cpu_ms", "wall_ms", "steal_s"}
    assert machine["wall_ms"] > 0 and machine["steal_s"] >= 0


class StealingRuns:
    """run_system_once's stand-in: each system's run notes only the steal it is given."""

    def __init__(self, steal: dict):
        self.steal = steal

    def __call__(self, name, sheet, families, quick, run_i, errors, wall, settings):
        sheet.note("machine", {"wall_ms": 45.0, "steal_s": self.steal[name][run_i]})


def test_the_bench_marks_a_run_whose_systems_lost_far_apart_to_steal(monkeypatch, capsys):
    from bench import kafka_bench
    monkeypatch.setattr(kafka_bench, "run_system_once",
                        StealingRuns({"rayka": [0.3, 1.0], "kafka": [40.0, 2.0]}))
    out = kafka_bench.run(runs=2, families=("data",))
    assert [r["uneven"] for r in out["setup"]["steal_per_run"]] == [True, False]
    err = capsys.readouterr().err
    assert "run 0: uneven" in err and "run 1: uneven" not in err
