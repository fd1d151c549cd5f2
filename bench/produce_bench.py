"""Produce / consume throughput and end-to-end latency through rayka's PUBLIC driver API.

Setup: one local rayka cluster (3 broker actors, 2 controllers, embedded ZooKeeper) on the
Ray instance of this process, started once for the whole run; one driver (this process).
Every configuration and run gets a FRESH topic of 6 partitions (RF 3 with
min.insync.replicas 2, or RF 1 with 1), deleted after the run. Only the public API is used
(producer send / send_batch / flush / close, consumer assign / seek / poll / end_offsets),
so the bench keeps working while the producer's internals change.

Measured (one sample per run, `runs` runs; MB = 10^6 bytes of record values):
1. Produce throughput, value size 100 B | 1 KiB x acks 1 | all x RF 1 | 3 x API:
   - bulk: `send_batch` with lists of ~1 MiB of values (the producer's batch size), the
     sticky partitioner moving to another partition per call;
   - per_record: `send()` in a loop (no key: sticky partitioner).
   Clock: from the first call to `flush()` returning, i.e. every record acknowledged;
   a warm-up record (metadata lookup) is flushed before the clock starts. Every future is
   checked afterwards: a failed record fails the bench. Records per run: 300,000 (bulk) /
   100,000 (per_record) at 100 B, the same bytes at 1 KiB; --quick: 1/20.
2. Consume throughput: one Consumer reads a topic (RF 3, 100 B) prefilled once with
   1,000,000 records (quick 50,000) from offset 0 of every partition to the end offsets
   taken before the clock starts; each run uses a new Consumer. consume.rf3 with poll()
   (a ConsumerRecord per record), consume.columnar.rf3 with poll_batch() (an Arrow table
   from the compiled decoder; one untimed read first loads it).
3. End-to-end latency at fixed rates (1,000 / 10,000 / 50,000 records/s): a paced producer
   (acks=all, RF 3, 100 B values carrying time.perf_counter() at the moment the record is
   handed to `send()`, linger_ms=0) and a consumer thread polling (poll timeout 10 ms) from
   offset 0 in the same process; latency = time the poll returning the record came back -
   that stamp. ~5 s per rate (quick 1 s). Pacing sends every record that is due, then sleeps
   to the next due time, so a producer that falls behind sends back-to-back and
   `achieved_rate` (records handed to send() / pacing seconds) shows an unsustainable rate.
   For the run with the median p50, "extra" holds the histogram (50 log-spaced buckets,
   0.1 ms - 10 s, values outside clipped into the end buckets) and the send-to-ack times
   (p50, p99), which split the latency into produce path and consume path.
Targets: acks=all RF 3 100 B bulk >= 1,000,000 rec/s, per-record >= 300,000;
consume >= 2,000,000 rec/s; at 10k rec/s p50 <= 5 ms, p99 <= 20 ms.

    .venv/bin/python bench/produce_bench.py [--quick] [--runs 3] [--out bench/out/produce.json]
"""

from __future__ import annotations

import inspect
import struct
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import arg_parser, emit, figure, local_cluster, machine_facts, say  # noqa: E402
from rayka.client.admin import wait_for  # noqa: E402

NAME = "produce"
DEFAULT_OUT = Path(__file__).resolve().parent / "out" / f"{NAME}.json"
BROKERS, CONTROLLERS, PARTITIONS = 3, 2, 6
SIZES = {"100B": 100, "1KiB": 1024}
RECORDS_100B = {"bulk": 300_000, "per_record": 100_000}   # ~3 s of work; 1 KiB: same bytes
CHUNK_BYTES = 1 << 20                # one send_batch list ~ one producer batch (batch_size)
CONSUME_RECORDS = 1_000_000
LATENCY_RATES = (1_000, 10_000, 50_000)
LATENCY_S = 5.0
LATENCY_LINGER_MS = 0                # Kafka's classic default: send once the partition is free
# Consumer.poll returns when EVERY leader's long-poll has returned; with records arriving at
# one leader the others sit out the timeout, so a long timeout would measure itself
LATENCY_POLL_MS = 10
QUICK_DIVISOR = 20
TIMEOUT_S = 300.0                    # any single wait; a hung cluster fails the bench
STAMP = struct.Struct("<d")
HIST_EDGES_MS = np.logspace(-1, 4, 51)
TARGETS = {"produce.acks_all.rf3.bulk.100B.records_per_s": 1_000_000,
           "produce.acks_all.rf3.per_record.100B.records_per_s": 300_000,
           "consume.rf3.100B.records_per_s": 2_000_000,
           "consume.columnar.rf3.100B.records_per_s": 2_000_000,
           "latency.rate_10000.p50_ms": 5.0, "latency.rate_10000.p99_ms": 20.0}


