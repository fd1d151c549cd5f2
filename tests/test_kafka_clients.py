"""Unmodified Kafka clients against the brokers' listeners, on a real rayka cluster (real Ray,
the real ZooKeeper): librdkafka 2.16 (confluent-kafka), librdkafka 2.0.2 (Debian's kcat),
kafka-python 3.0 and aiokafka 0.14. No mocks: each client speaks the wire protocol to the
broker actors' sockets, and what it reads or writes is checked against the native API.

Waits are polls with deadlines (2 cores, other Ray tests may run)."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import subprocess
import threading
import time
import uuid

import pytest
import ray
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from rayka.client.admin import wait_for
from tests.ray_cluster import cluster, ray_session  # noqa: F401  (fixtures)
from tests.ray_cluster import wait_broker_back

pytestmark = pytest.mark.ray
TIMEOUT_S = 120
KCAT = "/usr/bin/kcat"


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def kcat(bootstrap: str, *args: str, stdin: bytes | None = None, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([KCAT, "-b", bootstrap, *args], input=stdin, capture_output=True,
                          timeout=timeout)


def read_all_confluent(bootstrap: str, topic: str, partitions: int, expected: int,
                       timeout_s: float = TIMEOUT_S) -> list:
    """Every record of the topic from offset 0, by assign (no consumer group involved)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got, deadline = [], time.monotonic() + timeout_s
        while len(got) < expected and time.monotonic() < deadline:
            for m in c.consume(num_messages=10_000, timeout=1.0):
                if m.error() is None:
                    got.append(m)
                elif m.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(f"consume error: {m.error()}")
        return got
    finally:
        c.close()


# -- kcat (librdkafka 2.0.2) ---------------------------------------------------------------------
def test_kcat_lists_the_brokers_and_topics(cluster):
    topic = topic_name("kcat-list")
    cluster.admin().create_topic(topic, 3, 3)
    bootstrap = cluster.bootstrap_servers()
    assert len(bootstrap.split(",")) == 3 and all(hp.startswith("127.0.0.1:")
                                                 for hp in bootstrap.split(","))
    proc = kcat(bootstrap, "-L", "-J", "-t", topic)
    assert proc.returncode == 0, proc.stderr.decode()
    md = json.loads(proc.stdout)
    assert sorted(b["id"] for b in md["brokers"]) == [1, 2, 3]
    assert {b["name"] for b in md["brokers"]} == set(bootstrap.split(","))
    (t,) = md["topics"]
    leaders = {p.partition: p.leader for p in cluster.admin().describe_topic(topic)}
    assert t["topic"] == topic and {p["partition"]: p["leader"] for p in t["partitions"]} == leaders
    assert all(len(p["replicas"]) == 3 and len(p["isrs"]) == 3 for p in t["partitions"])


