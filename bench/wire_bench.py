"""Kafka clients over the brokers' listeners: librdkafka (confluent-kafka) produce and consume
throughput, end-to-end latency, and what each request costs the broker.

Setup: one local rayka cluster (3 broker actors, 2 controllers, embedded ZooKeeper) on the
Ray instance of this process; the clients run in this process (librdkafka's own threads do
the I/O). Every run gets a FRESH topic of 6 partitions, RF 3, min.insync.replicas 2.

Measured (one sample per run; 100-byte values):
1. produce: an idempotent acks=all Producer (linger.ms 5, librdkafka's batch defaults)
   produces N records (1,000,000; --quick 50,000) with produce() in a loop; the clock runs
   from the first produce() to flush() returning with every delivery report in (a failed
   delivery fails the bench).
2. consume: a Consumer assigned every partition from offset 0 reads the produced topic to
   its end (consume() batches of up to 10,000, never more than is left: a last call asking
   for more waits out its 1 s timeout, which was a third of a 1,000,000-record read;
   fetch.queue.backoff.ms 10: librdkafka's 1,000 ms default makes its own queue the bound,
   not the broker).
3. latency at 1,000 and 10,000 records/s: a paced Producer (acks=all, idempotent,
   linger.ms 0) and a Consumer thread (fetch.wait.max.ms 10) in this process. Ack latency
   = the delivery report's arrival (on_delivery, served by poll() while pacing) -
   time.perf_counter() stamped in the value just before produce(); end-to-end = the time
   the consumer got the record - the same stamp. ~5 s per rate (--quick 1 s). 10,000/s is
   run twice: linger.ms 0 and linger.ms 2 (`...rate_10000.linger_2...`). The pacing
   loop waits in poll() with its timeout rounded up to whole milliseconds
   (common.poll_timeout_s: confluent_kafka truncates, and a sub-millisecond wait spun on a
   core, taking the CPU the brokers were left with). At linger.ms 0 librdkafka's producer
   broker thread itself spins while its in-flight window (5 for an idempotent producer)
   is full, so slow acknowledgements cost client CPU, which slows the brokers sharing
   these 2 cores further. Each run records the client's CPU (`...client_cpu_per_s`: this
   process's CPU seconds per second) and, in the notes, that CPU by client and thread
   (librdkafka's rdk:broker threads, Python) and every request the clients sent.
4. kafka-python at 10,000 records/s, as 3 (linger_ms 0, acks=all; not idempotent: its
   idempotence is not what is compared): a pure-Python client on the Kafka wire, beside
   the native client's Ray calls at the same rate (bench/produce_bench.py latency.rate_*),
   to decide where the native client's data path belongs (`wire.kafka_python.latency.*`).
5. broker cost per request: the broker processes' CPU time (/proc: handling, replication,
   everything) over the produce and consume runs, per Produce / Fetch request of the
   listeners' counters; records per Produce request.
6. the listeners' frame decoder (protocol/frames.py FrameDecoder, in this process, no
   cluster): one 8 MiB request arriving in 4 KiB reads (2,048 feeds) until the frame is
   out, `wire.frame_decoder.8MiB_in_4KiB_reads_s` (the best of 3 per run), and that time
   over the same for 1 MiB, `wire.frame_decoder.8MiB_over_1MiB`: linear cost gives ~8, a
   decoder re-copying its buffer on each feed ~64 (it would move ~8 GiB).
Targets: librdkafka produce >= 600,000 records/s, one consumer >= 1,000,000 records/s;
ack latency at 1,000/s p50 <= 3 ms, p99 <= 10 ms; end to end at 1,000/s p50 <= 5 ms,
p99 <= 15 ms, at 10,000/s p50 <= 5 ms, p99 <= 20 ms; the 8 MiB frame in <= 0.5 s, at most
24 times the 1 MiB one (TARGETS below).

    .venv/bin/python bench/wire_bench.py [--quick] [--runs 3] [--out bench/out/wire.json]
"""

from __future__ import annotations

import json
import struct
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (arg_parser, busy_share_since, emit, figure,  # noqa: E402
                          local_cluster, machine_busy, machine_facts, poll_timeout_s,
                          proc_cpu_s, produce_all, replicated_topic, say, self_cpu_s,
                          thread_cpu_s, threads_cpu_by_name)