# -- topics -------------------------------------------------------------------------------------
class Topics:
    """Fresh topics: created with the min ISR rule of the brief, deleted after use."""

    def __init__(self, cluster):
        self.admin = cluster.admin()

    def create(self, label: str, rf: int) -> str:
        name = f"{label}-{uuid.uuid4().hex[:8]}"
        self.admin.create_topic(name, PARTITIONS, rf, {"min.insync.replicas": 2 if rf == 3 else 1},
                                timeout_s=TIMEOUT_S)
        return name

    def delete(self, name: str) -> None:
        # not timed; a slow deletion only costs disk space, so it must not fail the bench
        try:
            self.admin.delete_topic(name, timeout_s=60)
        except Exception as exc:
            say(f"deleting {name} failed ({exc!r}); continuing")


def all_partitions(topic: str) -> list[tuple[str, int]]:
    return [(topic, p) for p in range(PARTITIONS)]


def check_futures(futures, what: str) -> None:
    failed = [f.exception() for f in futures if f.exception() is not None]
    if failed:
        raise RuntimeError(f"{what}: {len(failed)} sends failed, first: {failed[0]!r}")


# -- 1. produce throughput ----------------------------------------------------------------------
def produce_once(cluster, topic: str, acks: str, size: int, api: str, n: int) -> float:
    """Seconds to hand `n` records of `size` bytes to the producer and have them all acked."""
    producer = cluster.producer(acks=acks)
    value = b"v" * size
    try:
        producer.send(topic, value).result(TIMEOUT_S)   # warm-up: metadata, first request
        t0 = time.perf_counter()
        if api == "bulk":
            chunk = max(1, CHUNK_BYTES // size)
            futures = [producer.send_batch(topic, [value] * min(chunk, n - i))
                       for i in range(0, n, chunk)]
        else:
            send, futures = producer.send, []
            append = futures.append
            for _ in range(n):
                append(send(topic, value))
        producer.flush(TIMEOUT_S)
        elapsed = time.perf_counter() - t0
        check_futures(futures, f"produce {api} to {topic}")
    finally:
        producer.close(TIMEOUT_S)
    return elapsed


def produce_matrix(cluster, topics: Topics, quick: bool, runs: int) -> list[dict]:
    configs = [(label, size, acks, rf, api) for label, size in SIZES.items()
               for acks in ("1", "all") for rf in (1, 3) for api in ("bulk", "per_record")]
    samples: dict[tuple, list] = {c: [] for c in configs}
    for run in range(runs):          # runs outermost: a drift of the machine hits every config
        for cfg in configs:
            label, size, acks, rf, api = cfg
            n = records_for(api, size, quick)
            topic = topics.create(f"p-acks{acks}-rf{rf}-{api.replace('_', '')}-{label}", rf)
            try:
                elapsed = produce_once(cluster, topic, acks, size, api, n)
            finally:
                topics.delete(topic)
            samples[cfg].append((n / elapsed, n * size / elapsed / 1e6))
            say(f"run {run}: produce acks={acks} rf={rf} {api} {label}: "
                f"{n / elapsed:,.0f} rec/s, {n * size / elapsed / 1e6:.1f} MB/s ({n:,} records)")
    figures = []
    for (label, size, acks, rf, api), got in samples.items():
        base = f"produce.acks_{acks}.rf{rf}.{api}.{label}"
        params = dict(acks=acks, replication_factor=rf, api=api, value_bytes=size,
                      records=records_for(api, size, quick), partitions=PARTITIONS)
        figures += throughput_figures(base, got, params)
    return figures


def records_for(api: str, size: int, quick: bool) -> int:
    n = RECORDS_100B[api] * 100 // size
    return max(1, n // QUICK_DIVISOR) if quick else n


def throughput_figures(base: str, got: list[tuple[float, float]], params: dict) -> list[dict]:
    name = f"{base}.records_per_s"
    return [figure(name, "records/s", [r for r, _ in got], TARGETS.get(name), "higher", **params),
            figure(f"{base}.mb_per_s", "MB/s", [m for _, m in got], None, "higher", **params)]


# -- 2. consume throughput ----------------------------------------------------------------------
def prefill(cluster, topic: str, n: int, size: int) -> None:
    producer = cluster.producer(acks="all")   # acks=all: the HW covers every record at once
    chunk = CHUNK_BYTES // size
    try:
        futures = [producer.send_batch(topic, [b"c" * size] * min(chunk, n - i))
                   for i in range(0, n, chunk)]
        producer.flush(TIMEOUT_S)
        check_futures(futures, f"prefill {topic}")
    finally:
        producer.close(TIMEOUT_S)


def consume_once(cluster, topic: str, columnar: bool = False) -> tuple[int, float]:
    """(records read, seconds) for one new Consumer reading the topic from 0 to its end,
    with poll() (ConsumerRecords) or poll_batch() (an Arrow table)."""
    consumer = cluster.consumer()
    tps = all_partitions(topic)
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    end = consumer.end_offsets(tps)
    n, t0 = 0, time.perf_counter()
    deadline = t0 + TIMEOUT_S
    while any(consumer.position(tp) < end[tp] for tp in tps):
        n += consumer.poll_batch(timeout_ms=500).num_rows if columnar else \
            len(consumer.poll(timeout_ms=500))
        if time.perf_counter() > deadline:
            raise TimeoutError(f"consumer read {n} of {sum(end.values())} records")
    elapsed = time.perf_counter() - t0
    consumer.close()
    return n, elapsed


def consume_figures(cluster, topics: Topics, quick: bool, runs: int) -> list[dict]:
    size = SIZES["100B"]
    total = CONSUME_RECORDS // QUICK_DIVISOR if quick else CONSUME_RECORDS
    topic = topics.create("consume-rf3-100B", 3)
    try:
        prefill(cluster, topic, total, size)
        consume_once(cluster, topic, columnar=True)    # numba loads its compiled decoder
        got: dict[bool, list] = {False: [], True: []}
        for run in range(runs):
            for columnar in (False, True):
                n, elapsed = consume_once(cluster, topic, columnar)
                got[columnar].append((n / elapsed, n * size / elapsed / 1e6))
                say(f"run {run}: consume rf=3 100B {'poll_batch' if columnar else 'poll'}: "
                    f"{n / elapsed:,.0f} rec/s ({n:,} records)")
    finally:
        topics.delete(topic)
    params = dict(replication_factor=3, value_bytes=size, records=total, partitions=PARTITIONS)
    return (throughput_figures("consume.rf3.100B", got[False], dict(params, api="poll"))
            + throughput_figures("consume.columnar.rf3.100B", got[True],
                                 dict(params, api="poll_batch")))


# -- 3. end-to-end latency ----------------------------------------------------------------------
def latency_once(cluster, topic: str, rate: int, duration_s: float) -> dict:
    """One paced run: {"e2e_ms": latencies, "ack_ms": send-to-ack times, "achieved": rate}."""
    consumer = cluster.consumer()
    consumer.assign(all_partitions(topic))
    for tp in all_partitions(topic):
        consumer.seek(tp, 0)
    latencies: list[float] = []
    acked: list[float] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def consume():
        try:
            while not stop.is_set():
                records = consumer.poll(timeout_ms=LATENCY_POLL_MS)
                now = time.perf_counter()
                latencies.extend(now - STAMP.unpack_from(r.value)[0] for r in records)
        except BaseException as exc:   # surfaced by the driver's wait below
            errors.append(exc)

    def wait_read(count: int, what: str) -> None:
        wait_for(lambda: errors or len(latencies) >= count, TIMEOUT_S, what)
        if errors:
            raise errors[0]

    thread = threading.Thread(target=consume, daemon=True, name="bench-consumer")
    thread.start()
    producer = cluster.producer(acks="all", linger_ms=LATENCY_LINGER_MS)
    pad = b"." * (SIZES["100B"] - STAMP.size)
    futures = []
    try:
        # warm-up: metadata of producer and consumer, first requests; not counted
        producer.send(topic, STAMP.pack(time.perf_counter()) + pad).result(TIMEOUT_S)
        wait_read(1, "the warm-up record")
        latencies.clear()
        sent, t0 = 0, time.perf_counter()
        end = t0 + duration_s
        while (now := time.perf_counter()) < end:
            due = int((now - t0) * rate) + 1
            while sent < due:
                stamp = time.perf_counter()
                future = producer.send(topic, STAMP.pack(stamp) + pad)
                # the ack time splits the latency into produce path and consume path
                future.add_done_callback(lambda _f, s=stamp: acked.append(time.perf_counter() - s))
                futures.append(future)
                sent += 1
            time.sleep(max(0.0, t0 + sent / rate - time.perf_counter()))   # pacing, not sync
        achieved = sent / (time.perf_counter() - t0)
        producer.flush(TIMEOUT_S)
        check_futures(futures, f"latency producer at {rate}/s")
        wait_read(sent, f"every record sent at {rate}/s read back")
    finally:
        stop.set()
        thread.join(LATENCY_POLL_MS / 1000 + 30)
        producer.close(TIMEOUT_S)
        consumer.close()
    return {"e2e_ms": np.asarray(latencies) * 1000.0, "ack_ms": np.asarray(acked) * 1000.0,
            "achieved": achieved}


def latency_figures(cluster, topics: Topics, quick: bool, runs: int) -> tuple[list, dict]:
    duration = LATENCY_S / 5 if quick else LATENCY_S
    figures, histograms = [], {}
    for rate in LATENCY_RATES:
        per_run = []
        for run in range(runs):
            topic = topics.create(f"latency-{rate}", 3)
            try:
                got = latency_once(cluster, topic, rate, duration)
            finally:
                topics.delete(topic)
            lat = got["e2e_ms"]
            r = dict(zip(("p50", "p99", "p999"), np.percentile(lat, [50, 99, 99.9]).tolist()),
                     achieved=got["achieved"], records=len(lat),
                     ack_p50_ms=float(np.percentile(got["ack_ms"], 50)),
                     ack_p99_ms=float(np.percentile(got["ack_ms"], 99)),
                     counts=np.histogram(np.clip(lat, HIST_EDGES_MS[0], HIST_EDGES_MS[-1]),
                                         HIST_EDGES_MS)[0].tolist())
            per_run.append(r)
            say(f"run {run}: latency at {rate:,}/s (achieved {r['achieved']:,.0f}/s, "
                f"{len(lat):,} records): p50 {r['p50']:.2f} ms, p99 {r['p99']:.2f} ms, "
                f"p99.9 {r['p999']:.2f} ms; send->ack p50 {r['ack_p50_ms']:.2f} ms")
        base = f"latency.rate_{rate}"
        params = dict(rate=rate, duration_s=duration, acks="all", replication_factor=3,
                      value_bytes=SIZES["100B"], partitions=PARTITIONS,
                      linger_ms=LATENCY_LINGER_MS, poll_timeout_ms=LATENCY_POLL_MS)
        for q in ("p50", "p99", "p999"):
            name = f"{base}.{q}_ms"
            figures.append(figure(name, "ms", [r[q] for r in per_run], TARGETS.get(name),
                                  "lower", **params))
        figures.append(figure(f"{base}.achieved_rate", "records/s",
                              [r["achieved"] for r in per_run], None, "higher", **params))
        median = sorted(range(runs), key=lambda i: per_run[i]["p50"])[(runs - 1) // 2]
        histograms[str(rate)] = {"run": median, **per_run[median]}
    return figures, {"latency_histogram_edges_ms": [round(e, 4) for e in HIST_EDGES_MS.tolist()],
                     "latency_median_runs": histograms}


# -- the protocol -------------------------------------------------------------------------------
def run(quick: bool = False, runs: int = 3) -> dict:
    t0 = time.monotonic()
    with local_cluster("bench", brokers=BROKERS, controllers=CONTROLLERS) as (cluster, _):
        say(f"cluster up in {time.monotonic() - t0:.1f} s")
        topics = Topics(cluster)
        figures = produce_matrix(cluster, topics, quick, runs)
        figures += consume_figures(cluster, topics, quick, runs)
        latency, extra = latency_figures(cluster, topics, quick, runs)
        figures += latency
    setup = {
        "brokers": BROKERS, "controllers": CONTROLLERS, "zookeeper": "embedded",
        "partitions_per_topic": PARTITIONS, "min_insync_replicas": {"rf3": 2, "rf1": 1},
        "topics": "a fresh topic per configuration and run, deleted after it; the consume "
                  "topic is prefilled once (acks=all, bulk) and read by every run",
        "producer": {**producer_defaults(), "send_batch_list_bytes": CHUNK_BYTES,
                     "latency_linger_ms": LATENCY_LINGER_MS},
        "records_per_run": {f"{api}.{label}": records_for(api, size, quick)
                            for api in RECORDS_100B for label, size in SIZES.items()},
        "consume_records": CONSUME_RECORDS // QUICK_DIVISOR if quick else CONSUME_RECORDS,
        "latency_rates": list(LATENCY_RATES), "latency_duration_s": LATENCY_S / 5 if quick
        else LATENCY_S, "latency_poll_timeout_ms": LATENCY_POLL_MS,
        "mb": "10^6 bytes of record values", "driver": "one Python process",
        "quick": quick, "runs": runs, "machine": machine_facts(),
    }
    return {"bench": NAME, "setup": setup, "figures": figures, "extra": extra}


def producer_defaults() -> dict:
    """The producer settings the throughput runs use (its defaults), read, not restated."""
    from rayka.client.producer import Producer
    params = inspect.signature(Producer.__init__).parameters
    return {k: params[k].default for k in ("linger_ms", "batch_size", "enable_idempotence")
            if k in params}


def main(argv=None) -> dict:
    args = arg_parser(__doc__, DEFAULT_OUT, "1/20 sizes, 1 s latency runs").parse_args(argv)
    result = run(quick=args.quick, runs=args.runs)
    return emit(result, args.out)


if __name__ == "__main__":
    main()
