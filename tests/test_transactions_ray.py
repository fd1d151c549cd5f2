"""Transactions on a real cluster (real Ray, the real ZooKeeper): the transaction coordinator
in the brokers, markers between brokers, read_committed fetches; producers and consumers of
librdkafka (confluent-kafka), kafka-python, aiokafka and the native client.

Short settings keep it fast: 4 `__transaction_state` and 4 `__consumer_offsets` partitions,
transaction.abort.timed.out.transaction.cleanup.interval.ms 500. Waits are polls with
deadlines."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest
import ray
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaException, Producer as KafkaProducer, TopicPartition

import rayka
from rayka.cli import build_parser
from rayka.client.admin import wait_for
from rayka.ops import transactions_cli
from replicas.errors import InvalidTxnState, ProducerFenced
from tests.ray_cluster import ray_session  # noqa: F401  (fixture)

pytestmark = pytest.mark.ray
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def cluster(ray_session, tmp_path_factory):
    c = rayka.start_local(name=f"x{uuid.uuid4().hex[:8]}", brokers=3, controllers=1,
                          data_dir=str(tmp_path_factory.mktemp("rayka")),
                          replica_lag_time_max_ms=3000, include_dashboard=False,
                          transaction_state_log_num_partitions=4,
                          offsets_topic_num_partitions=4,
                          transaction_abort_timed_out_transaction_cleanup_interval_ms=500,
                          group_initial_rebalance_delay_ms=100)
    yield c
    c.shutdown()


def topic(cluster, partitions: int = 2) -> str:
    name = f"t{uuid.uuid4().hex[:8]}"
    cluster.admin().create_topic(name, partitions, 3, {"min.insync.replicas": 2})
    return name


def read_librdkafka(cluster, name: str, partitions: int, isolation: str, expect: int,
                    settle_s: float = 2.0) -> list[bytes]:
    """Everything a librdkafka consumer of that isolation level reads from the start: until
    `expect` values arrived and nothing more came for `settle_s`."""
    c = KafkaConsumer({"bootstrap.servers": cluster.bootstrap_servers(),
                       "group.id": f"r{uuid.uuid4().hex[:6]}", "isolation.level": isolation,
                       "enable.auto.commit": False})
    c.assign([TopicPartition(name, p, 0) for p in range(partitions)])
    got, last = [], time.monotonic()
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
                last = time.monotonic()
            elif len(got) >= expect and time.monotonic() - last > settle_s:
                break
    finally:
        c.close()
    return got


def read_native(cluster, name: str, partitions: int, isolation: str, expect: int) -> list:
    c = cluster.consumer(isolation_level=isolation)
    c.assign([(name, p) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < expect and time.monotonic() < deadline:
        got += c.poll(timeout_ms=200)
    more = c.poll(timeout_ms=500)               # nothing past what is expected
    positions = {p: c.position((name, p)) for p in range(partitions)}
    c.close()
    return [r.value for r in got + more], positions


def test_librdkafka_commits_and_aborts_and_read_committed_sees_only_commits(cluster):
    name = topic(cluster)
    p = KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers(),
                       "transactional.id": f"tx-{name}", "linger.ms": 5})
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    for i in range(100):
        p.produce(name, b"c%d" % i, partition=i % 2)
    p.commit_transaction(TIMEOUT_S)
    p.begin_transaction()
    for i in range(50):
        p.produce(name, b"a%d" % i, partition=i % 2)
    p.flush(TIMEOUT_S)                   # on the brokers, then aborted
    p.abort_transaction(TIMEOUT_S)
    p.begin_transaction()
    for i in range(10):
        p.produce(name, b"d%d" % i, partition=i % 2)
    p.commit_transaction(TIMEOUT_S)

    committed = read_librdkafka(cluster, name, 2, "read_committed", 110)
    assert sorted(committed) == sorted([b"c%d" % i for i in range(100)]
                                       + [b"d%d" % i for i in range(10)])
    everything = read_librdkafka(cluster, name, 2, "read_uncommitted", 160)
    assert len(everything) == 160 and {v[:1] for v in everything} == {b"a", b"c", b"d"}
    values, positions = read_native(cluster, name, 2, "read_committed", 110)
    assert sorted(values) == sorted(committed)
    # past the last marker: a committed reader's position is each partition's end
    ends = {pi: ray.get(cluster.broker_actor(
        cluster.admin().describe_topic(name)[pi].leader).partition_info.remote((name, pi)))
        for pi in range(2)}
    assert positions == {pi: ends[pi]["last_stable_offset"] for pi in range(2)}
    assert all(e["last_stable_offset"] == e["high_watermark"] for e in ends.values())
    raw, _ = read_native(cluster, name, 2, "read_uncommitted", 160)
    assert len(raw) == 160 and not any(len(v) == 6 and v[:2] == b"\0\0" for v in raw)


def test_a_second_producer_of_the_same_id_fences_the_first(cluster):
    name = topic(cluster, 1)
    conf = {"bootstrap.servers": cluster.bootstrap_servers(), "transactional.id": f"tx-{name}"}
    first = KafkaProducer(conf)
    first.init_transactions(TIMEOUT_S)
    first.begin_transaction()
    first.produce(name, b"zombie", partition=0)
    first.flush(TIMEOUT_S)
    second = KafkaProducer(conf)
    second.init_transactions(TIMEOUT_S)   # aborts the first's open transaction
    second.begin_transaction()
    second.produce(name, b"second", partition=0)
    second.commit_transaction(TIMEOUT_S)
    with pytest.raises(KafkaException) as fenced:
        first.commit_transaction(TIMEOUT_S)
    assert fenced.value.args[0].fatal() or "fenced" in str(fenced.value).lower()
    assert read_librdkafka(cluster, name, 1, "read_committed", 1) == [b"second"]


def test_kafka_python_and_aiokafka_transactional_producers(cluster):
    from kafka import KafkaProducer as PyProducer
    name = topic(cluster)
    py = PyProducer(bootstrap_servers=cluster.bootstrap_servers(),
                    transactional_id=f"py-{name}")
    py.init_transactions()
    py.begin_transaction()
    for i in range(20):
        py.send(name, b"py%d" % i, partition=i % 2)
    py.commit_transaction()
    py.begin_transaction()
    for i in range(5):
        py.send(name, b"pyx%d" % i, partition=i % 2)
    py.flush()
    py.abort_transaction()
    py.close()

    async def aio():
        from aiokafka import AIOKafkaProducer
        p = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers(),
                             transactional_id=f"aio-{name}")
        await p.start()
        try:
            async with p.transaction():
                for i in range(20):
                    await p.send(name, b"aio%d" % i, partition=i % 2)
            await p.begin_transaction()
            await p.send_and_wait(name, b"aiox", partition=0)
            await p.abort_transaction()
        finally:
            await p.stop()
    asyncio.run(aio())

    async def aio_read():
        from aiokafka import AIOKafkaConsumer
        from aiokafka.structs import TopicPartition as TP
        c = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap_servers(),
                             isolation_level="read_committed", auto_offset_reset="earliest",
                             enable_auto_commit=False)
        await c.start()
        try:
            c.assign([TP(name, 0), TP(name, 1)])
            got = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 40 and time.monotonic() < deadline:
                batches = await c.getmany(timeout_ms=500)
                got += [m.value for ms in batches.values() for m in ms]
            return got
        finally:
            await c.stop()
    expected = sorted([b"py%d" % i for i in range(20)] + [b"aio%d" % i for i in range(20)])
    assert sorted(asyncio.run(aio_read())) == expected
    assert sorted(read_librdkafka(cluster, name, 2, "read_committed", 40)) == expected

    from kafka import KafkaConsumer as PyConsumer
    from kafka import TopicPartition as PyTP
    pc = PyConsumer(bootstrap_servers=cluster.bootstrap_servers(),
                    isolation_level="read_committed", enable_auto_commit=False,
                    auto_offset_reset="earliest", consumer_timeout_ms=3000)
    pc.assign([PyTP(name, 0), PyTP(name, 1)])
    assert sorted(m.value for m in pc) == expected
    pc.close()


def test_native_consume_transform_produce_with_offsets_in_the_transaction(cluster):
    source, sink = topic(cluster), topic(cluster)
    feed = cluster.producer(acks="all")
    feed.send_batch(source, [b"%d" % i for i in range(200)]).result(TIMEOUT_S)
    feed.close()
    group = f"ctp-{source}"
    consumer = cluster.consumer(group_id=group, enable_auto_commit=False,
                                isolation_level="read_committed")
    consumer.subscribe([source])
    producer = cluster.producer(transactional_id=f"ctp-{sink}")
    producer.init_transactions()
    seen, rounds = 0, 0
    deadline = time.monotonic() + TIMEOUT_S
    while seen < 200 and time.monotonic() < deadline:
        got = consumer.poll(timeout_ms=500, max_records=60)
        if not got:
            continue
        producer.begin_transaction()
        for r in got:
            producer.send(sink, b"x" + r.value, partition=r.partition)
        offsets = {}
        for r in got:
            offsets[(r.topic, r.partition)] = r.offset + 1
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        if rounds == 1:                  # one transaction aborted: its output never shows
            producer.abort_transaction()
            for tp, _ in offsets.items():
                consumer.seek(tp, min(r.offset for r in got if (r.topic, r.partition) == tp))
        else:
            producer.commit_transaction()
            seen += len(got)
        rounds += 1
    assert seen == 200 and rounds > 2
    values, _ = read_native(cluster, sink, 2, "read_committed", 200)
    assert sorted(values) == sorted(b"x%d" % i for i in range(200))    # exactly once
    fresh = cluster.consumer(group_id=group, enable_auto_commit=False)
    committed = {tp: fresh.committed(tp) or 0 for tp in ((source, 0), (source, 1))}
    assert committed == fresh.end_offsets(list(committed))       # every input consumed once
    fresh.close()
    producer.close()
    consumer.close()


def test_native_fencing_and_misuse_are_typed(cluster):
    name = topic(cluster, 1)
    first = cluster.producer(transactional_id=f"n-{name}")
    with pytest.raises(InvalidTxnState):
        first.send(name, b"before init", partition=0)
    first.init_transactions()
    with pytest.raises(InvalidTxnState):
        first.commit_transaction()           # no transaction begun
    first.begin_transaction()
    first.send(name, b"zombie", partition=0)
    first.flush(TIMEOUT_S)
    second = cluster.producer(transactional_id=f"n-{name}")
    second.init_transactions()
    with pytest.raises(ProducerFenced):
        first.commit_transaction()
    second.begin_transaction()
    second.send(name, b"winner", partition=0).result(TIMEOUT_S)
    second.commit_transaction()
    values, _ = read_native(cluster, name, 1, "read_committed", 1)
    assert values == [b"winner"]
    second.close()


def test_an_abandoned_transaction_is_aborted_by_its_timeout_and_readers_move_on(cluster):
    name = topic(cluster, 1)
    stuck = KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers(),
                           "transactional.id": f"stuck-{name}", "transaction.timeout.ms": 2000})
    stuck.init_transactions(TIMEOUT_S)
    stuck.begin_transaction()
    stuck.produce(name, b"never", partition=0)
    stuck.flush(TIMEOUT_S)                       # and the producer goes silent
    plain = cluster.producer(acks="all")
    plain.send(name, b"after", partition=0).result(TIMEOUT_S)
    plain.close()
    leader = cluster.broker_actor(cluster.admin().describe_topic(name)[0].leader)
    info = wait_for(lambda: (i := ray.get(leader.partition_info.remote((name, 0))))
                    ["last_stable_offset"] == i["high_watermark"] and i, TIMEOUT_S,
                    "the coordinator aborts the timed-out transaction: the LSO reaches the HW")
    assert info["high_watermark"] == 3               # never, after, the abort marker
    values, _ = read_native(cluster, name, 1, "read_committed", 1)
    assert values == [b"after"]


def test_admin_lists_describes_and_aborts_a_hanging_transaction(cluster, capsys):
    name = topic(cluster, 1)
    tid = f"hang-{name}"
    hanging = KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers(),
                             "transactional.id": tid, "transaction.timeout.ms": 600_000})
    hanging.init_transactions(TIMEOUT_S)
    hanging.begin_transaction()
    hanging.produce(name, b"stuck", partition=0)
    hanging.flush(TIMEOUT_S)
    admin = cluster.admin()
    listed = [t for t in admin.list_transactions(states=["Ongoing"]) if t["transactional_id"] == tid]
    assert len(listed) == 1 and listed[0]["state"] == "Ongoing"
    described = admin.describe_transaction(tid)
    assert described["state"] == "Ongoing" and described["partitions"] == [[name, 0]]
    producers = admin.describe_producers(name, 0)
    assert [p["current_transaction_start_offset"] for p in producers] == [0]
    # find-hanging: open past a 0 ms bound, but its coordinator still lists the partition
    assert admin.find_hanging_transactions([name], max_transaction_timeout_ms=0) == []
    args = build_parser().parse_args(["transactions", "find-hanging", "--topic", name,
                                      "--max-transaction-timeout", "0", "--json"])
    assert transactions_cli.run(args, cluster) == 0
    assert json.loads(capsys.readouterr().out) == []
    with pytest.raises(InvalidTxnState):
        admin.abort_transaction(name, 0, 7)                 # nothing starts at 7
    done = admin.abort_transaction(name, 0, 0)
    assert done["producer_id"] == described["producer_id"]
    leader = cluster.broker_actor(admin.describe_topic(name)[0].leader)
    info = wait_for(lambda: (i := ray.get(leader.partition_info.remote((name, 0))))
                    ["last_stable_offset"] == i["high_watermark"] and i, TIMEOUT_S,
                    "the ABORT marker moves the LSO to the HW")
    assert info["high_watermark"] == 2
    assert admin.describe_producers(name, 0)[0]["current_transaction_start_offset"] == -1
    assert admin.find_hanging_transactions([name], max_transaction_timeout_ms=0) == []
    values, _ = read_native(cluster, name, 1, "read_committed", 0)
    assert values == []
    hanging.abort_transaction(TIMEOUT_S)            # the coordinator finishes its side too
    wait_for(lambda: admin.describe_transaction(tid)["state"] == "CompleteAbort", TIMEOUT_S,
             "the coordinator's markers written (EndTxn answers at PrepareAbort)")