NAME = "wire"
DEFAULT_OUT = Path(__file__).resolve().parent / "out" / f"{NAME}.json"
BROKERS, CONTROLLERS, PARTITIONS, VALUE = 3, 2, 6, 100
RECORDS = 1_000_000
LATENCY_RUNS = ((1_000, 0), (10_000, 0), (10_000, 2))     # (records/s, linger.ms)
LATENCY_S = 5.0
QUICK_DIVISOR = 20
TIMEOUT_S = 300.0
STAMP = struct.Struct("<d")
TARGETS = {"wire.produce.acks_all.rf3.100B.records_per_s": 600_000,
           "wire.consume.rf3.100B.records_per_s": 1_000_000,
           "wire.ack_latency.rate_1000.p50_ms": 3.0, "wire.ack_latency.rate_1000.p99_ms": 10.0,
           "wire.latency.rate_1000.p50_ms": 5.0, "wire.latency.rate_1000.p99_ms": 15.0,
           "wire.latency.rate_10000.p50_ms": 5.0, "wire.latency.rate_10000.p99_ms": 20.0,
           "wire.latency.rate_10000.linger_2.p50_ms": 5.0,
           "wire.latency.rate_10000.linger_2.p99_ms": 20.0,
           "wire.frame_decoder.8MiB_in_4KiB_reads_s": 0.5,
           "wire.frame_decoder.8MiB_over_1MiB": 24.0}
FETCH_WAIT_MAX_MS = 10
STATS_MS = 500                     # librdkafka's statistics: request counts per run
PYTHON_CLIENT_RATE = 10_000


def new_topic(cluster) -> str:
    return replicated_topic(cluster, "wire-", PARTITIONS, TIMEOUT_S)


def broker_stats(cluster) -> dict:
    """{api name: [requests, bytes in, bytes out]} summed over brokers and listeners, and
    "cpu_s": the broker processes' CPU seconds so far."""
    import ray
    from bench.security_bench import broker_pids
    out: dict = {"cpu_s": proc_cpu_s(broker_pids(cluster))}
    for stats in ray.get([b.kafka_stats.remote() for b in cluster.broker_actors()]):
        for per_api in stats.values():
            for api, s in per_api.items():
                row = out.setdefault(api, [0, 0, 0])
                for i, key in enumerate(("requests", "bytes_in", "bytes_out")):
                    row[i] += s[key]
    return out


def delta(after: dict, before: dict) -> dict:
    out = {api: [a - b for a, b in zip(row, before.get(api, [0, 0, 0]))]
           for api, row in after.items() if api != "cpu_s"}
    out["cpu_s"] = after["cpu_s"] - before["cpu_s"]
    return out


def frame_decode_s(total: int, chunk: int = 4096, tries: int = 3) -> float:
    """The best of `tries`: seconds for a FrameDecoder to give back one `total`-byte frame
    fed `chunk` bytes at a time (each read a new bytes object, as recv gives them)."""
    from protocol.frames import FrameDecoder, encode_frame
    frame = encode_frame(b"r" * total)
    reads = [frame[i:i + chunk] for i in range(0, len(frame), chunk)]
    best = float("inf")
    for _ in range(tries):
        d, out = FrameDecoder(), []
        start = time.perf_counter()
        for data in reads:
            out += d.feed(data)
        best = min(best, time.perf_counter() - start)
        if len(out) != 1 or len(out[0]) != total:
            raise RuntimeError(f"the decoder gave back {[len(f) for f in out]}, not one frame")
    return best


def produce_once(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "queue.buffering.max.messages": 1_000_000})
    p.produce(topic, b"warm-up")
    if p.flush(TIMEOUT_S):                  # metadata and producer id before the clock
        raise TimeoutError("the warm-up record was not acknowledged")
    return produce_all(p, topic, n, b"v" * VALUE, TIMEOUT_S)


def consume_once(bootstrap: str, topic: str, expected: int) -> float:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"b-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "enable.partition.eof": False,
                  "fetch.queue.backoff.ms": 10})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    n, t0 = 0, time.perf_counter()
    deadline = t0 + TIMEOUT_S
    while n < expected:
        # never ask for more than is left: consume(n) waits for n messages or its timeout,
        # so the last call would wait out the timeout and be counted
        got = c.consume(num_messages=min(10_000, expected - n), timeout=1.0)
        n += sum(1 for m in got if m.error() is None)
        if time.perf_counter() > deadline:
            raise TimeoutError(f"consumer read {n} of {expected}")
    elapsed = time.perf_counter() - t0
    c.close()
    return elapsed


