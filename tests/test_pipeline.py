"""Spark on Ray (RayDP) over rayka, on a multi-node Ray test cluster on one machine.

`ray.cluster_utils.Cluster`: a head (controllers, ZooKeeper host) and three worker nodes,
each with one broker (`rayka_broker`) and one Spark executor (`spark_slot`). Proven here
from the tasks' own reports (the node found by walking each Python worker's process
ancestry to its executor JVM, a Ray actor): every read task ran on its leader's node; the
DataFrame equals what a plain consumer reads; a leader killed in the middle of a task's
range (a failpoint parks the task there) changes nothing in the result; write_topic then
read_topic round-trips with Spark's Kafka-source schema; a transactional write stays
exactly-once through retried and zombie tasks; an incremental run that crashed after
writing part of its output is redone without a duplicate or a gap."""

from __future__ import annotations

import threading
import time
import uuid
import zlib
from collections import Counter

import pytest
import ray

import rayka
from rayka.client.admin import wait_for
from tests.ray_cluster import wait_broker_back

pytestmark = [pytest.mark.ray, pytest.mark.pipeline]
NODE = {"num_cpus": 2, "resources": {"rayka_broker": 1, "spark_slot": 1}}

# Spark's Kafka source schema (spark-sql-kafka-0-10 KafkaRecordToRowConverter.kafkaSchema),
# written out here independently of pipeline.source.KAFKA_SCHEMA
EXPECTED_SCHEMA = [("key", "binary"), ("value", "binary"), ("topic", "string"),
                   ("partition", "int"), ("offset", "bigint"), ("timestamp", "timestamp"),
                   ("timestampType", "int")]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    from ray.cluster_utils import Cluster
    from pipeline import start_spark, stop_spark
    rc = Cluster(initialize_head=True,
                 head_node_args={"num_cpus": 1, "resources": {"rayka_control": 100}})
    cl = spark = None
    try:
        nodes = [rc.add_node(**NODE) for _ in range(3)]
        rc.wait_for_nodes()
        ray.init(address=rc.address, logging_level="WARNING")
        cl = rayka.start_local(name=f"p{uuid.uuid4().hex[:8]}", brokers=3, controllers=2,
                               data_dir=str(tmp_path_factory.mktemp("rayka")),
                               broker_resources={"rayka_broker": 1},
                               control_resources={"rayka_control": 1},
                               replica_lag_time_max_ms=3000)
        spark = start_spark(cl, executors=3, executor_resource="spark_slot",
                            executor_memory="512m")
        yield cl, spark, nodes
    finally:
        if spark is not None:
            stop_spark()
        if cl is not None:
            cl.shutdown()
        ray.shutdown()
        rc.shutdown()


def produce(cl, topic, n, keyed=True, partition=None, batch_size=1 << 20, prefix=b"r",
            compression_type="none"):
    p = cl.producer(acks="all", batch_size=batch_size, compression_type=compression_type)
    values = [prefix + b"%07d" % i + b"." * 90 for i in range(n)]
    if keyed:
        futures = [p.send(topic, v, key=b"user-%d" % (i % 97)) for i, v in enumerate(values)]
    else:
        futures = [p.send_batch(topic, values[i:i + 5000], partition=partition)
                   for i in range(0, n, 5000)]
    p.flush(120)
    for f in futures:
        f.result(0)
    p.close(30)
    return values


def consume_all(cl, topic):
    c = cl.consumer()
    c.subscribe([topic])
    ends = c.end_offsets(c.assignment())
    got = []
    wait_for(lambda: got.extend(c.poll(timeout_ms=200))
             or all(c.position(tp) >= e for tp, e in ends.items()), 120, f"{topic} read")
    return got