def test_kcat_produces_and_consumes(cluster):
    topic = topic_name("kcat-rt")
    cluster.admin().create_topic(topic, 2, 3)
    bootstrap = cluster.bootstrap_servers()
    lines = [f"k{i % 7}:value-{i}" for i in range(500)]
    produced = kcat(bootstrap, "-P", "-t", topic, "-K", ":", stdin="\n".join(lines).encode() + b"\n")
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = kcat(bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%k:%s\n")
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert sorted(consumed.stdout.decode().split()) == sorted(lines)
    # what kcat wrote, the native consumer reads: same keys, values, partition per key
    c = cluster.consumer()
    c.assign([(topic, 0), (topic, 1)])
    native = []
    wait_for(lambda: native.extend(c.poll(timeout_ms=500)) or len(native) >= 500, TIMEOUT_S,
             "500 records natively")
    assert sorted(f"{r.key.decode()}:{r.value.decode()}" for r in native) == sorted(lines)
    assert all(len({r.partition for r in native if r.key == k}) == 1 for k in {r.key for r in native})
    c.close()


def test_compressed_batches_from_kcat_are_stored_and_read_back(cluster):
    """Batches compressed by the client (gzip, snappy, lz4, zstd) are stored as sent (their
    codec bits on the leader's log) and read back by kcat and by the native consumer
    (aiokafka's codec decompresses). Values are long and alike: librdkafka sends a batch
    uncompressed when compressing would not make it smaller."""
    from replicas.compression import codec_of
    from replicas.records import iter_headers
    topic = topic_name("kcat-z")
    cluster.admin().create_topic(topic, 1, 3)
    bootstrap = cluster.bootstrap_servers()
    codecs = ("gzip", "snappy", "lz4", "zstd")
    want = [f"{c}-{i:03d}-" + "abcdefgh" * 20 for c in codecs for i in range(100)]
    for codec in codecs:
        lines = [w for w in want if w.startswith(codec)]
        proc = kcat(bootstrap, "-P", "-t", topic, "-z", codec, "-X", "linger.ms=200",
                    stdin="\n".join(lines).encode() + b"\n")
        assert proc.returncode == 0, proc.stderr.decode()
    consumed = kcat(bootstrap, "-C", "-t", topic, "-o", "beginning", "-e")
    assert consumed.stdout.decode().split() == want
    leader = cluster.admin().describe_topic(topic)[0].leader
    raw = ray.get(cluster.broker_actor(leader).fetch_many.remote(
        -1, [((topic, 0), 0, -1, -1)], 0, 0))[(topic, 0)]["records"]
    stored = {codec_of(h.attributes) for h in iter_headers(raw)}
    assert stored == {1, 2, 3, 4}, stored                 # every codec kept as sent
    c = cluster.consumer()
    c.assign([(topic, 0)])
    native = []
    wait_for(lambda: native.extend(c.poll(timeout_ms=500)) or len(native) >= len(want),
             TIMEOUT_S, "400 compressed records natively")
    c.close()
    assert [r.value.decode() for r in native] == want


def test_the_native_producer_compresses_with_each_codec(cluster):
    """compression_type on the native producer: batches land compressed, the native consumer
    and kafka-python (over the wire) read them back."""
    from kafka import KafkaConsumer as PyConsumer
    from kafka import TopicPartition as PyTP
    from replicas.compression import codec_of
    from replicas.records import iter_headers
    codecs = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    topic = topic_name("native-z")
    cluster.admin().create_topic(topic, len(codecs), 3)
    for p, name in enumerate(codecs):
        producer = cluster.producer(acks="all", compression_type=name)
        producer.send_batch(topic, [b"%s-%04d-" % (name.encode(), i) + b"xyz" * 40
                                    for i in range(500)], partition=p)
        producer.flush(TIMEOUT_S)
        producer.close()
    for p, (name, codec) in enumerate(codecs.items()):
        leader = cluster.admin().describe_topic(topic)[p].leader
        raw = ray.get(cluster.broker_actor(leader).fetch_many.remote(
            -1, [((topic, p), 0, -1, -1)], 0, 0))[(topic, p)]["records"]
        assert {codec_of(h.attributes) for h in iter_headers(raw)} == {codec}, name
    c = cluster.consumer()
    c.assign([(topic, p) for p in range(len(codecs))])
    native = []
    wait_for(lambda: native.extend(c.poll(timeout_ms=500)) or len(native) >= 2000, TIMEOUT_S,
             "2000 records natively")
    c.close()
    py = PyConsumer(bootstrap_servers=cluster.bootstrap_servers(), enable_auto_commit=False,
                    auto_offset_reset="earliest", consumer_timeout_ms=20_000)
    py.assign([PyTP(topic, p) for p in range(len(codecs))])
    wire = [m for m in py]
    py.close()
    for got in (sorted(r.value for r in native), sorted(m.value for m in wire)):
        assert got == sorted(b"%s-%04d-" % (n.encode(), i) + b"xyz" * 40
                             for n in codecs for i in range(500))


# -- confluent-kafka (librdkafka 2.16) -------------------------------------------------------------
def test_confluent_admin_idempotent_producer_through_a_leader_kill_and_consumer(cluster):
    bootstrap = cluster.bootstrap_servers()
    topic = topic_name("cf")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})],
                                  operation_timeout=30)
    futures[topic].result(timeout=60)
    assert len(cluster.admin().describe_topic(topic)) == 3
    again = admin.create_topics([NewTopic(topic, 3, 3)])[topic]
    with pytest.raises(KafkaException) as exists:
        again.result(timeout=60)
    assert exists.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    delivered, failed = [], []

    def on_delivery(err, msg):
        (failed if err else delivered).append((err, msg.value()))

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5, "message.timeout.ms": 120_000})
    victim = cluster.admin().describe_topic(topic)[0].leader
    old_epoch = cluster.store.get_broker(victim).epoch
    n = 20_000
    for i in range(n):
        producer.produce(topic, value=b"v-%06d" % i, key=b"k%d" % (i % 50), on_delivery=on_delivery)
        if i == n // 2:
            producer.flush(60)
            cluster.kill_broker(victim)              # Ray restarts it; the leader moves
        producer.poll(0)
    assert producer.flush(180) == 0
    assert failed == [] and len(delivered) == n
    got = read_all_confluent(bootstrap, topic, 3, n)
    values = [m.value() for m in got]
    assert len(values) == n and set(values) == {b"v-%06d" % i for i in range(n)}   # none lost, none twice
    for p in range(3):                                        # offsets dense per partition
        offsets = [m.offset() for m in got if m.partition() == p]
        assert offsets == list(range(len(offsets)))
    wait_broker_back(cluster, {victim: old_epoch}, TIMEOUT_S)   # the next tests want 3 brokers