class Requests:
    """The requests a librdkafka client sent, by API, summed over brokers, from its
    statistics (the last report wins: its counters are totals since the client started)."""

    def __init__(self):
        self.last: dict[str, int] = {}

    def on_stats(self, text: str) -> None:
        counts: dict[str, int] = {}
        for b in json.loads(text).get("brokers", {}).values():
            if b.get("nodeid", -1) < 0:
                continue                      # the bootstrap entries: no requests of ours
            for api, n in (b.get("req") or {}).items():
                counts[api] = counts.get(api, 0) + n
        self.last = counts

    def since(self, before: dict[str, int]) -> dict[str, int]:
        return {api: n - before.get(api, 0) for api, n in self.last.items()
                if n != before.get(api, 0)}


def _thread_cpu_by_role(roles: dict[str, set[int]], before: dict, after: dict) -> dict:
    """{role: {thread name: CPU seconds between two thread_cpu_s samples}}; a thread of no
    role counts as "python" (this process's own: the pacing loop, the consumer thread)."""
    out: dict[str, dict[str, float]] = {}
    for tid, (name, cpu) in after.items():
        role = next((r for r, tids in roles.items() if tid in tids), "python")
        spent = cpu - before.get(tid, (name, 0.0))[1]
        if spent > 0:
            key = name.rstrip("0123456789") if name.startswith("rdk:") else name
            out.setdefault(role, {})[key] = round(out.get(role, {}).get(key, 0.0) + spent, 3)
    return out


