"""Transactions: how many a producer commits per second, and how long a commit takes.

Setup: one local rayka cluster (3 brokers, 2 controllers, embedded ZooKeeper, 50
`__transaction_state` partitions, RF 3, min ISR 2); a topic of 6 partitions (RF 3, min ISR
2); 100-byte values.

Measured (one sample per run):
1. transactions/s: one transactional producer, back to back for 5 s (--quick 1 s): begin,
   100 records spread over the 6 partitions, commit (flush + EndTxn, answered once the
   coordinator's PrepareCommit is replicated; the markers follow). Native (the Ray API)
   and librdkafka (confluent-kafka over the listeners).
2. commit latency: the time commit_transaction() takes in that loop (p50, p99).
3. visible after commit: from commit_transaction() returning to a read_committed
   librdkafka consumer receiving the transaction's last record (the markers replicated and
   the LSO moved), p50 and p99, measured on a separate paced run of 100 transactions.

    .venv/bin/python bench/txn_bench.py [--quick] [--runs 3] [--out bench/out/txn.json]
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (arg_parser, emit, figure, local_cluster, machine_facts,  # noqa: E402
                          replicated_topic, say)

NAME = "txn"
DEFAULT_OUT = Path(__file__).resolve().parent / "out" / f"{NAME}.json"
PARTITIONS, PER_TXN, VALUE = 6, 100, b"x" * 100
LOOP_S = 5.0
VISIBLE_TXNS = 100
TIMEOUT_S = 120.0
TARGET_COMMIT_P50_MS = 10.0


def _pct(values, q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def _commit_loop(p, send, topic: str, seconds: float) -> tuple[float, list[float]]:
    """Transactions of PER_TXN records spread over the topic's PARTITIONS (send(topic,
    value, partition=...)) committed back to back on the transactional producer `p` for
    `seconds`: (transactions/s, commit ms each)."""
    commits: list[float] = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        p.begin_transaction()
        for i in range(PER_TXN):
            send(topic, VALUE, partition=i % PARTITIONS)
        c0 = time.perf_counter()
        p.commit_transaction(TIMEOUT_S)
        commits.append((time.perf_counter() - c0) * 1000)
    return len(commits) / (time.perf_counter() - t0), commits


def native_loop(cluster, topic: str, seconds: float) -> tuple[float, list[float]]:
    p = cluster.producer(transactional_id=f"bench-{uuid.uuid4().hex[:6]}", linger_ms=0)
    p.init_transactions()
    rate, commits = _commit_loop(p, p.send, topic, seconds)
    p.close()
    return rate, commits


def wire_loop(bootstrap: str, topic: str, seconds: float,
              linger_ms: float | None = 0) -> tuple[float, list[float]]:
    """_commit_loop on a transactional librdkafka Producer; linger_ms None: librdkafka's
    default."""
    from confluent_kafka import Producer
    conf = {"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex[:6]}"}
    if linger_ms is not None:
        conf["linger.ms"] = linger_ms
    p = Producer(conf)
    try:
        p.init_transactions(TIMEOUT_S)
        return _commit_loop(p, p.produce, topic, seconds)
    finally:
        p.close()


def visible_after_commit(bootstrap: str, topic: str, n: int) -> list[float]:
    """ms from commit_transaction() returning to a read_committed consumer holding the
    transaction's last record."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    seen: dict[bytes, float] = {}
    stop = threading.Event()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"b{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "fetch.wait.max.ms": 10,
                  "enable.auto.commit": False, "auto.offset.reset": "latest"})
    c.assign([TopicPartition(topic, part, -1) for part in range(PARTITIONS)])
    c.poll(1.0)

    def read():
        while not stop.is_set():
            m = c.poll(0.05)
            if m is not None and not m.error() and m.value().startswith(b"last-"):
                seen[m.value()] = time.perf_counter()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                  "transactional.id": f"vis-{uuid.uuid4().hex[:6]}"})
    p.init_transactions(TIMEOUT_S)
    committed: dict[bytes, float] = {}
    for t in range(n):
        p.begin_transaction()
        for i in range(PER_TXN - 1):
            p.produce(topic, VALUE, partition=i % PARTITIONS)
        last = b"last-%d" % t
        p.produce(topic, last, partition=t % PARTITIONS)
        p.commit_transaction(TIMEOUT_S)
        committed[last] = time.perf_counter()
        time.sleep(0.02)        # paced: each transaction seen on its own
    deadline = time.monotonic() + 30
    while len(seen) < n and time.monotonic() < deadline:
        time.sleep(0.05)        # poll interval of a deadline loop
    stop.set()
    reader.join(5)
    c.close()
    return [(seen[k] - t) * 1000 for k, t in committed.items() if k in seen]