def test_records_written_natively_read_over_the_wire_and_back(cluster):
    bootstrap = cluster.bootstrap_servers()
    topic = topic_name("xfer")
    cluster.admin().create_topic(topic, 4, 3)
    native = cluster.producer(acks="all")
    sent = []
    for i in range(40):
        key = b"user-%d" % i
        headers = [("h1", b"x%d" % i), ("empty", None)] if i % 2 else []
        meta = native.send(topic, b"native-%d" % i, key=key, headers=headers,
                           timestamp_ms=1_700_000_000_000 + i).result(timeout=60)
        sent.append((meta.partition, key, b"native-%d" % i, tuple(headers), 1_700_000_000_000 + i))
    native.close()
    got = read_all_confluent(bootstrap, topic, 4, 40)
    seen = {(m.partition(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1])
            for m in got}
    assert seen == set(sent)

    # librdkafka's murmur2 partitioner puts a key where the native producer does
    wire = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                     "acks": "all"})
    placed = {}
    for i in range(40):
        wire.produce(topic, value=b"wire-%d" % i, key=b"user-%d" % i, timestamp=1_800_000_000_000 + i,
                     headers=[("origin", b"librdkafka")],
                     on_delivery=lambda err, m: placed.__setitem__(m.key(), (err, m.partition())))
    assert wire.flush(60) == 0
    assert {k: p for k, (_e, p) in placed.items()} == {k: p for p, k, *_ in sent}
    c = cluster.consumer()
    c.assign([(topic, p) for p in range(4)])
    records = []
    wait_for(lambda: records.extend(c.poll(timeout_ms=500)) or len(records) >= 80, TIMEOUT_S,
             "80 records natively")
    c.close()
    wire_records = [r for r in records if r.value.startswith(b"wire-")]
    assert len(wire_records) == 40
    for r in wire_records:
        i = int(r.value.split(b"-")[1])
        assert r.key == b"user-%d" % i and r.timestamp_ms == 1_800_000_000_000 + i
        assert r.headers == (("origin", b"librdkafka"),)


