"""Side-by-side family "scale": one topic of 10,000 partitions (quick: 1,000) on 3 brokers.

Rules: the same code runs against rayka and Kafka (bench/versus.py); clients are librdkafka
(confluent_kafka) over bootstrap_servers(). Every run uses a fresh topic and group; every
client is closed before the topic is deleted, and the next run starts only once the topic
is gone from every broker's Metadata. Figure names carry the size: p10000.* (quick:
p1000.*). One sample per run per figure. Nothing is resized to fit: a system that cannot
hold the size fails the run with its own error.

Per run, with N partitions and R records (N = 10,000, R = 300,000; quick: 1,000 and 50,000):
1. pN.create_topic_s (s, lower): System.create_topic(T, N, 3) (min.insync.replicas 2):
   CreateTopics through librdkafka's AdminClient, until every partition has a leader in the
   Metadata of every broker. Then, outside every clock, System.wait_healed(): until every
   partition's ISR is full (noted as scale.healed_after_create_s), so that 2 measures
   producing into a replicated topic, not followers still catching up (a follower that has
   not fetched within replica.lag.time.max.ms of its creation leaves the ISR, and with
   min.insync.replicas 2 an acks=all produce is refused until it is back).
2. pN.produce.records_per_s (records/s, higher): one librdkafka Producer (acks=all,
   enable.idempotence false, linger.ms 5, queue.buffering.max.messages 1,000,000,
   message.timeout.ms 1,800,000 so that a slow system gives a slow rate rather than
   expired records; the rest librdkafka's defaults) first sends one record (key "warm")
   and flushes it: metadata and producer id, outside the clock. Then R records of 100 B
   with keys "k0".."k<R-1>" (librdkafka's default partitioner, consistent_random: CRC32
   of the key, so every partition gets data; the count that did is noted). Clock: from
   the first produce() to flush() returning with every record acknowledged (a delivery callback
   counts them; any delivery error fails the run). R / that time. librdkafka puts one
   partition's batch in a ProduceRequest; an idempotent producer would keep at most 5 of
   them in flight per broker, so with N partitions its rate is about
   15 x (R / N) / (acks=all round trip), ~800 s a run on Kafka here whatever R is: this
   producer is not idempotent (max.in.flight librdkafka's 1,000,000), so every
   partition's request is in flight at once and the brokers' throughput at that size is
   what it measures.
3. pN.consume.records_per_s (records/s, higher): one librdkafka Consumer (fresh group.id,
   enable.auto.commit false; never joins the group; fetch.queue.backoff.ms 10 as
   bench/wire_bench.py's reader: librdkafka's 1,000 ms default pauses a partition's fetching
   for a second once its queue is full, and a read's rate then swings with the pauses)
   assign()ed every partition at offset 0, consume(up to 10000, 0.5 s) back to back until
   it has read every record in the topic (R + 1, the warm-up record included), never
   asking for more than is left (the last call would wait out its timeout). Clock: from
   assign() to the last record. Records / time.
4. pN.broker_rss_mib (MiB, lower): max over System.broker_pids() of VmRSS in
   /proc/<pid>/status, right after 3 (each broker's RSS, open fds, memory maps and
   open-file limit are noted too).
Then DeleteTopics (System.delete_topic) and until the topic is absent from every broker's
full Metadata; those seconds are noted (scale.delete_s), not a figure. The full Metadata
is polled, never the topic by name: a Metadata request naming a missing topic may create
it again where auto.create.topics.enable is on (Kafka's default).

    .venv/bin/python bench/versus_scale.py kafka|rayka [--runs 3] [--quick]
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.systems import wait_until  # noqa: E402

PARTITIONS, QUICK_PARTITIONS = 10_000, 1_000
RECORDS, QUICK_RECORDS = 300_000, 50_000
VALUE = b"x" * 100
TIMEOUT_S = 900.0
DELIVERY_TIMEOUT_S = 1800.0


def process_facts(pid: int) -> dict:
    """VmRSS (MiB), open fds, memory maps and RLIMIT_NOFILE of a live process."""
    facts: dict = {"pid": pid}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                facts["rss_mib"] = round(int(line.split()[1]) / 1024, 1)
    facts["open_fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    with open(f"/proc/{pid}/maps") as f:
        facts["maps"] = sum(1 for _ in f)
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                facts["fd_limit"] = int(line.split()[3])
    return facts


def produce(bootstrap: str, topic: str, records: int) -> tuple[float, int]:
    """(seconds from the first produce() to all acknowledged, partitions that got data)."""
    from confluent_kafka import Producer
    acked, errors, parts = [0], [], set()

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[0] += 1
            parts.add(msg.partition())
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
                  "linger.ms": 5, "queue.buffering.max.messages": 1_000_000,
                  "message.timeout.ms": int(DELIVERY_TIMEOUT_S * 1000),
                  "on_delivery": delivered})
    try:
        p.produce(topic, VALUE, key=b"warm")
        if p.flush(TIMEOUT_S) or errors or acked[0] != 1:
            raise RuntimeError(f"{topic}: warm-up record not delivered: {errors[:3]}")
        acked[0], parts = 0, set()
        t0 = time.monotonic()
        for i in range(records):
            while True:
                try:
                    p.produce(topic, VALUE, key=b"k%d" % i)
                    break
                except BufferError:
                    p.poll(0.01)          # the local queue is full: serve deliveries first
        left = p.flush(DELIVERY_TIMEOUT_S + 60)
        elapsed = time.monotonic() - t0
    finally:
        p.close()
    if left or errors or acked[0] != records:
        raise RuntimeError(f"{topic}: {acked[0]} of {records} acknowledged, {left} left, "
                           f"errors {errors[:3]}")
    return elapsed, len(parts)


def consume(bootstrap: str, topic: str, partitions: int, total: int) -> float:
    """Seconds from assign() to the last of `total` records read."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"vs-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "fetch.queue.backoff.ms": 10})
    try:
        read = 0
        t0 = time.monotonic()
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = t0 + TIMEOUT_S
        while read < total:          # back-to-back polls: a sleep here would be measured
            for m in c.consume(min(10_000, total - read), 0.5):
                if m.error() is None:
                    read += 1
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: read {read} of {total} in {TIMEOUT_S:g} s")
        return time.monotonic() - t0
    finally:
        c.close()