def run(quick: bool = False, runs: int = 3) -> dict:
    seconds = LOOP_S / 5 if quick else LOOP_S
    rates = {"native": [], "librdkafka": []}
    p50s = {"native": [], "librdkafka": []}
    p99s = {"native": [], "librdkafka": []}
    visible_p50, visible_p99 = [], []
    with local_cluster("xb") as (cluster, _):
        topic = replicated_topic(cluster, "txn-", PARTITIONS, TIMEOUT_S)
        bootstrap = cluster.bootstrap_servers()
        native_loop(cluster, topic, 0.5)             # warm up: the coordinator topic made
        for run_i in range(runs):
            for kind, loop in (("native", lambda: native_loop(cluster, topic, seconds)),
                               ("librdkafka", lambda: wire_loop(bootstrap, topic, seconds))):
                rate, commits = loop()
                rates[kind].append(rate)
                p50s[kind].append(statistics.median(commits))
                p99s[kind].append(_pct(commits, 0.99))
                say(f"run {run_i}: {kind}: {rate:,.0f} transactions/s of {PER_TXN} records, "
                    f"commit p50 {p50s[kind][-1]:.1f} ms, p99 {p99s[kind][-1]:.1f} ms")
            lags = visible_after_commit(bootstrap, topic, VISIBLE_TXNS // (5 if quick else 1))
            visible_p50.append(statistics.median(lags))
            visible_p99.append(_pct(lags, 0.99))
            say(f"run {run_i}: visible to read_committed {visible_p50[-1]:.1f} ms after "
                f"commit (p99 {visible_p99[-1]:.1f} ms)")
    figures = []
    for kind in ("native", "librdkafka"):
        prefix = "txn" if kind == "native" else "txn.librdkafka"
        params = {"records_per_transaction": PER_TXN, "partitions": PARTITIONS,
                  "replication_factor": 3, "min_insync_replicas": 2, "client": kind}
        figures += [
            figure(f"{prefix}.transactions_per_s", "transactions/s", rates[kind], **params),
            figure(f"{prefix}.commit.p50_ms", "ms", p50s[kind], TARGET_COMMIT_P50_MS,
                   better="lower", **params),
            figure(f"{prefix}.commit.p99_ms", "ms", p99s[kind], better="lower", **params)]
    figures += [figure("txn.visible_after_commit.p50_ms", "ms", visible_p50, better="lower",
                       client="librdkafka", isolation="read_committed"),
                figure("txn.visible_after_commit.p99_ms", "ms", visible_p99, better="lower",
                       client="librdkafka", isolation="read_committed")]
    return {"bench": NAME, "machine": machine_facts(),
            "setup": {"brokers": 3, "controllers": 2, "partitions": PARTITIONS,
                      "records_per_transaction": PER_TXN, "value_bytes": len(VALUE),
                      "loop_s": seconds, "runs": runs, "quick": quick},
            "figures": figures, "extra": {}}


def main(argv=None) -> dict:
    args = arg_parser(__doc__, DEFAULT_OUT, "1 s loops, 20 paced transactions").parse_args(argv)
    return emit(run(quick=args.quick, runs=args.runs), args.out)


if __name__ == "__main__":
    main()