def test_read_is_pinned_to_leader_nodes_and_equals_a_plain_consumer(env):
    from pipeline import placements, read_topic
    cl, spark, nodes = env
    cl.admin().create_topic("pinned", 6, 3, {"min.insync.replicas": 2})
    produce(cl, "pinned", 20_000, compression_type="zstd")   # the read decodes the codec
    broker_nodes = {b.id: b.node_id for b in cl.brokers()}
    assert len(set(broker_nodes.values())) == 3, "one broker per node"
    df = read_topic(spark, cl, "pinned")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == EXPECTED_SCHEMA
    rows = df.select("partition", "offset", "key", "value").collect()
    expected = {(r.partition, r.offset, r.key, r.value) for r in consume_all(cl, "pinned")}
    assert len(rows) == len(expected) == 20_000
    assert {(r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows} == expected

    reports = placements(df)
    assert sorted(r["partition"] for r in reports) == list(range(6))
    assert len({r["leader_node_at_plan"] for r in reports}) == 3, "leaders on three nodes"
    for r in reports:
        assert r["pinned_executor"] is not None
        assert r["leader_node_at_plan"] == broker_nodes[r["leader_at_plan"]]
        assert r["task_node"] == r["leader_node_at_plan"], r
        assert r["rows"] == r["end"] - r["start"]

    # kept past the driver by the ClusterHost (pipeline/tasklog.py forwards, fire and forget)
    from pipeline import plan_of
    read_id = plan_of(df).read_id

    def kept():
        return next((r for r in cl.pipeline_reads() if r["read_id"] == read_id), {})
    wait_for(lambda: len(kept().get("reports", [])) == len(reports), 30,
             "the read's reports kept by the ClusterHost")
    assert kept()["topic"] == "pinned" and kept()["partitions"] == 6
    assert kept()["records"] == 20_000
    assert sorted(kept()["reports"], key=lambda r: r["partition"]) == \
        sorted(reports, key=lambda r: r["partition"])


def test_leader_killed_in_the_middle_of_a_task_changes_nothing(env):
    from pyspark.sql import functions as F
    from pipeline import holding, placements, plan_of, read_topic, release
    cl, spark, _ = env
    cl.admin().create_topic("failover", 3, 3, {"min.insync.replicas": 2})
    values = produce(cl, "failover", 60_000, keyed=False, partition=0, batch_size=16 << 10)
    df = read_topic(spark, cl, "failover", fetch_max_bytes=64 << 10, hold_at={0: 30_000})
    victim = next(r for r in plan_of(df).ranges if r.partition == 0).leader
    old_epoch = cl.store.get_broker(victim).epoch
    result = {}

    def run():
        try:
            result["rows"] = df.groupBy("partition").agg(
                F.count("*").alias("n"), F.sum("offset").alias("offsets"),
                F.sum(F.crc32("value")).alias("crc")).collect()
        except Exception as e:  # surfaced by the assertion below
            result["error"] = e
    job = threading.Thread(target=run)
    job.start()
    wait_for(lambda: 0 in holding(df), 180, "the task of partition 0 parked mid-range")
    cl.kill_broker(victim, restart=True)
    wait_for(lambda: cl.admin().describe_topic("failover")[0].leader not in (victim, -1), 60,
             "a new leader for failover-0")
    release(df, 0)
    job.join(300)
    assert "error" not in result, result.get("error")
    got = {r.partition: (r.n, r.offsets, r.crc) for r in result["rows"]}
    n = len(values)
    assert got == {0: (n, n * (n - 1) // 2, sum(zlib.crc32(v) for v in values))}
    report = next(r for r in placements(df) if r["partition"] == 0)
    assert report["resolves"] >= 1 and report["leader_at_end"] != victim, report
    wait_broker_back(cl, {victim: old_epoch})          # the next tests want RF-3 topics


def test_write_then_read_round_trips_with_the_kafka_schema(env):
    from pyspark.sql import functions as F
    from pipeline import read_topic, write_topic
    from rayka.errors import InvalidRecord, UnknownTopicOrPartition
    cl, spark, _ = env
    cl.admin().create_topic("roundtrip", 4, 3, {"min.insync.replicas": 2})
    data = [(None if i % 10 == 0 else b"k%d" % (i % 50), b"v%06d" % i) for i in range(5_000)]
    df = spark.createDataFrame(data, "key binary, value binary").repartition(3)
    result = write_topic(df, cl, "roundtrip")
    assert result.records == 5_000 and sum(result.per_partition.values()) == 5_000
    back = read_topic(spark, cl, "roundtrip")
    assert [(f.name, f.dataType.simpleString()) for f in back.schema.fields] == EXPECTED_SCHEMA
    rows = back.select("key", "value", "topic").collect()
    assert Counter((None if r.key is None else bytes(r.key), bytes(r.value)) for r in rows) \
        == Counter(data)
    assert {r.topic for r in rows} == {"roundtrip"}
    # CreateTime stamped by the producer: epoch time of the write, not a monotonic clock
    stamps = back.agg(F.min(F.col("timestamp").cast("long")).alias("lo"),
                      F.max(F.col("timestamp").cast("long")).alias("hi"),
                      F.max("timestampType").alias("type")).first()
    assert abs(stamps.lo - time.time()) < 3600 and abs(stamps.hi - time.time()) < 3600
    assert stamps.type == 0
    # keyed rows land where a Kafka client puts them: one partition per key
    per_key = back.where(F.col("key").isNotNull()).groupBy("key").agg(
        F.countDistinct("partition").alias("parts")).collect()
    assert per_key and all(r.parts == 1 for r in per_key)
    with pytest.raises(InvalidRecord):
        write_topic(spark.createDataFrame([(1, 2)], "key int, value int"), cl, "roundtrip")
    with pytest.raises(UnknownTopicOrPartition):
        write_topic(df, cl, "no-such-topic")


def test_a_transactional_write_is_exactly_once_through_retried_and_zombie_tasks(env):
    """write_topic(transactional=True): every Spark partition commits once. A rerun of a
    task after its commit writes nothing (its done offset is read as a stable commit after
    init_transactions); a zombie attempt still open when a newer attempt starts is fenced:
    its rows are aborted, its commit refused. read_committed reads (Spark and native) see
    each row once; read_uncommitted also sees the aborted zombie rows."""
    import pyarrow as pa
    from pipeline import read_topic, write_topic
    from pipeline.sink import produce_transactional
    from rayka.errors import ProducerFenced
    cl, spark, _ = env
    cl.admin().create_topic("txn-sink", 3, 3, {"min.insync.replicas": 2})
    data = [(b"k%d" % (i % 40), b"v%05d" % i) for i in range(3_000)]
    df = spark.createDataFrame(data, "key binary, value binary").repartition(3)
    result = write_topic(df, cl, "txn-sink", transactional=True, write_id="w1")
    assert result.records == 3_000 and result.tasks == 3 and result.skipped == 0
    ctx = {"address": ray.get_runtime_context().gcs_address, "namespace": cl.namespace,
           "name": cl.name, "topic": "txn-sink", "acks": "all", "producer": {},
           "write_id": "w1"}
    again = [pa.RecordBatch.from_pydict({"key": [b"x"], "value": [b"again"]})]
    counts, skipped = produce_transactional(iter(again), ctx, 1)     # task 1 rerun
    assert skipped and sum(counts.values()) > 0                      # the first run's counts
    # a zombie: task 7 of another write, still open when its retry starts
    zombie = cl.producer(transactional_id="rayka-write-w2-7")
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.send("txn-sink", b"zombie", partition=0).result(60)
    retry = [pa.RecordBatch.from_pydict({"key": [b"z"], "value": [b"retry"]})]
    counts, skipped = produce_transactional(iter(retry), dict(ctx, write_id="w2"), 7)
    assert not skipped and sum(counts.values()) == 1
    with pytest.raises(ProducerFenced):
        zombie.commit_transaction()
    committed = read_topic(spark, cl, "txn-sink", isolation_level="read_committed")
    values = Counter(bytes(r.value) for r in committed.select("value").collect())
    assert values == Counter([v for _, v in data] + [b"retry"])      # once each, no zombie
    everything = Counter(bytes(r.value) for r in read_topic(spark, cl, "txn-sink")
                         .select("value").collect())
    assert everything[b"zombie"] == 1 and everything[b"again"] == 0
    assert sum(everything.values()) == 3_002                          # no marker as a row
    c = cl.consumer(isolation_level="read_committed")
    c.assign([("txn-sink", p) for p in range(3)])
    native = []
    deadline = time.monotonic() + 60
    while len(native) < 3_001 and time.monotonic() < deadline:
        native += c.poll(timeout_ms=200)
    c.close()
    assert Counter(r.value for r in native) == values


def test_incremental_run_after_a_crash_neither_skips_nor_double_writes(env):
    from pyspark.sql import functions as F
    from pipeline import read_topic, run_incremental, write_topic
    from pipeline.incremental import plan_run
    cl, spark, _ = env
    admin = cl.admin()
    admin.create_topic("inc-in", 3, 3, {"min.insync.replicas": 2})
    admin.create_topic("inc-out", 2, 3, {"min.insync.replicas": 2})

    def transform(df):   # deterministic, one output row per input row
        return df.select(F.col("key"), F.concat(F.lit(b"out:"), F.col("value")).alias("value"))

    first = produce(cl, "inc-in", 3_000, prefix=b"a")
    r1 = run_incremental(spark, cl, "job", "inc-in", "inc-out", transform)
    assert (r1.records_in, r1.records_written, r1.plan.recovering) == (3_000, 3_000, False)

    second = produce(cl, "inc-in", 2_000, prefix=b"b")
    plan = plan_run(cl, "job", "inc-in", "inc-out")       # the next run plans, then "crashes"
    assert plan.records == 2_000 and not plan.recovering
    crashed = read_topic(spark, cl, "inc-in",
                         starting_offsets={p: s for p, (s, _) in plan.ranges.items()},
                         ending_offsets={p: e for p, (_, e) in plan.ranges.items()})
    partial = write_topic(transform(crashed).where(F.col("partition") == 0), cl, "inc-out")
    assert 0 < partial.records < 2_000
    produce(cl, "inc-in", 500, prefix=b"c")                 # arrives after the crash

    r2 = run_incremental(spark, cl, "job", "inc-in", "inc-out", transform)
    assert r2.plan.recovering and r2.plan.ranges == plan.ranges   # exactly the crashed range
    assert r2.already_present == partial.records
    assert r2.records_written == 2_000 - partial.records
    r3 = run_incremental(spark, cl, "job", "inc-in", "inc-out", transform)
    assert (r3.records_in, r3.plan.recovering) == (500, False)

    out = Counter(r.value for r in consume_all(cl, "inc-out"))
    want = Counter(b"out:" + v for v in first + second) + Counter(
        b"out:c%07d" % i + b"." * 90 for i in range(500))
    assert out == want
    committed = cl.admin().committed_offsets("job", "inc-in")
    assert sum(committed.values()) == 5_500


def test_offset_specs_committed_latest_explicit_and_bad_input(env):
    from pipeline import read_topic
    from rayka.errors import InvalidRequest, OffsetOutOfRange, UnknownTopicOrPartition
    cl, spark, _ = env
    cl.admin().create_topic("specs", 2, 3, {"min.insync.replicas": 2})
    produce(cl, "specs", 400, keyed=False, partition=0)
    produce(cl, "specs", 100, keyed=False, partition=1)
    cl.admin().commit_offsets("g", {("specs", 0): 150})        # partition 1: nothing committed
    got = read_topic(spark, cl, "specs", starting_offsets="committed:g").select(
        "partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in got) == \
        [(0, o) for o in range(150, 400)] + [(1, o) for o in range(100)]
    assert read_topic(spark, cl, "specs", starting_offsets="latest").count() == 0
    window = read_topic(spark, cl, "specs", starting_offsets={0: 10, 1: 90},
                        ending_offsets={0: 20, 1: 100})
    assert sorted(r.offset for r in window.select("offset").collect()) == \
        list(range(10, 20)) + list(range(90, 100))
    with pytest.raises(OffsetOutOfRange):
        read_topic(spark, cl, "specs", ending_offsets={0: 401})
    with pytest.raises(InvalidRequest):
        read_topic(spark, cl, "specs", starting_offsets="newest")
    with pytest.raises(UnknownTopicOrPartition):
        read_topic(spark, cl, "no-such-topic")


def test_the_demo_job_counts_match_and_every_partition_is_pinned(env):
    """What `make demo` runs (pipeline/demo.py), on this module's cluster and Spark: its
    own start-up is `rayka.start_local` and `start_spark`, both exercised above."""
    from rich.console import Console

    from pipeline import demo
    cl, spark, _ = env
    s = demo.run_on(spark, cl, clicks_total=30_000, seed=7, executors=3,
                    console=Console(stderr=True))
    assert s["mismatched"] == 0 and s["rows_written"] == s["page_minutes"] > 0
    assert s["pinned"] == s["partitions"] == 12
    assert s["task_resolves"] >= 1 and s["new_leader"] not in (None, s["killed_broker"])