def wait_gone(system, topic: str, timeout_s: float) -> None:
    """Until no broker's full Metadata lists `topic`."""
    from confluent_kafka.admin import AdminClient
    admins = [AdminClient({"bootstrap.servers": hp})
              for hp in system.bootstrap_servers().split(",")]
    wait_until(lambda: all(topic not in a.list_topics(timeout=30).topics for a in admins),
               timeout_s, f"{topic} gone from every broker", interval_s=0.25)


def run(system, sheet, runs: int, quick: bool) -> None:
    n = QUICK_PARTITIONS if quick else PARTITIONS
    records = QUICK_RECORDS if quick else RECORDS
    params = dict(partitions=n, replication_factor=3, min_insync_replicas=2)
    lparams = dict(records=records, value_bytes=len(VALUE), acks="all", idempotence=False,
                   linger_ms=5, message_timeout_ms=int(DELIVERY_TIMEOUT_S * 1000), **params)
    bootstrap = system.bootstrap_servers()
    for _ in range(runs):
        t_run = time.monotonic()
        topic = f"vscale-{uuid.uuid4().hex[:8]}"
        create_s = system.create_topic(topic, n, 3, timeout_s=TIMEOUT_S)
        try:
            t_heal = time.monotonic()
            system.wait_healed(TIMEOUT_S)
            sheet.note("scale.healed_after_create_s", round(time.monotonic() - t_heal, 2))
            produce_s, with_data = produce(bootstrap, topic, records)
            consume_s = consume(bootstrap, topic, n, records + 1)
            brokers = {b: process_facts(pid) for b, pid in system.broker_pids().items()}
        finally:
            t_del = time.monotonic()
            system.delete_topic(topic, timeout_s=TIMEOUT_S)
            wait_gone(system, topic, TIMEOUT_S)
            delete_s = time.monotonic() - t_del
        sheet.add(f"p{n}.create_topic_s", create_s, "s", "lower", **params)
        sheet.add(f"p{n}.produce.records_per_s", records / produce_s, "records/s", "higher",
                  **lparams)
        sheet.add(f"p{n}.consume.records_per_s", (records + 1) / consume_s, "records/s",
                  "higher", **lparams)
        sheet.add(f"p{n}.broker_rss_mib", max(b["rss_mib"] for b in brokers.values()), "MiB",
                  "lower", **params)
        sheet.note("scale.partitions_with_data", with_data)
        sheet.note("scale.brokers_after_load", brokers)
        sheet.note("scale.delete_s", round(delete_s, 2))
        sheet.note("scale.run_s", round(time.monotonic() - t_run, 2))


if __name__ == "__main__":
    from bench.versus import family_main
    family_main(run, __doc__)
