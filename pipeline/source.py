"""read_topic: a topic's offset ranges as a Spark DataFrame, each partition read on its
leader's node.

Rules:
- The plan is made on the driver: per partition, [start, end) from `starting_offsets`
  ("earliest" | "latest" | {partition: offset} | "committed:<group>") and `ending_offsets`
  ("latest" = the high watermark now | {partition: offset}); the current leader and its
  Ray node (from ZooKeeper and the broker actor); the executor on that node. A range
  outside [log start, HW] is OFFSET_OUT_OF_RANGE (1) before any Spark job runs.
- One Spark partition per topic partition. The descriptor RDD carries executor-level
  preferred locations (`executor_<host>_<id>`, Spark's makeRDD with preferred locations); every
  later stage of the read is narrow, so Spark's DAG scheduler keeps the preference, and
  `spark.locality.wait` is long enough that the task waits for that executor.
- The task pulls the range from the leader broker (same node: the data stays on the node),
  below the HW only, as a consumer does (replica id -1, the leader epoch it knows). On
  NOT_LEADER / FENCED / UNKNOWN_LEADER_EPOCH / a dead or restarting broker it re-resolves
  the leader from the live brokers and continues from its position, so it returns exactly
  [start, end) even when the leader moves or dies mid-read.
- Every task reports where it ran: the node it found by walking its process ancestry to
  its executor JVM (a Ray actor whose pid Ray's actor table gives), the leader's node at
  plan time and at the end, and how often it re-resolved. `placements(df)` returns those
  reports (from the TaskLog actor) after an action ran; the plan and the reports are also
  kept past the driver by the cluster's ClusterHost (pipeline/tasklog.py forwards them).
- Output rows are Arrow batches (mapInArrow): the Python worker never builds Row objects.
- Transaction markers are never rows. `isolation_level="read_committed"` reads only
  committed transactional records: "latest" is then the last stable offset, and the
  tasks drop aborted transactions as a read_committed consumer does
  (replicas/visible.py).
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid

import ray
from pyspark.rdd import RDD
from pyspark.serializers import UTF8Deserializer
from pyspark.sql.types import (BinaryType, IntegerType, LongType, StringType, StructField,
                               StructType, TimestampType)

from pipeline.spark import executors_of
from pipeline.tasklog import task_log
from replicas.errors import InvalidRequest, OffsetOutOfRange, UnknownTopicOrPartition

KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()),
    StructField("topic", StringType()), StructField("partition", IntegerType()),
    StructField("offset", LongType()), StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType())])
FETCH_MAX_BYTES = 8 << 20


@dataclasses.dataclass(frozen=True)
class PartitionRange:
    topic: str
    partition: int
    start: int
    end: int
    leader: int | None
    leader_epoch: int
    leader_node: str | None
    executor: str | None        # the Spark executor id the task is pinned to, if any


@dataclasses.dataclass
class ReadPlan:
    read_id: str
    topic: str
    ranges: list[PartitionRange]
    pinned: bool

    @property
    def records(self) -> int:
        return sum(r.end - r.start for r in self.ranges)


def plan_read(cluster, topic: str, starting_offsets="earliest",
              ending_offsets="latest", isolation_level: str = "read_uncommitted"
              ) -> list[PartitionRange]:
    """Per partition: [start, end) and the leader now (ZooKeeper's partition state); the
    end bound is the high watermark, the last stable offset for read_committed."""
    infos = cluster.admin().describe_topic(topic)     # raises UnknownTopicOrPartition
    consumer = cluster.consumer(isolation_level=isolation_level)
    tps = [(topic, p.partition) for p in infos]
    bounds = consumer.offset_bounds(tps)                      # (log start, HW)
    committed = {}
    if isinstance(starting_offsets, str) and starting_offsets.startswith("committed:"):
        committed = cluster.admin().committed_offsets(starting_offsets.split(":", 1)[1], topic)
    nodes = {b.id: b.node_id for b in cluster.brokers()}
    ranges = []
    for p in infos:
        tp = (topic, p.partition)
        log_start, hw = bounds[tp]
        start = _resolve(starting_offsets, p.partition, log_start, hw, committed.get(tp))
        end = _resolve(ending_offsets, p.partition, log_start, hw, None, ending=True)
        if not log_start <= start <= end <= hw:
            raise OffsetOutOfRange(f"{topic}-{p.partition}: range [{start}, {end}) is not "
                                   f"within [log start {log_start}, high watermark {hw}]")
        ranges.append(PartitionRange(topic, p.partition, start, end, p.leader,
                                     p.leader_epoch, nodes.get(p.leader), None))
    return ranges


def _resolve(spec, partition: int, log_start: int, hw: int, committed, ending=False) -> int:
    if isinstance(spec, dict):
        if partition not in spec:
            return hw if ending else log_start
        return int(spec[partition])
    if spec == "earliest" and not ending:
        return log_start
    if spec == "latest":
        return hw
    if isinstance(spec, str) and spec.startswith("committed:") and not ending:
        return log_start if committed is None else committed
    raise InvalidRequest(f"unsupported {'ending' if ending else 'starting'}_offsets {spec!r}: "
                         "use 'earliest', 'latest', {partition: offset} or 'committed:<group>'")


def read_topic(spark, cluster, topic: str, starting_offsets="earliest",
               ending_offsets="latest", pin: bool = True,
               fetch_max_bytes: int = FETCH_MAX_BYTES, hold_at: dict | None = None,
               isolation_level: str = "read_uncommitted"):
    """The DataFrame of [start, end) of every partition, Kafka-source schema.
    `hold_at` {partition: offset} is a failpoint (pipeline.tasklog): those tasks park at
    that offset until `release(df, partition)`."""
    ranges = plan_read(cluster, topic, starting_offsets, ending_offsets, isolation_level)
    execs = executors_of(spark)
    by_node: dict[str, list] = {}
    for e in sorted(execs.values(), key=lambda e: int(e.executor_id)):
        by_node.setdefault(e.node_id, []).append(e)
    pinned, locs, used = [], [], {}
    for r in ranges:
        candidates = by_node.get(r.leader_node, []) if pin else []
        ex = None
        if candidates:   # spread a node's partitions over that node's executors
            ex = candidates[used.get(r.leader_node, 0) % len(candidates)]
            used[r.leader_node] = used.get(r.leader_node, 0) + 1
        pinned.append(dataclasses.replace(r, executor=ex.executor_id if ex else None))
        locs.append([ex.location] if ex else [])
    plan = ReadPlan(uuid.uuid4().hex[:12], topic, pinned, pin)
    log = task_log(cluster.namespace)
    log.plan.remote(plan.read_id, {       # fire and forget: kept by the ClusterHost
        "topic": topic, "partitions": len(pinned), "records": plan.records, "pinned": pin,
        "isolation_level": isolation_level, "planned_ms": int(time.time() * 1000),
        "job_id": ray.get_runtime_context().get_job_id()})
    ctx = {"address": ray.get_runtime_context().gcs_address, "namespace": cluster.namespace,
           "read_id": plan.read_id, "brokers": sorted(b.id for b in cluster.brokers()),
           "pids": {e.pid: e.node_id for e in execs.values()},
           "fetch_max_bytes": fetch_max_bytes, "holds": dict(hold_at or {}),
           "read_committed": isolation_level == "read_committed"}
    descriptors = [json.dumps(dataclasses.asdict(r)) for r in pinned]
    rdd = _located_rdd(spark.sparkContext, descriptors, locs)
    frame = spark.createDataFrame(rdd.map(lambda d: (d,)), "descriptor string")

    def read_partitions(batches):
        from pipeline.reader import read_range
        for b in batches:
            for d in b.column(0).to_pylist():
                yield from read_range(json.loads(d), ctx)

    df = frame.mapInArrow(read_partitions, KAFKA_SCHEMA)
    df._rayka_read = (plan, log)
    return df


def placements(df) -> list[dict]:
    """The reports of the read behind `df` (one per task attempt), after an action ran."""
    plan, log = df._rayka_read
    return ray.get(log.get.remote(plan.read_id))


def progress(df) -> dict[int, int]:
    """Partition → the position its running task last reported (a few times a second)."""
    plan, log = df._rayka_read
    return ray.get(log.progress.remote(plan.read_id))


def holding(df) -> set[int]:
    """Partitions whose task is parked at its hold offset right now."""
    plan, log = df._rayka_read
    return ray.get(log.holding.remote(plan.read_id))


def release(df, partition: int) -> None:
    plan, log = df._rayka_read
    ray.get(log.release.remote(plan.read_id, partition))


def plan_of(df) -> ReadPlan:
    return df._rayka_read[0]


def _located_rdd(sc, items: list[str], locations: list[list[str]]) -> RDD:
    """makeRDD(Seq[(String, Seq[String])]): one partition per item with its preferred
    locations; wrapped as a PySpark RDD of str (makeRDD with locations)."""
    jvm = sc._jvm
    pairs = jvm.java.util.ArrayList()
    for item, locs in zip(items, locations):
        jlocs = jvm.java.util.ArrayList()
        for loc in locs:
            jlocs.add(loc)
        seq = jvm.scala.collection.JavaConverters.asScalaBuffer(jlocs).toSeq()
        pairs.add(jvm.scala.Tuple2(item, seq))
    seq = jvm.scala.collection.JavaConverters.asScalaBuffer(pairs).toSeq()
    tag = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.String._java_lang_class)
    jrdd = sc._jsc.sc().makeRDD(seq, tag)
    java_rdd = jvm.org.apache.spark.api.java.JavaRDD(jrdd, tag)
    return RDD(java_rdd, sc, UTF8Deserializer())


__all__ = ["KAFKA_SCHEMA", "PartitionRange", "ReadPlan", "plan_read", "read_topic",
           "placements", "progress", "holding", "release", "plan_of", "UnknownTopicOrPartition"]
