"""Retention on a real rayka cluster (real Ray, the real ZooKeeper): every replica keeps its
log near retention.bytes, the log start moves on the leader and the followers alike, and
consumers (native and kcat) read from the new log start to the end with no gap. Brokers run
a retention check every second and the cleaner every half second here
(log.retention.check.interval.ms, log.cleaner.backoff.ms). Compacted replicas are read back
from their segment files by kafka-python, an independent reader."""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest
import ray

import rayka
from rayka.client.admin import wait_for
from tests.ray_cluster import ray_session  # noqa: F401  (fixture)

pytestmark = pytest.mark.ray
TIMEOUT_S = 120
RETAIN = {"retention.bytes": 100_000, "segment.bytes": 20_000, "min.insync.replicas": 2}


@pytest.fixture(scope="module")
def cluster(ray_session, tmp_path_factory):
    c = rayka.start_local(name=f"r{uuid.uuid4().hex[:8]}", brokers=3, controllers=1,
                          data_dir=str(tmp_path_factory.mktemp("rayka")),
                          log_retention_check_interval_ms=1000, log_cleaner_backoff_ms=500)
    yield c
    c.shutdown()


def replica_views(cluster, tp):
    infos = ray.get([cluster.broker_actor(b).partition_info.remote(tp) for b in (1, 2, 3)])
    return {b: i for b, i in zip((1, 2, 3), infos)}