# -- kafka-python and aiokafka ---------------------------------------------------------------------
def test_kafka_python_round_trip(cluster):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition as KTP
    bootstrap = cluster.bootstrap_servers()
    topic = topic_name("kp")
    cluster.admin().create_topic(topic, 3, 3)
    producer = KafkaProducer(bootstrap_servers=bootstrap)        # idempotent + acks=all by default
    futures = [producer.send(topic, key=b"k%d" % (i % 5), value=b"kp-%d" % i) for i in range(1000)]
    producer.flush(60)
    metas = [f.get(timeout=60) for f in futures]
    producer.close()
    assert len({(m.partition, m.offset) for m in metas}) == 1000
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=10_000)
    consumer.assign([KTP(topic, p) for p in range(3)])
    consumer.seek_to_beginning()
    values = [m.value for m in consumer]
    consumer.close()
    assert sorted(values) == sorted(b"kp-%d" % i for i in range(1000))


def test_aiokafka_round_trip(cluster):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP
    bootstrap = cluster.bootstrap_servers()
    topic = topic_name("aio")
    cluster.admin().create_topic(topic, 2, 3)

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                    enable_idempotence=True)
        await producer.start()
        try:
            for i in range(300):
                await producer.send(topic, key=b"a%d" % (i % 3), value=b"aio-%d" % i)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([ATP(topic, 0), ATP(topic, 1)])
            await consumer.seek_to_beginning()
            got = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 300 and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=1000)
                for msgs in batches.values():
                    got += [m.value for m in msgs]
            return got
        finally:
            await consumer.stop()

    assert sorted(asyncio.run(run())) == sorted(b"aio-%d" % i for i in range(300))


# -- bad input ---------------------------------------------------------------------------------
def test_bad_frames_close_only_their_connection_and_append_nothing(cluster):
    topic = topic_name("bad")
    cluster.admin().create_topic(topic, 1, 3)
    host, port = cluster.bootstrap_servers().split(",")[0].rsplit(":", 1)
    c = cluster.consumer()
    before = c.end_offsets([(topic, 0)])

    def closed_after(payload: bytes) -> bool:
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            data = s.recv(65536)
            return data == b"" or s.recv(65536) == b""

    oversized = struct.pack(">i", 200 * 1024 * 1024)                   # over socket.request.max.bytes
    truncated = struct.pack(">i", 100) + b"\x00\x00" * 10             # size says more than sent
    garbage = struct.pack(">i", 12) + b"\xff" * 12                     # api key -1, nonsense
    produce_v9_junk = struct.pack(">ihhi", 10, 0, 9, 7) + b"\x00\x01"  # Produce v9, body cut short
    # ApiVersions v3 whose body carries tag 5, which no schema of Kafka 3.8 knows
    header = struct.pack(">hhih", 18, 3, 8, 2) + b"id" + b"\x00"
    unknown_tag = header + b"\x02x" + b"\x021" + b"\x01\x05\x00"
    metadata_v99 = struct.pack(">hhih", 3, 99, 9, 2) + b"id" + b"\x00\x00"   # a version never served
    for payload in (oversized, truncated, garbage, produce_v9_junk, b"\x00" * 3,
                    struct.pack(">i", len(unknown_tag)) + unknown_tag,
                    struct.pack(">i", len(metadata_v99)) + metadata_v99):
        assert closed_after(payload)
    # the broker keeps serving everyone else, and nothing was appended
    proc = kcat(cluster.bootstrap_servers(), "-L", "-J", "-t", topic)
    assert proc.returncode == 0 and json.loads(proc.stdout)["topics"][0]["topic"] == topic
    assert c.end_offsets([(topic, 0)]) == before
    c.close()