def latency_once(bootstrap: str, topic: str, rate: int, duration_s: float,
                 linger_ms: float = 0, broker_pids=()) -> dict:
    """One paced run (the module's rule 3): {"e2e_ms", "ack_ms" (arrays), "sent",
    "achieved" (records/s), "client_cpu_per_s", "client_threads_cpu_s" (by client and
    thread name: where the client's CPU went), "requests" (Produce + Fetch sent),
    "requests_by_api" (every request both clients sent in the run), "broker_cpu_s" (the
    processes `broker_pids`, over the run until the last record was read), "brokers",
    "machine_busy" (the share of all the machine's CPUs busy over the paced part: near
    1.0 the run is bound by the machine, not by either system's cost),
    "broker_threads_cpu_s" (the brokers' CPU seconds by thread name over the same span as
    broker_cpu_s: a JVM's compilers apart from its request handlers)}."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    preq, creq = Requests(), Requests()
    tids0 = set(thread_cpu_s())
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"l-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": FETCH_WAIT_MAX_MS,
                  "enable.partition.eof": False, "statistics.interval.ms": STATS_MS,
                  "stats_cb": creq.on_stats})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    c.list_topics(topic, TIMEOUT_S)         # its broker threads exist once metadata is in
    consumer_tids = set(thread_cpu_s()) - tids0
    e2e: list[float] = []
    acks: list[float] = []
    stop, warm = threading.Event(), threading.Event()

    def delivered(err, msg):
        if err is None and len(msg.value()) >= STAMP.size:
            acks.append(time.perf_counter() - STAMP.unpack_from(msg.value())[0])

    def consume():
        # poll(), not consume(n): consume waits for n messages or its timeout
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
    p.list_topics(topic, TIMEOUT_S)
    producer_tids = set(thread_cpu_s()) - tids0 - consumer_tids - {thread.native_id}
    pad = b"." * (VALUE - STAMP.size)
    try:
        p.produce(topic, b"warm")
        if p.flush(TIMEOUT_S):
            raise TimeoutError("the warm-up record was not acknowledged")
        # the consumer's first fetches are done once it read the warm-up record
        if not warm.wait(TIMEOUT_S):
            raise TimeoutError("the latency consumer never read the warm-up record")
        deadline = time.monotonic() + TIMEOUT_S
        e2e.clear()
        acks.clear()
        p.poll(STATS_MS * 2.5 / 1000)         # one statistics report in: the baseline counts
        req0 = dict(preq.last), dict(creq.last)
        cpu0, threads0 = proc_cpu_s(broker_pids), thread_cpu_s()
        broker_threads0 = _broker_threads(broker_pids)
        me0, busy0 = self_cpu_s(), machine_busy()
        # pacing: poll() waits for the next record's time serving delivery reports, so an
        # acknowledgement is stamped when it arrives, not at the next produce(); in whole
        # milliseconds (records falling due meanwhile go out together)
        sent, spent = _pace(
            rate, duration_s,
            lambda: p.produce(topic, STAMP.pack(time.perf_counter()) + pad,
                              on_delivery=delivered),
            lambda wait_s: p.poll(poll_timeout_s(wait_s)))
        client_cpu = (self_cpu_s() - me0) / spent
        busy_share = busy_share_since(busy0)
        threads = _thread_cpu_by_role({"producer": producer_tids, "consumer": consumer_tids},
                                      threads0, thread_cpu_s())
        if p.flush(TIMEOUT_S):
            raise TimeoutError(f"records unacknowledged at {rate}/s")
        _wait_read(e2e, sent, deadline + TIMEOUT_S, "librdkafka", rate)
        broker_cpu = proc_cpu_s(broker_pids) - cpu0
        broker_threads = threads_cpu_by_name(broker_threads0, _broker_threads(broker_pids))
        p.poll(STATS_MS * 2.5 / 1000)         # the last statistics report covers the run
        by_api = {f"producer.{a}": n for a, n in preq.since(req0[0]).items()}
        by_api |= {f"consumer.{a}": n for a, n in creq.since(req0[1]).items()}
    finally:
        stop.set()
        thread.join(30)
        c.close()
    return {"e2e_ms": np.asarray(e2e) * 1000.0, "ack_ms": np.asarray(acks) * 1000.0,
            "sent": sent, "achieved": sent / spent, "client_cpu_per_s": client_cpu,
            "client_threads_cpu_s": threads, "broker_cpu_s": broker_cpu,
            "brokers": len(broker_pids), "machine_busy": round(busy_share, 3),
            "broker_threads_cpu_s": broker_threads,
            "requests": by_api.get("producer.Produce", 0) + by_api.get("consumer.Fetch", 0),
            "requests_by_api": by_api}


def _broker_threads(pids) -> dict:
    out: dict = {}
    for pid in pids:
        out |= thread_cpu_s(pid)
    return out


def python_latency_once(bootstrap: str, topic: str, rate: int, duration_s: float) -> dict:
    """latency_once with kafka-python, a pure-Python client on the sockets: what the native
    client (Ray calls, bench/produce_bench.py latency.rate_*) would be on the Kafka wire."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=FETCH_WAIT_MAX_MS,
                      enable_auto_commit=False)
    c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    c.seek_to_beginning()
    latencies: list[float] = []
    acks: list[float] = []
    stop, warm = threading.Event(), threading.Event()

    def consume():
        while not stop.is_set():
            for batch in c.poll(timeout_ms=FETCH_WAIT_MAX_MS).values():
                now = time.perf_counter()
                latencies.extend(now - STAMP.unpack_from(r.value)[0] for r in batch
                                 if len(r.value) >= STAMP.size)
                if any(len(r.value) < STAMP.size for r in batch):
                    warm.set()
    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    pad = b"." * (VALUE - STAMP.size)
    try:
        p.send(topic, b"warm").get(TIMEOUT_S)
        # the consumer's first fetches are done once it read the warm-up record
        if not warm.wait(TIMEOUT_S):
            raise TimeoutError("kafka-python's consumer never read the warm-up record")
        latencies.clear()

        def send():
            stamp = time.perf_counter()
            p.send(topic, STAMP.pack(stamp) + pad).add_callback(
                lambda _m: acks.append(time.perf_counter() - stamp))
        cpu0 = self_cpu_s()
        sent, spent = _pace(rate, duration_s, send, lambda wait_s: time.sleep(max(0.0, wait_s)))
        achieved, client_cpu = sent / spent, (self_cpu_s() - cpu0) / spent
        p.flush(TIMEOUT_S)
        _wait_read(latencies, sent, time.monotonic() + TIMEOUT_S, "kafka-python", rate)
    finally:
        stop.set()
        thread.join(30)
        p.close(TIMEOUT_S)
        c.close()
    return {"e2e_ms": np.asarray(latencies) * 1000.0, "ack_ms": np.asarray(acks) * 1000.0,
            "achieved": achieved, "client_cpu_per_s": client_cpu}


def _pace(rate: int, duration_s: float, send, pause) -> tuple[int, float]:
    """send() `rate` records a second for `duration_s`; between them pause(s) is told the
    seconds until the next one is due (<= 0 when behind): (records sent, seconds)."""
    sent, t0 = 0, time.perf_counter()
    while (now := time.perf_counter()) < t0 + duration_s:
        due = int((now - t0) * rate) + 1
        while sent < due:
            send()
            sent += 1
        pause(t0 + sent / rate - time.perf_counter())
    return sent, time.perf_counter() - t0