def test_size_retention_keeps_every_replica_near_the_limit_with_no_gap(cluster):
    topic = f"ret-{uuid.uuid4().hex[:6]}"
    tp = (topic, 0)
    cluster.admin().create_topic(topic, 1, 3, RETAIN)
    producer = cluster.producer(acks="all")
    value = b"v" * 100
    for _ in range(20):                                   # ~2.4 MB in 20,000 records
        producer.send_batch(topic, [value] * 1000, partition=0)
    producer.flush(TIMEOUT_S)
    producer.close()

    def trimmed():
        views = replica_views(cluster, tp)
        ok = all(v["log_start_offset"] > 0 and v["size_bytes"] <= RETAIN["retention.bytes"]
                 + RETAIN["segment.bytes"] and v["log_end_offset"] == 20_000
                 for v in views.values())
        return ok and views
    views = wait_for(trimmed, TIMEOUT_S, "every replica trimmed to ~100 kB")
    assert all(v["size_bytes"] >= RETAIN["retention.bytes"] - RETAIN["segment.bytes"]
               for v in views.values()), views
    leader_start = views[cluster.admin().describe_topic(topic)[0].leader]["log_start_offset"]

    c = cluster.consumer(auto_offset_reset="earliest")
    c.assign([tp])
    start = c.beginning_offsets([tp])[tp]
    assert start >= leader_start and c.end_offsets([tp])[tp] == 20_000
    c.seek(tp, 0)                                  # below the log start: reset to the earliest
    got = []
    wait_for(lambda: got.extend(c.poll(timeout_ms=500)) or (got and got[-1].offset == 19_999),
             TIMEOUT_S, "read to the end")
    c.close()
    offsets = [r.offset for r in got]
    assert offsets == list(range(offsets[0], 20_000)) and offsets[0] >= leader_start

    bootstrap = cluster.bootstrap_servers()      # a Kafka client sees the same log start
    proc = subprocess.run(["/usr/bin/kcat", "-b", bootstrap, "-C", "-t", topic, "-o",
                           "beginning", "-e", "-f", "%o\n"], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    wire = [int(x) for x in proc.stdout.split()]
    assert wire == list(range(wire[0], 20_000)) and wire[0] >= leader_start


def test_altered_retention_applies_at_the_next_check(cluster):
    topic = f"alter-{uuid.uuid4().hex[:6]}"
    tp = (topic, 0)
    cluster.admin().create_topic(topic, 1, 3, {"segment.bytes": 20_000})
    producer = cluster.producer(acks="all")
    producer.send_batch(topic, [b"w" * 100] * 3000, partition=0)
    producer.flush(TIMEOUT_S)
    producer.close()
    wait_for(lambda: all(v["high_watermark"] == 3000 for v in replica_views(cluster, tp).values()),
             TIMEOUT_S, "replicated")
    assert all(v["log_start_offset"] == 0 for v in replica_views(cluster, tp).values())
    cluster.admin().set_topic_config(topic, {"segment.bytes": 20_000, "retention.ms": 1000})
    # every record's timestamp is now minus a few seconds: older than 1 s → all deleted
    wait_for(lambda: all(v["log_start_offset"] == 3000 and v["size_bytes"] == 0
                         for v in replica_views(cluster, tp).values()),
             TIMEOUT_S, "every replica emptied by retention.ms")
    c = cluster.consumer()
    c.assign([tp])
    assert c.beginning_offsets([tp])[tp] == 3000 == c.end_offsets([tp])[tp]
    c.close()


def test_delete_records_natively_and_over_the_wire(cluster):
    from confluent_kafka import TopicPartition as KTP
    from confluent_kafka.admin import AdminClient
    from rayka.errors import PolicyViolation, UnknownTopicOrPartition
    topic = f"del-{uuid.uuid4().hex[:6]}"
    cluster.admin().create_topic(topic, 2, 3, {"segment.bytes": 20_000})
    compacted = f"cmp-{uuid.uuid4().hex[:6]}"
    cluster.admin().create_topic(compacted, 1, 3, {"cleanup.policy": "compact"})
    producer = cluster.producer(acks="all")
    for p in (0, 1):
        producer.send_batch(topic, [b"d" * 100] * 2000, partition=p)
    producer.flush(TIMEOUT_S)
    producer.close()
    admin = cluster.admin()
    got = admin.delete_records({(topic, 0): 1234, (compacted, 0): 0, ("no-such", 0): 1})
    assert got[(topic, 0)] == 1234
    assert isinstance(got[(compacted, 0)], PolicyViolation)
    assert isinstance(got[("no-such", 0)], UnknownTopicOrPartition)
    wait_for(lambda: all(v["log_start_offset"] == 1234
                         for v in replica_views(cluster, (topic, 0)).values()),
             TIMEOUT_S, "every replica of partition 0 starting at 1234")

    wire = AdminClient({"bootstrap.servers": cluster.bootstrap_servers()})
    (fut,) = wire.delete_records([KTP(topic, 1, 1500)], request_timeout=30).values()
    assert fut.result(timeout=60).low_watermark == 1500
    c = cluster.consumer()
    c.assign([(topic, 0), (topic, 1)])
    assert c.beginning_offsets([(topic, 0), (topic, 1)]) == {(topic, 0): 1234, (topic, 1): 1500}
    got = []
    wait_for(lambda: got.extend(c.poll(timeout_ms=500)) or len(got) >= 766 + 500, TIMEOUT_S,
             "the records after the deletion points")
    c.close()
    assert sorted((r.partition, r.offset) for r in got) == \
        [(0, o) for o in range(1234, 2000)] + [(1, o) for o in range(1500, 2000)]


def test_offsets_for_times(cluster):
    topic = f"times-{uuid.uuid4().hex[:6]}"
    tp = (topic, 0)
    cluster.admin().create_topic(topic, 1, 3, {"segment.bytes": 5000})
    base = int(time.time() * 1000) - 60_000         # recent: retention.ms (7 d) keeps them
    producer = cluster.producer(acks="all")
    for i in range(300):                            # timestamps base + 10 i, in order
        producer.send(topic, b"t%d" % i, partition=0, timestamp_ms=base + 10 * i)
    producer.flush(TIMEOUT_S)
    producer.close()
    c = cluster.consumer()
    assert c.offsets_for_times({tp: base + 10 * 123 - 5})[tp] == (123, base + 10 * 123)
    assert c.offsets_for_times({tp: 0})[tp] == (0, base)
    assert c.offsets_for_times({tp: base + 10_000})[tp] is None    # nothing that recent
    c.close()


def replica_files_state(cluster, tp):
    """broker → [(offset, key, value)] parsed by kafka-python from its segment files."""
    import os
    from pathlib import Path
    from kafka.record import MemoryRecords
    out = {}
    for b in (1, 2, 3):
        d = Path(cluster.facts["data_dir"]) / f"broker-{b}" / f"{tp[0]}-{tp[1]}"
        got = []
        for name in sorted(os.listdir(d)):
            if name.endswith(".log"):
                parsed = MemoryRecords((d / name).read_bytes())
                while parsed.has_next():
                    batch = parsed.next_batch()
                    assert batch.validate_crc()
                    got += [(r.offset, r.key, r.value) for r in batch]
        out[b] = got
    return out


def test_compaction_keeps_the_last_value_per_key_on_every_replica_through_a_kill(cluster):
    topic = f"cmp-{uuid.uuid4().hex[:6]}"
    tp = (topic, 0)
    cluster.admin().create_topic(topic, 1, 3, {
        "cleanup.policy": "compact", "segment.bytes": 4000, "min.cleanable.dirty.ratio": 0.01,
        "delete.retention.ms": 0, "min.insync.replicas": 2})
    producer = cluster.producer(acks="all")
    written = []
    for round_ in range(6):
        batch = [(b"k%02d" % (i % 40), b"r%d-%d" % (round_, i)) for i in range(400)]
        if round_ == 2:
            batch += [(b"k%02d" % i, None) for i in range(5)]        # deletes k00..k04
        for key, value in batch:
            producer.send(topic, value, key=key, partition=0)
        written += batch
        producer.flush(TIMEOUT_S)
        if round_ == 3:                          # kill a broker while cleaners are busy
            cluster.kill_broker(cluster.admin().describe_topic(topic)[0].leader)
    producer.close()
    final = {}
    for key, value in written:
        final[key] = value
    total = len(written)

    def compacted_everywhere():
        states = replica_files_state(cluster, tp)
        ok = all(len(recs) < total / 3 and max(o for o, _, _ in recs) == total - 1
                 for recs in states.values())
        return ok and states
    states = wait_for(compacted_everywhere, TIMEOUT_S, "every replica compacted to < 1/3")
    for b, recs in states.items():
        offsets = [o for o, _, _ in recs]
        assert offsets == sorted(set(offsets)), b              # offsets kept, rising
        last = {}
        for o, k, v in recs:
            last[k] = v
        assert {k: v for k, v in last.items() if v is not None} == \
            {k: v for k, v in final.items() if v is not None}, b
    c = cluster.consumer()                       # a consumer from the start sees the same
    c.assign([tp])
    seen = []
    wait_for(lambda: seen.extend(c.poll(timeout_ms=500)) or (seen and seen[-1].offset == total - 1),
             TIMEOUT_S, "read to the end")
    c.close()
    state = {}
    for r in seen:
        state[r.key] = r.value
    assert {k: v for k, v in state.items() if v is not None} == \
        {k: v for k, v in final.items() if v is not None}
    from rayka.errors import InvalidRecord
    p = cluster.producer(acks="all", retries=0)
    with pytest.raises(InvalidRecord):           # a record without a key is refused
        p.send(topic, b"no key", partition=0).result(timeout=60)
    p.close()