def test_a_long_poll_on_one_connection_does_not_block_another(cluster):
    topic = topic_name("lp")
    cluster.admin().create_topic(topic, 1, 3)
    bootstrap = cluster.bootstrap_servers()
    # a produce that waited out this long-poll (60 s) would miss its flush deadline (30 s)
    slow = Consumer({"bootstrap.servers": bootstrap, "group.id": "lp", "fetch.wait.max.ms": 60_000,
                     "socket.timeout.ms": 120_000, "enable.auto.commit": False})
    slow.assign([TopicPartition(topic, 0, 0)])
    stop = threading.Event()
    threading.Thread(target=lambda: [slow.poll(0.5) for _ in iter(stop.is_set, True)],
                     daemon=True).start()
    try:
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        for i in range(20):
            p.produce(topic, b"x%d" % i)
            assert p.flush(30) == 0
    finally:
        stop.set()
        slow.close()


# -- admin APIs, auto-creation, offsets by time, sizes ------------------------------------------
def test_confluent_admin_apis(cluster):
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       NewPartitions)
    bootstrap = cluster.bootstrap_servers()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_cluster().result(timeout=60)
    assert sorted(n.id for n in described.nodes) == [1, 2, 3]
    assert described.controller.id in (1, 2, 3) and described.cluster_id

    topic = topic_name("adm")
    admin.create_topics([NewTopic(topic, 2, 3, config={"min.insync.replicas": "2"})])[topic] \
        .result(timeout=60)
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(timeout=60)
    assert [p.partition for p in cluster.admin().describe_topic(topic)] == [0, 1, 2, 3]
    with pytest.raises(KafkaException) as shrink:
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=60)
    assert shrink.value.args[0].code() == KafkaError.INVALID_PARTITIONS

    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([res])[res].result(timeout=60)
    assert configs["min.insync.replicas"].value == "2" and not configs["min.insync.replicas"].is_default
    assert configs["retention.ms"].is_default
    alter = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("min.insync.replicas", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([alter])[alter].result(timeout=60)
    assert cluster.admin().topic_config(topic) == {"retention.ms": "3600000"}
    bad = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as invalid:
        admin.incremental_alter_configs([bad])[bad].result(timeout=60)
    assert invalid.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert cluster.admin().topic_config(topic) == {"retention.ms": "3600000"}   # unchanged

    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
    assert topic not in cluster.admin().list_topics()
    with pytest.raises(KafkaException) as unknown:
        admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
    assert unknown.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_producing_to_an_unknown_topic_creates_it(cluster):
    topic = topic_name("auto")
    proc = kcat(cluster.bootstrap_servers(), "-P", "-t", topic, stdin=b"first\nsecond\n")
    assert proc.returncode == 0, proc.stderr.decode()
    assert topic in cluster.admin().list_topics()
    assert len(cluster.admin().describe_topic(topic)) == 1           # num.partitions default 1
    got = read_all_confluent(cluster.bootstrap_servers(), topic, 1, 2)
    assert [m.value() for m in got] == [b"first", b"second"]


def test_offsets_for_times_and_oversized_batches(cluster):
    bootstrap = cluster.bootstrap_servers()
    topic = topic_name("ts")
    cluster.admin().create_topic(topic, 1, 3, {"max.message.bytes": 2048})
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(10):
        p.produce(topic, b"t%d" % i, timestamp=1_000_000 + 1000 * i)
        p.flush(30)
    errors = []
    p.produce(topic, b"x" * 4000, on_delivery=lambda err, _m: errors.append(err))
    p.flush(30)
    assert errors and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ts"})
    try:
        found = c.offsets_for_times([TopicPartition(topic, 0, 1_004_500)], timeout=30)
        assert found[0].offset == 5                                  # first at or after t
        latest = c.offsets_for_times([TopicPartition(topic, 0, 9_000_000)], timeout=30)
        assert latest[0].offset == -1                                 # none that late
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        assert (low, high) == (0, 10)                                 # the big batch appended nothing
    finally:
        c.close()


# -- old clients: Kafka 3.8's oldest versions and message formats v0/v1 -------------------------
def _leader_address(cluster, topic: str, partition: int = 0) -> tuple[str, int]:
    leader = cluster.admin().describe_topic(topic)[partition].leader
    (ep,) = [e for e in cluster.store.get_broker(leader).endpoints if e.listener == "PLAINTEXT"]
    return ep.host, ep.port


def _wire(address, msg, correlation_id: int = 1):
    """One request over a fresh socket (kafka-python encodes and decodes): its answer."""
    from tests.protocol_samples import RESPONSES, frame_of
    with socket.create_connection(address, timeout=30) as s:
        s.sendall(frame_of(msg, correlation_id, client_id="burrow"))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        frame = s.recv(size, socket.MSG_WAITALL)
    answer = RESPONSES[msg.API_KEY].decode(frame, version=msg.API_VERSION, header=True)
    assert answer.header.correlation_id == correlation_id
    return answer


def test_old_kafka_python_clients_write_and_read_message_formats_v0_and_v1(cluster):
    """kafka-python pinned to Kafka 0.9 (Produce v1 and Fetch v1: magic 0, ListOffsets v0,
    OffsetCommit v2) and to 0.10.1 (Produce v2 and Fetch v3: magic 1, timestamps): what
    each writes is stored as v2 batches and read back by every client, converted."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata
    bootstrap = cluster.bootstrap_servers()
    topic = topic_name("old")
    cluster.admin().create_topic(topic, 1, 3)
    sent = {}
    for version, codec in (((0, 9), "gzip"), ((0, 10, 1), None)):
        p = KafkaProducer(bootstrap_servers=bootstrap, api_version=version, acks="all",
                          enable_idempotence=False, compression_type=codec)
        for i in range(50):
            value = b"%s-%02d" % (str(version).encode(), i)
            p.send(topic, key=b"k%d" % (i % 3), value=value, timestamp_ms=1_700_000_000_000 + i)
            sent[value] = 1_700_000_000_000 + i if version >= (0, 10) else -1
        p.flush(60)
        p.close()
    c = cluster.consumer()
    c.assign([(topic, 0)])
    native = []
    wait_for(lambda: native.extend(c.poll(timeout_ms=500)) or len(native) >= 100, TIMEOUT_S,
             "100 records natively")
    c.close()
    assert {r.value: r.timestamp_ms for r in native} == sent     # v0 records: no timestamp
    for version in ((0, 9), (0, 10, 1)):
        k = KafkaConsumer(bootstrap_servers=bootstrap, api_version=version,
                          group_id=f"old-{version[1]}", enable_auto_commit=False)
        k.assign([KTP(topic, 0)])
        k.seek_to_beginning()                                    # ListOffsets v0 / v1
        got, deadline = [], time.monotonic() + TIMEOUT_S
        while len(got) < 100 and time.monotonic() < deadline:
            got += [m for msgs in k.poll(timeout_ms=500).values() for m in msgs]
        assert sorted(m.value for m in got) == sorted(sent)
        assert [m.offset for m in got] == list(range(100))
        if version >= (0, 10):                                   # magic 1 carries them
            assert {m.value: m.timestamp for m in got} == sent
        k.commit({KTP(topic, 0): OffsetAndMetadata(100, "", -1)})   # OffsetCommit v2
        assert k.committed(KTP(topic, 0)) == 100
        k.close()


def test_burrow_style_list_offsets_v0_and_zookeeper_kept_offsets(cluster):
    """Burrow (sarama) asks ListOffsets v0 for the newest offset; OffsetCommit / OffsetFetch
    v0 keep offsets in ZooKeeper's /consumers, as Kafka 3.8 does."""
    from kafka.protocol.consumer import ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest
    topic = topic_name("burrow")
    cluster.admin().create_topic(topic, 1, 3)
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all"})
    for i in range(7):
        p.produce(topic, b"b%d" % i)
    assert p.flush(30) == 0
    t = ListOffsetsRequest.ListOffsetsTopic
    ask = [t.ListOffsetsPartition(partition_index=0, timestamp=ts, max_num_offsets=1)
           for ts in (-1, -2)]
    answer = _wire(_leader_address(cluster, topic), ListOffsetsRequest[0](
        replica_id=-1, topics=[t(name=topic, partitions=ask[:1]), t(name=topic,
                                                                     partitions=ask[1:])]))
    assert [(x.error_code, x.old_style_offsets) for tt in answer.topics
            for x in tt.partitions] == [(0, [7]), (0, [0])]
    ct = OffsetCommitRequest.OffsetCommitRequestTopic
    addr = _leader_address(cluster, topic)
    committed = _wire(addr, OffsetCommitRequest[0](group_id="zk-group", topics=[ct(
        name=topic, partitions=[ct.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=5, committed_metadata="m")])]))
    assert committed.topics[0].partitions[0].error_code == 0
    assert cluster.store.get_consumer_offset("zk-group", topic, 0) == 5
    ft = OffsetFetchRequest.OffsetFetchRequestTopic
    fetched = _wire(addr, OffsetFetchRequest[0](group_id="zk-group", topics=[
        ft(name=topic, partition_indexes=[0])]))
    assert [(x.committed_offset, x.error_code) for x in fetched.topics[0].partitions] == [(5, 0)]


