"""The data path side by side: produce and consume throughput, ack and end-to-end latency,
and what a record and a request cost each broker, through librdkafka on both systems.

Rules (one sample per run per figure; the same definitions on rayka and on Kafka; every
run on FRESH topics of 6 partitions, RF 3, min.insync.replicas 2; 100-byte values; the
clients run in this process):
- warm-up, unreported, first: N/5 records produced and read back as below, on a topic
  deleted afterwards (neither system is measured cold: Kafka's JIT).
- produce.records_per_s: an idempotent acks=all Producer (linger.ms 5, librdkafka's batch
  defaults, queue.buffering.max.messages 1,000,000) sends N records (1,000,000; quick
  50,000) after one warm-up record (metadata and producer id before the clock); from the
  first produce() to flush() returning with every delivery report in; a failed delivery
  fails the bench (bench/common.py produce_all).
- consume.records_per_s: one Consumer assigned every partition at offset 0
  (fetch.queue.backoff.ms 10) reads the N records back (bench/wire_bench.py consume_once).
- latency at 1,000 and 10,000 records/s, linger.ms 0 and 2 (LATENCY_RUNS): a paced
  idempotent acks=all Producer and a Consumer (fetch.wait.max.ms 10) on another thread,
  ~5 s per run (quick 1 s), each value stamped with time.perf_counter() just before
  produce(): ack = delivery report's arrival - stamp, end to end = the consumer's receipt
  - stamp; p50 and p99 of each (`latency.rate_<r>.linger_<l>.{ack,e2e}_{p50,p99}_ms`),
  and this process's CPU seconds per second (`...client_cpu_per_s`: librdkafka's threads
  spin while acks are pending at linger.ms 0, and share the 2 cores with the brokers).
- broker cost at 1,000 records/s (linger.ms 0): the broker processes' CPU seconds over
  that run (/proc, every thread: handling, replication, timers; ZooKeeper and rayka's
  controller actors are not counted, nor is anything Kafka runs outside its JVMs), divided
  by records and by brokers: `cpu.rate_1000.broker_us_per_record`; and by the client
  requests the brokers answered in it (Produce + Fetch, counted by librdkafka's statistics
  per broker): `cpu.rate_1000.broker_us_per_request`.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import proc_cpu_s, produce_all, self_cpu_s  # noqa: E402
from bench.wire_bench import STAMP, consume_once  # noqa: E402

PARTITIONS, VALUE = 6, 100
RECORDS, QUICK_RECORDS = 1_000_000, 50_000
LATENCY_RUNS = ((1_000, 0), (1_000, 2), (10_000, 0), (10_000, 2))   # (records/s, linger.ms)
LATENCY_S, QUICK_LATENCY_S = 5.0, 1.0
FETCH_WAIT_MAX_MS = 10
STATS_MS = 500
TIMEOUT_S = 300.0


def _topic(system, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    system.create_topic(name, PARTITIONS, 3, timeout_s=TIMEOUT_S)
    return name


def produce_once(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "queue.buffering.max.messages": 1_000_000})
    p.produce(topic, b"warm-up")
    if p.flush(TIMEOUT_S):
        raise TimeoutError("the warm-up record was not acknowledged")
    return produce_all(p, topic, n, b"v" * VALUE, TIMEOUT_S)


class _Requests:
    """Produce and Fetch requests a client sent, summed over brokers, from librdkafka's
    statistics (the last report wins: its counters are totals since the client started)."""

    def __init__(self):
        self.last: dict[str, int] = {}

    def on_stats(self, text: str) -> None:
        stats = json.loads(text)
        counts: dict[str, int] = {}
        for b in stats.get("brokers", {}).values():
            if b.get("nodeid", -1) < 0:
                continue                      # the bootstrap entries: no requests of ours
            for api, n in (b.get("req") or {}).items():
                counts[api] = counts.get(api, 0) + n
        self.last = counts


def latency_once(system, topic: str, rate: int, duration_s: float, linger_ms: float) -> dict:
    """One paced run; see the module's rules."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    bootstrap = system.bootstrap_servers()
    preq, creq = _Requests(), _Requests()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"l-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": FETCH_WAIT_MAX_MS,
                  "enable.partition.eof": False, "statistics.interval.ms": STATS_MS,
                  "stats_cb": creq.on_stats})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    e2e: list[float] = []
    acks: list[float] = []
    stop, warm = threading.Event(), threading.Event()

    def delivered(err, msg):
        if err is None and len(msg.value()) >= STAMP.size:
            acks.append(time.perf_counter() - STAMP.unpack_from(msg.value())[0])

    def consume():
        while not stop.is_set():
            m = c.poll(0.05)
            if m is None or m.error() is not None:
                continue
            if len(m.value()) >= STAMP.size:
                e2e.append(time.perf_counter() - STAMP.unpack_from(m.value())[0])
            else:
                warm.set()
    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": linger_ms, "statistics.interval.ms": STATS_MS,
                  "stats_cb": preq.on_stats})
    pad = b"." * (VALUE - STAMP.size)
    pids = list(system.broker_pids().values())
    try:
        p.produce(topic, b"warm")
        p.flush(TIMEOUT_S)
        # the consumer's first fetches are done once it read the warm-up record
        if not warm.wait(TIMEOUT_S):
            raise TimeoutError("the latency consumer never read the warm-up record")
        deadline = time.monotonic() + TIMEOUT_S
        e2e.clear()
        acks.clear()
        p.poll(STATS_MS * 2.5 / 1000)         # one statistics report in: the baseline counts
        req0 = dict(preq.last), dict(creq.last)
        cpu0 = proc_cpu_s(pids)
        sent, t0, me0 = 0, time.perf_counter(), self_cpu_s()
        while (now := time.perf_counter()) < t0 + duration_s:
            due = int((now - t0) * rate) + 1
            while sent < due:
                p.produce(topic, STAMP.pack(time.perf_counter()) + pad, on_delivery=delivered)
                sent += 1
            # pacing: poll() waits for the next record's time while serving delivery reports
            p.poll(max(0.0, t0 + sent / rate - time.perf_counter()))
        spent = time.perf_counter() - t0
        client_cpu = (self_cpu_s() - me0) / spent
        if p.flush(TIMEOUT_S):
            raise TimeoutError(f"records unacknowledged at {rate}/s")
        while len(e2e) < sent:
            if time.monotonic() > deadline + TIMEOUT_S:
                raise TimeoutError(f"read {len(e2e)} of {sent} at {rate}/s")
            time.sleep(0.05)                  # poll interval of a deadline loop
        broker_cpu = proc_cpu_s(pids) - cpu0
        p.poll(STATS_MS * 2.5 / 1000)         # the last statistics report covers the run
        requests = (preq.last.get("Produce", 0) - req0[0].get("Produce", 0)
                    + creq.last.get("Fetch", 0) - req0[1].get("Fetch", 0))
    finally:
        stop.set()
        thread.join(30)
        c.close()
    return {"e2e_ms": np.asarray(e2e) * 1000.0, "ack_ms": np.asarray(acks) * 1000.0,
            "sent": sent, "achieved": sent / spent, "client_cpu_per_s": client_cpu,
            "broker_cpu_s": broker_cpu, "brokers": len(pids), "requests": requests}


