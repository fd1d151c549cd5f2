"""The data path side by side: produce and consume throughput, ack and end-to-end latency,
and what a record and a request cost each broker, through librdkafka on both systems.

Rules (one sample per run per figure; the same definitions on rayka and on Kafka; every
run on FRESH topics of 6 partitions, RF 3, min.insync.replicas 2; 100-byte values; the
clients run in this process):
- neither system is measured cold: the bench settles each fresh one first (bench/settle.py:
  a produce-and-read warm-up, then paced windows until a JVM's compilers are quiet).
- produce.records_per_s: an idempotent acks=all Producer (linger.ms 5, librdkafka's batch
  defaults, queue.buffering.max.messages 1,000,000) sends N records (1,000,000; quick
  50,000) after one warm-up record (metadata and producer id before the clock); from the
  first produce() to flush() returning with every delivery report in; a failed delivery
  fails the bench (bench/common.py produce_all).
- consume.records_per_s: one Consumer assigned every partition at offset 0
  (fetch.queue.backoff.ms 10) reads the N records back (bench/wire_bench.py consume_once);
  this process's CPU seconds per second over it are noted (consume.client_cpu_per_s:
  near 1.0, the one Python thread taking the records is the bound, on either system:
  ~0.9 of it is that thread's).
- latency at 1,000 and 10,000 records/s, linger.ms 0 and 2, and at 200 records/s, linger.ms
  0 (LATENCY_RUNS): a paced idempotent acks=all Producer and a Consumer
  (fetch.wait.max.ms 10) on another thread,
  LATENCY_S (30 s) per run (quick 1 s), each value stamped with
  time.perf_counter() just before produce(): ack = delivery report's arrival - stamp, end
  to end = the consumer's receipt - stamp; p50 and p99 of each
  (`latency.rate_<r>.linger_<l>.{ack,e2e}_{p50,p99}_ms`), and this process's CPU seconds
  per second (`...client_cpu_per_s`; the notes split it by client and thread): the pacing
  loop waits in whole milliseconds (a sub-millisecond poll() spins), but at linger.ms 0
  librdkafka's producer thread spins while its in-flight window is full, so this figure
  grows with the acknowledgement latency and takes CPU from the brokers on the same 2
  cores (bench/wire_bench.py, rule 3). Each run notes the share of the machine's CPUs
  busy over it (`latency_runs[].machine_busy`).
- broker cost at 1,000 records/s (linger.ms 0): the broker processes' CPU seconds over
  that run (/proc, every thread: handling, replication, timers; ZooKeeper and rayka's
  controller actors are not counted, nor is anything Kafka runs outside its JVMs), divided
  by records and by brokers: `cpu.rate_1000.broker_us_per_record`; and by the client
  requests the brokers answered in it (Produce + Fetch, counted by librdkafka's statistics
  per broker): `cpu.rate_1000.broker_us_per_request`. The same per record at 10,000
  records/s (linger.ms 0), where both systems put many records in a request:
  `cpu.rate_10000.broker_us_per_record`.
- the same two at 200 records/s (linger.ms 0): `cpu.rate_200.broker_us_per_{record,request}`.
  Why: at 1,000 records/s, linger.ms 0 this 2-core machine is saturated on both systems
  (brokers, the client's spin, ZooKeeper, Ray's daemons), and there the cost per record is
  what the machine has to give divided by the rate: a broker that answers sooner gets
  more, smaller requests (librdkafka sends a record as soon as its in-flight window has
  room) and fills the machine again (NOTES: rayka's cost per request fell 18 % over four
  runs while its cost per record stayed 514-545 µs, its requests per record rising from
  2.9 to 3.6). At 200 records/s rayka leaves the machine mostly idle; Kafka's JVMs still
  fill it, most of it in their JIT compilers: each run notes the brokers' CPU by thread
  name (`latency_runs[].broker_threads_cpu_s`) beside the machine's busy share.
- the brokers' collector pauses over each paced run (`latency_runs[].broker_gc_pauses`,
  System.gc_pauses: a JVM's G1 pauses from its GC log, a rayka broker's cyclic
  collections): a record acked with acks=all waits out a pause of any replica in its ISR,
  so a p99 near the longest pause is set by the collector, not by the request path.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import self_cpu_s  # noqa: E402
from bench.wire_bench import FETCH_WAIT_MAX_MS, consume_once, produce_once  # noqa: E402
from bench.wire_bench import latency_once as wire_latency_once  # noqa: E402

PARTITIONS, VALUE = 6, 100
RECORDS, QUICK_RECORDS = 1_000_000, 50_000
# (records/s, linger.ms)
LATENCY_RUNS = ((200, 0), (1_000, 0), (1_000, 2), (10_000, 0), (10_000, 2))
PER_REQUEST_RATES = (200, 1_000)
# 30 s: at 10 s (2,000 records at 200/s, the p99 their 20th worst) two back-to-back settled
# runs gave Kafka's 200/s ack p99 as 6.0 then 10.2 ms and its 1,000/s p50 as 1.2 then
# 2.2 ms (bench/results/2026-11-30-kafka-data-settled{,-2}.json), while rayka's medians
# all held within 20 %: one pause or roll in a short window moved a figure.
LATENCY_S, QUICK_LATENCY_S = 30.0, 1.0
TIMEOUT_S = 300.0


def latency_once(system, topic: str, rate: int, duration_s: float, linger_ms: float) -> dict:
    """One paced run (see the module's rules) with the system's broker processes' CPU."""
    return wire_latency_once(system.bootstrap_servers(), topic, rate, duration_s, linger_ms,
                             broker_pids=list(system.broker_pids().values()))


def steps(quick: bool) -> list:
    """One run of the family as (label, step(system, sheet)) parts, in order: the
    throughput pair, then each paced latency run (bench/versus.py: the bench measures the
    systems' same part back to back)."""
    n = QUICK_RECORDS if quick else RECORDS
    duration = QUICK_LATENCY_S if quick else LATENCY_S
    return ([("produce and consume", functools.partial(_throughput, n=n))]
            + [(f"latency {rate}/s linger.ms {linger}",
                functools.partial(_latency, rate=rate, linger=linger, duration=duration))
               for rate, linger in LATENCY_RUNS])


def run(system, sheet, runs: int, quick: bool) -> None:
    for _ in range(runs):
        for _label, step in steps(quick):
            step(system, sheet)


def _throughput(system, sheet, n: int) -> None:
    bootstrap = system.bootstrap_servers()
    topic = system.fresh_topic("vs-data", PARTITIONS, TIMEOUT_S)
    sheet.add("produce.records_per_s", n / produce_once(bootstrap, topic, n), "records/s",
              "higher", records=n, acks="all", idempotent=True, linger_ms=5,
              value_bytes=VALUE, partitions=PARTITIONS)
    cpu0 = self_cpu_s()
    elapsed = consume_once(bootstrap, topic, n + 1)
    sheet.add("consume.records_per_s", n / elapsed, "records/s", "higher", records=n,
              fetch_queue_backoff_ms=10, value_bytes=VALUE, partitions=PARTITIONS)
    # the one consumer is one Python thread over librdkafka's: near 1.0 it is the bound
    sheet.note("consume.client_cpu_per_s", round((self_cpu_s() - cpu0) / elapsed, 3))
    system.delete_topic(topic)


def _latency(system, sheet, rate: int, linger: float, duration: float) -> None:
    topic = system.fresh_topic("vs-lat", PARTITIONS, TIMEOUT_S)
    t0 = time.time()
    got = latency_once(system, topic, rate, duration, linger)
    pauses = system.gc_pauses(t0, time.time())
    stem = f"latency.rate_{rate}.linger_{linger}"
    params = dict(rate=rate, linger_ms=linger, duration_s=duration,
                  fetch_wait_max_ms=FETCH_WAIT_MAX_MS, acks="all", idempotent=True)
    for kind in ("ack", "e2e"):
        p50, p99 = np.percentile(got[f"{kind}_ms"], [50, 99]).tolist()
        sheet.add(f"{stem}.{kind}_p50_ms", p50, "ms", "lower", **params)
        sheet.add(f"{stem}.{kind}_p99_ms", p99, "ms", "lower", **params)
    sheet.add(f"{stem}.client_cpu_per_s", got["client_cpu_per_s"], "CPU s/s", "lower",
              **params)
    if linger == 0:
        per_broker = got["broker_cpu_s"] / got["brokers"]
        sheet.add(f"cpu.rate_{rate}.broker_us_per_record",
                  1e6 * per_broker / got["sent"], "µs", "lower", **params)
    if rate in PER_REQUEST_RATES and linger == 0:
        sheet.add(f"cpu.rate_{rate}.broker_us_per_request",
                  1e6 * got["broker_cpu_s"] / max(got["requests"], 1), "µs", "lower",
                  **params)
    sheet.note("latency_runs", {k: v for k, v in got.items()
                                if k not in ("e2e_ms", "ack_ms")} | {"rate": rate,
                                                                      "linger_ms": linger}
               | _pause_notes(pauses))
    system.delete_topic(topic)


def _pause_notes(pauses: dict) -> dict:
    """The brokers' collector pauses over a paced run (System.gc_pauses): each broker's
    count, total and longest in ms, and the ms of each (an acks=all record waits for every
    replica in the ISR, so a pause of any broker is a pause of its acks)."""
    return {"broker_gc_pauses": {
        str(b): {"count": len(ps), "total_ms": round(sum((ms for _, ms, _ in ps), 0.0), 1),
                 "max_ms": round(max((ms for _, ms, _ in ps), default=0.0), 1),
                 "ms": [round(ms, 1) for _, ms, _ in ps]} for b, ps in pauses.items()}}


if __name__ == "__main__":
    from bench.versus import family_main
    family_main(run, __doc__, default_runs=1)
