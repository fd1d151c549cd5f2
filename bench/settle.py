"""Warming a fresh system until it is steady, before the side-by-side bench measures it.

Why: a fresh Kafka JVM compiles its hot paths for minutes (HotSpot's C1 and C2 compiler
threads took 0.2-0.3 CPU s/s per broker through every run of a bench that warmed it with
one produce-and-read of 200,000 records), and while they run Kafka answers slower and
costs more per record than it does in service: in the settle windows of nine runs (the
settle notes of bench/results' 2026-11-30 "settled" runs) its ack p50 at 1,000 records/s
fell from 183-278 ms to 0.9-3.7 ms as its compilers went quiet, after 2.5-4.5 min. A
user's Kafka has been up for days: the one the bench compares rayka with must be past its
compiling too.

Rules (the same on both systems; the windows' facts are noted, nothing here is a figure):
1. First a throughput warm-up: WARM_RECORDS records (quick: QUICK_WARM_RECORDS) produced
   idempotent acks=all with linger.ms 5 and read back by one consumer, on a topic of
   6 partitions, RF 3, deleted afterwards (the produce and consume figures' paths).
2. Then paced windows (bench/wire_bench.py latency_once, a fresh topic each, deleted
   after), alternating WINDOWS: 1,000 records/s at linger.ms 0 and 10,000 records/s at
   linger.ms 2, WINDOW_S seconds each (the latency figures' paths).
3. A window is quiet when the brokers' compiler threads (thread names holding "Compiler":
   a JVM's "C1 CompilerThre" and "C2 CompilerThre"; rayka's brokers have none) spent at
   most QUIET_COMPILER_S_PER_S CPU seconds per second per broker over it. The system is
   settled after QUIET_WINDOWS quiet windows in a row (one of each rate).
4. At most MAX_S seconds of windows (quick: one window of each rate, 1 s): a system that
   is not settled by then is measured anyway, with "settled": false in its note (the
   figures' reader sees it), never silently.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.wire_bench import PARTITIONS, consume_once, latency_once, produce_once  # noqa: E402

WARM_RECORDS, QUICK_WARM_RECORDS = 200_000, 10_000
# (records/s, linger.ms)
WINDOWS = ((1_000, 0), (10_000, 2))
WINDOW_S, QUICK_WINDOW_S = 10.0, 1.0
QUIET_COMPILER_S_PER_S = 0.02
QUIET_WINDOWS = 2
MAX_S = 600.0
TIMEOUT_S = 300.0


def compiler_cpu_s(broker_threads_cpu_s: dict[str, float]) -> float:
    """The compiler threads' share of a run's broker CPU seconds by thread name."""
    return sum(v for k, v in broker_threads_cpu_s.items() if "Compiler" in k)


def window(system, rate: int, linger_ms: float, duration_s: float) -> dict:
    """One paced window on a fresh topic: what the settle note keeps of it."""
    topic = system.fresh_topic("vs-settle", PARTITIONS, TIMEOUT_S)
    try:
        got = latency_once(system.bootstrap_servers(), topic, rate, duration_s, linger_ms,
                           broker_pids=list(system.broker_pids().values()))
    finally:
        system.delete_topic(topic)
    spent = got["sent"] / got["achieved"]
    compilers = compiler_cpu_s(got["broker_threads_cpu_s"]) / got["brokers"] / spent
    return {"rate": rate, "linger_ms": linger_ms,
            "compiler_cpu_per_s_per_broker": round(compilers, 4), **window_facts(got),
            "quiet": compilers <= QUIET_COMPILER_S_PER_S}


def window_facts(got: dict) -> dict:
    """What a paced window (wire_bench.latency_once's result) says of the brokers and the
    acknowledgements: CPU µs per record per broker, ack p50 and p99, the machine's busy
    share."""
    return {"broker_us_per_record": round(1e6 * got["broker_cpu_s"] / got["brokers"]
                                          / got["sent"]),
            "ack_p50_ms": round(float(np.percentile(got["ack_ms"], 50)), 2),
            "ack_p99_ms": round(float(np.percentile(got["ack_ms"], 99)), 2),
            "machine_busy": got["machine_busy"]}


def settle(system, quick: bool = False, max_s: float = MAX_S, say=print) -> dict:
    """Warm `system` by the module's rules: {"settled", "seconds", "warm_records",
    "windows": [...]}."""
    t0 = time.monotonic()
    n = QUICK_WARM_RECORDS if quick else WARM_RECORDS
    topic = system.fresh_topic("vs-warm", PARTITIONS, TIMEOUT_S)
    produce_once(system.bootstrap_servers(), topic, n)
    consume_once(system.bootstrap_servers(), topic, n + 1)
    system.delete_topic(topic)
    got = settle_windows(lambda rate, linger, s: window(system, rate, linger, s), quick, max_s,
                         lambda w: say(
                             f"settle {system.name}: t+{time.monotonic() - t0:.0f}s "
                             f"{w['rate']}/s linger {w['linger_ms']}: compilers "
                             f"{w['compiler_cpu_per_s_per_broker']:.3f} CPU s/s per broker, "
                             f"{w['broker_us_per_record']} µs/record, "
                             f"ack p50 {w['ack_p50_ms']} ms"))
    return {"settled": got["settled"], "seconds": round(time.monotonic() - t0, 1),
            "warm_records": n, "windows": got["windows"]}


def settle_windows(run_window, quick: bool, max_s: float, on_window=lambda w: None,
                   clock=time.monotonic) -> dict:
    """Rules 2-4: `run_window(rate, linger_ms, duration_s)` -> a window() dict, called
    until the system is settled or out of time; {"settled", "windows"} (each with its
    start "t_s" from the first window's)."""
    duration = QUICK_WINDOW_S if quick else WINDOW_S
    windows: list[dict] = []
    quiet_run = 0
    t0 = clock()
    while True:
        rate, linger = WINDOWS[len(windows) % len(WINDOWS)]
        started = clock() - t0
        w = run_window(rate, linger, duration) | {"t_s": round(started, 1)}
        windows.append(w)
        on_window(w)
        quiet_run = quiet_run + 1 if w["quiet"] else 0
        if quiet_run >= QUIET_WINDOWS:
            return {"settled": True, "windows": windows}
        if (quick and len(windows) >= len(WINDOWS)) or clock() - t0 >= max_s:
            return {"settled": False, "windows": windows}


if __name__ == "__main__":
    import argparse
    import json

    from bench.systems import SYSTEMS, open_system
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("system", choices=SYSTEMS)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--max-s", type=float, default=MAX_S)
    a = ap.parse_args()
    with open_system(a.system) as s:
        print(json.dumps(settle(s, a.quick, a.max_s), indent=1))
