"""write_topic: produce a DataFrame's rows into a topic from the executors.

Rules:
- Each Spark partition is produced by its own executor's Python worker through the
  ordinary idempotent Producer (acks as asked, "all" by default): no row passes through
  the driver. Rows cross from the JVM as Arrow batches (mapInArrow), never as Row objects.
- Keyed rows go where a Kafka client puts them (murmur2 of the key); rows with a null key
  are spread with the sticky partitioner. Within a Spark partition the order of rows with
  the same key is kept.
- The key and value columns must be binary or string (strings are UTF-8 encoded); another
  type raises InvalidRecord (87) before any job runs. A missing column raises
  InvalidRecord too.
- The write returns when every record is acknowledged; the result counts records per
  topic partition (batch operations return a result per item). A task whose producer
  fails raises the typed error, failing the Spark job; Spark's retry of that task may
  write its rows again (at-least-once; pipeline.incremental adds the dedup that makes a
  rerun exact).
"""

from __future__ import annotations

import collections
import dataclasses

from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType

from replicas.errors import InvalidRecord

CHUNK_ROWS = 50_000
_clusters: dict = {}


@dataclasses.dataclass
class WriteResult:
    topic: str
    records: int
    per_partition: dict[int, int]      # topic partition → records written there
    tasks: int                         # Spark tasks that produced


def write_topic(df, cluster, topic: str, key_column: str | None = "key",
                value_column: str = "value", acks="all", **producer_config) -> WriteResult:
    cols = dict(df.dtypes)
    selected = []
    for role, name in (("key", key_column), ("value", value_column)):
        if name is None:
            selected.append(F.lit(None).cast(BinaryType()).alias(role))
            continue
        if name not in cols:
            raise InvalidRecord(f"write_topic: no column {name!r} for the record {role} "
                                f"(columns: {', '.join(cols)})")
        field = df.schema[name].dataType
        if not isinstance(field, (BinaryType, StringType)):
            raise InvalidRecord(f"write_topic: column {name!r} is {field.simpleString()}; "
                                f"the record {role} must be binary or string")
        selected.append(F.col(name).cast(BinaryType()).alias(role))
    cluster.admin().describe_topic(topic)          # UnknownTopicOrPartition before the job
    ctx = {"address": _gcs_address(), "namespace": cluster.namespace, "name": cluster.name,
           "topic": topic, "acks": acks, "producer": producer_config}

    def produce(batches):
        import pyarrow as pa
        from pyspark import TaskContext
        counts = _produce_arrow(batches, ctx)
        task = TaskContext.get().partitionId()
        yield pa.RecordBatch.from_pydict(
            {"task": [task] * len(counts), "partition": list(counts),
             "records": list(counts.values())},
            schema=pa.schema([("task", pa.int32()), ("partition", pa.int32()),
                              ("records", pa.int64())]))

    out = df.select(*selected).mapInArrow(produce, "task int, partition int, records long") \
        .collect()
    per_partition: dict[int, int] = collections.Counter()
    for row in out:
        per_partition[row["partition"]] += row["records"]
    return WriteResult(topic, sum(per_partition.values()), dict(sorted(per_partition.items())),
                       len({row["task"] for row in out}))


def _gcs_address() -> str:
    import ray
    return ray.get_runtime_context().gcs_address


def _connect(ctx: dict):
    """One rayka Cluster handle per Python worker process."""
    from pipeline.spark import ensure_ray
    import rayka
    ensure_ray(ctx["address"], ctx["namespace"])
    if ctx["name"] not in _clusters:
        _clusters[ctx["name"]] = rayka.connect(ctx["name"])
    return _clusters[ctx["name"]]


def _produce_arrow(batches, ctx: dict) -> dict[int, int]:
    cluster = _connect(ctx)
    producer = cluster.producer(acks=ctx["acks"], **ctx["producer"])
    topic = ctx["topic"]
    futures = []
    try:
        for batch in batches:
            keys = batch.column(0).to_pylist()
            values = batch.column(1).to_pylist()
            for lo in range(0, len(values), CHUNK_ROWS):   # send_batch routes keys by murmur2
                futures.append(producer.send_batch(topic, values[lo: lo + CHUNK_ROWS],
                                                   keys[lo: lo + CHUNK_ROWS]))
        counts: dict[int, int] = collections.Counter()
        for f in futures:
            for md in f.result(timeout=producer.delivery_timeout_ms / 1000 + 60):
                counts[md.partition] += 1
        return dict(counts)
    finally:
        producer.close(60)