# -- topic ids and fetch sessions ---------------------------------------------------------------
def _consumer_session_stats(cluster) -> dict:
    total: dict = {}
    for stats in ray.get([b.fetch_session_stats.remote() for b in cluster.broker_actors()]):
        for k, v in stats["consumer"].items():
            total[k] = total.get(k, 0) + v
    return total


def test_topic_ids_and_incremental_fetch_sessions(cluster):
    """librdkafka learns the topic id ZooKeeper holds (Metadata v12) and reads by id (Fetch
    v13+, offered now); kafka-python keeps a fetch session (KIP-227): after one full fetch
    per broker its fetches are incremental (librdkafka 2.x fetches sessionless)."""
    from confluent_kafka import TopicCollection
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    topic = topic_name("ids")
    bootstrap = cluster.bootstrap_servers()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 2)])[topic].result(60)
    stored = cluster.store.get_topic_assignment(topic).topic_id
    deadline = time.monotonic() + TIMEOUT_S

    def seen() -> str:      # librdkafka prints standard base64, Kafka (and ZooKeeper) url-safe
        desc = admin.describe_topics(TopicCollection([topic]))[topic].result(30)
        return str(desc.topic_id).replace("+", "-").replace("/", "_")
    while seen() != stored and time.monotonic() < deadline:
        time.sleep(0.2)     # brokers learn the id with the topic's UpdateMetadata
    assert seen() == stored and len(stored) == 22
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(300):
        p.produce(topic, b"v%d" % i, partition=i % 3)
    assert p.flush(30) == 0
    got = read_all_confluent(bootstrap, topic, 3, 300)          # Fetch v13+ by topic id
    assert sorted(m.value() for m in got) == sorted(b"v%d" % i for i in range(300))
    before = _consumer_session_stats(cluster)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), fetch_max_wait_ms=100,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([KTP(topic, p) for p in range(3)])
    values, polls = [], 0
    while (len(values) < 300 or polls < 20) and time.monotonic() < deadline:
        polls += 1
        for records in consumer.poll(timeout_ms=200).values():
            values += [r.value for r in records]
    consumer.close()
    after = _consumer_session_stats(cluster)
    assert sorted(values) == sorted(b"v%d" % i for i in range(300))
    incremental = after["incremental"] - before["incremental"]
    full = after["full"] - before["full"]
    print(f"kafka-python fetches: {full} full, {incremental} incremental")
    assert incremental > full >= 1, (before, after)
    assert after["errors"] == before["errors"]