def warm_up(system, n: int) -> None:
    """Unreported: n records produced and read back on a topic deleted afterwards, so that
    neither system is measured cold (Kafka's JIT compiles its hot paths under this load)."""
    topic = _topic(system, "vs-warm")
    produce_once(system.bootstrap_servers(), topic, n)
    consume_once(system.bootstrap_servers(), topic, n + 1)
    system.delete_topic(topic)


def run(system, sheet, runs: int, quick: bool) -> None:
    n = QUICK_RECORDS if quick else RECORDS
    duration = QUICK_LATENCY_S if quick else LATENCY_S
    bootstrap = system.bootstrap_servers()
    warm_up(system, n // 5)
    for _ in range(runs):
        topic = _topic(system, "vs-data")
        sheet.add("produce.records_per_s", n / produce_once(bootstrap, topic, n), "records/s",
                  "higher", records=n, acks="all", idempotent=True, linger_ms=5,
                  value_bytes=VALUE, partitions=PARTITIONS)
        sheet.add("consume.records_per_s", n / consume_once(bootstrap, topic, n + 1),
                  "records/s", "higher", records=n, fetch_queue_backoff_ms=10,
                  value_bytes=VALUE, partitions=PARTITIONS)
        system.delete_topic(topic)
        for rate, linger in LATENCY_RUNS:
            topic = _topic(system, "vs-lat")
            got = latency_once(system, topic, rate, duration, linger)
            stem = f"latency.rate_{rate}.linger_{linger}"
            params = dict(rate=rate, linger_ms=linger, duration_s=duration,
                          fetch_wait_max_ms=FETCH_WAIT_MAX_MS, acks="all", idempotent=True)
            for kind in ("ack", "e2e"):
                p50, p99 = np.percentile(got[f"{kind}_ms"], [50, 99]).tolist()
                sheet.add(f"{stem}.{kind}_p50_ms", p50, "ms", "lower", **params)
                sheet.add(f"{stem}.{kind}_p99_ms", p99, "ms", "lower", **params)
            sheet.add(f"{stem}.client_cpu_per_s", got["client_cpu_per_s"], "CPU s/s", "lower",
                      **params)
            if rate == 1_000 and linger == 0:
                per_broker = got["broker_cpu_s"] / got["brokers"]
                sheet.add("cpu.rate_1000.broker_us_per_record", 1e6 * per_broker / got["sent"],
                          "µs", "lower", **params)
                sheet.add("cpu.rate_1000.broker_us_per_request",
                          1e6 * got["broker_cpu_s"] / max(got["requests"], 1), "µs", "lower",
                          **params)
            sheet.note("latency_runs", {k: v for k, v in got.items()
                                        if k not in ("e2e_ms", "ack_ms")} | {"rate": rate,
                                                                              "linger_ms": linger})
            system.delete_topic(topic)


if __name__ == "__main__":
    from bench.versus import family_main
    family_main(run, __doc__, default_runs=1)