def _wait_read(latencies: list, sent: int, deadline: float, client: str, rate: int) -> None:
    """Until the consumer thread has read all `sent` records (time.monotonic() deadline)."""
    while len(latencies) < sent:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{client}: read {len(latencies)} of {sent} at {rate}/s")
        time.sleep(0.05)                  # poll interval of a deadline loop


def run(quick: bool = False, runs: int = 3) -> dict:
    n = RECORDS // QUICK_DIVISOR if quick else RECORDS
    duration = LATENCY_S / 5 if quick else LATENCY_S
    produced, consumed, costs = [], [], []
    latency: dict[tuple, list] = {run: [] for run in LATENCY_RUNS}
    python: list[dict] = []
    with local_cluster("wire", brokers=BROKERS, controllers=CONTROLLERS) as (cluster, _):
        bootstrap = cluster.bootstrap_servers()
        for run_i in range(runs):
            topic = new_topic(cluster)
            before = broker_stats(cluster)
            elapsed = produce_once(bootstrap, topic, n)
            mid = broker_stats(cluster)
            produced.append(n / elapsed)
            consumed.append(n / consume_once(bootstrap, topic, n + 1))
            cost = {"produce": delta(mid, before), "consume": delta(broker_stats(cluster), mid)}
            costs.append(cost)
            prod = cost["produce"].get("PRODUCE", [0, 0, 0])
            fetch = cost["consume"].get("FETCH", [0, 0, 0])
            say(f"run {run_i}: produce {produced[-1]:,.0f} rec/s ({prod[0]} requests, "
                f"brokers {1e6 * cost['produce']['cpu_s'] / max(prod[0], 1):.0f} µs CPU each), "
                f"consume {consumed[-1]:,.0f} rec/s ({fetch[0]} fetches, brokers "
                f"{1e6 * cost['consume']['cpu_s'] / max(fetch[0], 1):.0f} µs CPU each)")
            cluster.admin().delete_topic(topic, timeout_s=60)
            for rate, linger in LATENCY_RUNS:
                topic = new_topic(cluster)
                got = latency_once(bootstrap, topic, rate, duration, linger)
                e2e = np.percentile(got["e2e_ms"], [50, 99]).tolist()
                ack = np.percentile(got["ack_ms"], [50, 99]).tolist()
                latency[(rate, linger)].append(dict(
                    p50=e2e[0], p99=e2e[1], ack_p50=ack[0], ack_p99=ack[1],
                    achieved=got["achieved"], client_cpu=got["client_cpu_per_s"]))
                say(f"run {run_i}: at {rate:,}/s, linger.ms {linger}: ack p50 {ack[0]:.2f} ms "
                    f"p99 {ack[1]:.2f} ms; end to end p50 {e2e[0]:.2f} ms p99 {e2e[1]:.2f} ms "
                    f"(client CPU {got['client_cpu_per_s']:.2f} s/s)")
                cluster.admin().delete_topic(topic, timeout_s=60)
            topic = new_topic(cluster)
            got = python_latency_once(bootstrap, topic, PYTHON_CLIENT_RATE, duration)
            e2e = np.percentile(got["e2e_ms"], [50, 99]).tolist()
            ack = np.percentile(got["ack_ms"], [50, 99]).tolist()
            python.append(dict(p50=e2e[0], p99=e2e[1], ack_p50=ack[0], ack_p99=ack[1],
                               achieved=got["achieved"], client_cpu=got["client_cpu_per_s"]))
            say(f"run {run_i}: kafka-python at {PYTHON_CLIENT_RATE:,}/s: ack p50 {ack[0]:.2f} "
                f"ms p99 {ack[1]:.2f} ms; end to end p50 {e2e[0]:.2f} ms p99 {e2e[1]:.2f} ms")
            cluster.admin().delete_topic(topic, timeout_s=60)
    params = dict(acks="all", idempotent=True, replication_factor=3, value_bytes=VALUE,
                  partitions=PARTITIONS, records=n, client="confluent-kafka 2.16.1")
    name = "wire.produce.acks_all.rf3.100B.records_per_s"
    figures = [figure(name, "records/s", produced, TARGETS[name], linger_ms=5, **params),
               figure("wire.consume.rf3.100B.records_per_s", "records/s", consumed,
                      TARGETS["wire.consume.rf3.100B.records_per_s"], fetch_queue_backoff_ms=10,
                      **params)]

    def per(kind, api):
        """The brokers' CPU over the phase per request of `api`, in µs."""
        return [1e6 * c[kind]["cpu_s"] / max(c[kind].get(api, [1])[0], 1) for c in costs]
    figures += [
        figure("wire.broker.produce_request.cpu_us", "µs", per("produce", "PRODUCE"),
               None, "lower", **params),
        figure("wire.broker.produce_request.records", "records",
               [n / max(c["produce"].get("PRODUCE", [1])[0], 1) for c in costs], None, **params),
        figure("wire.broker.fetch_request.cpu_us", "µs", per("consume", "FETCH"),
               None, "lower", **params)]
    for rate, linger in LATENCY_RUNS:
        stem = f"wire.latency.rate_{rate}" + (f".linger_{linger}" if linger else "")
        ack_stem = f"wire.ack_latency.rate_{rate}" + (f".linger_{linger}" if linger else "")
        rows = latency[(rate, linger)]
        for q in ("p50", "p99"):
            name = f"{stem}.{q}_ms"
            figures.append(figure(name, "ms", [r[q] for r in rows], TARGETS.get(name),
                                  "lower", rate=rate, duration_s=duration, linger_ms=linger,
                                  fetch_wait_max_ms=FETCH_WAIT_MAX_MS, **params))
            name = f"{ack_stem}.{q}_ms"
            figures.append(figure(name, "ms", [r["ack_" + q] for r in rows],
                                  TARGETS.get(name), "lower", rate=rate, duration_s=duration,
                                  linger_ms=linger, **params))
        figures.append(figure(f"{stem}.achieved_rate", "records/s",
                              [r["achieved"] for r in rows], None, rate=rate, linger_ms=linger))
        figures.append(figure(f"{stem}.client_cpu_per_s", "CPU s/s",
                              [r["client_cpu"] for r in rows], None, "lower", rate=rate,
                              linger_ms=linger))
    stem = f"wire.kafka_python.latency.rate_{PYTHON_CLIENT_RATE}"
    for q in ("p50", "p99"):
        figures.append(figure(f"{stem}.{q}_ms", "ms", [r[q] for r in python], None, "lower",
                              rate=PYTHON_CLIENT_RATE, linger_ms=0, client="kafka-python"))
        figures.append(figure(f"{stem}.ack_{q}_ms", "ms", [r["ack_" + q] for r in python],
                              None, "lower", rate=PYTHON_CLIENT_RATE, client="kafka-python"))
    decode_small = [frame_decode_s(1 << 20) for _ in range(runs)]
    decode_large = [frame_decode_s(8 << 20) for _ in range(runs)]
    if runs:
        say(f"frame decoder, 4 KiB reads: 1 MiB {min(decode_small) * 1000:.1f} ms, "
            f"8 MiB {min(decode_large) * 1000:.1f} ms")
    name = "wire.frame_decoder.8MiB_in_4KiB_reads_s"
    figures.append(figure(name, "s", decode_large, TARGETS[name], "lower", read_bytes=4096,
                          frame_bytes=8 << 20))
    name = "wire.frame_decoder.8MiB_over_1MiB"
    figures.append(figure(name, "x", [large / small for large, small in
                                      zip(decode_large, decode_small)], TARGETS[name], "lower",
                          read_bytes=4096))
    setup = {"brokers": BROKERS, "controllers": CONTROLLERS, "zookeeper": "embedded",
             "partitions_per_topic": PARTITIONS, "min_insync_replicas": 2, "records": n,
             "latency_runs": [list(r) for r in LATENCY_RUNS], "latency_duration_s": duration,
             "client": "confluent-kafka 2.16.1 (librdkafka 2.16.0), in this process",
             "quick": quick, "runs": runs, "machine": machine_facts()}
    return {"bench": NAME, "setup": setup, "figures": figures,
            "extra": {"broker_costs_per_run": costs}}


def main(argv=None) -> dict:
    args = arg_parser(__doc__, DEFAULT_OUT, "1/20 records, 1 s latency runs").parse_args(argv)
    return emit(run(quick=args.quick, runs=args.runs), args.out)


if __name__ == "__main__":
    main()
