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
- `transactional=True`: each Spark partition writes in ONE Kafka transaction of its own
  transactional id (`rayka-write-<write id>-<partition>`) and commits, in the same
  transaction, a "done" offset for itself in the write's group (`rayka-write-<write id>`,
  key `<topic>.rayka-write`/<partition>, its per-partition counts as metadata). A task
  attempt first calls init_transactions, which fences every earlier attempt of that
  partition (a speculative or a zombie one: its open transaction is aborted, its commit
  refused), then reads that done offset as a stable commit (require_stable): found, the
  partition was committed by an earlier attempt and this one writes nothing. So a retried
  or speculative task never leaves a duplicate visible to read_committed readers, and
  read_uncommitted readers may see the aborted attempts' rows. The write id is new per
  call unless given: pass the same `write_id` to make a rerun of the whole write
  exactly-once too.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import time
import uuid

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
    skipped: int = 0                   # transactional: partitions an earlier attempt wrote


def write_topic(df, cluster, topic: str, key_column: str | None = "key",
                value_column: str = "value", acks="all", transactional: bool = False,
                write_id: str | None = None, **producer_config) -> WriteResult:
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
           "topic": topic, "acks": acks, "producer": producer_config,
           "write_id": (write_id or uuid.uuid4().hex[:12]) if transactional else None}

    def produce(batches):
        import pyarrow as pa
        from pyspark import TaskContext
        task = TaskContext.get().partitionId()
        if ctx["write_id"] is None:
            counts, skipped = _produce_arrow(batches, ctx), False
        else:
            counts, skipped = produce_transactional(batches, ctx, task)
        rows = list(counts.items()) or [(-1, 0)]
        yield pa.RecordBatch.from_pydict(
            {"task": [task] * len(rows), "partition": [p for p, _ in rows],
             "records": [n for _, n in rows], "skipped": [skipped] * len(rows)},
            schema=pa.schema([("task", pa.int32()), ("partition", pa.int32()),
                              ("records", pa.int64()), ("skipped", pa.bool_())]))

    out = df.select(*selected).mapInArrow(
        produce, "task int, partition int, records long, skipped boolean").collect()
    per_partition: dict[int, int] = collections.Counter()
    for row in out:
        if row["partition"] >= 0:
            per_partition[row["partition"]] += row["records"]
    return WriteResult(topic, sum(per_partition.values()), dict(sorted(per_partition.items())),
                       len({row["task"] for row in out}),
                       len({row["task"] for row in out if row["skipped"]}))


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


def write_group(write_id: str) -> str:
    return f"rayka-write-{write_id}"


def done_key(topic: str, task: int) -> tuple[str, int]:
    return (f"{topic}.rayka-write", task)


def produce_transactional(batches, ctx: dict, task: int,
                          timeout_s: float = 120.0) -> tuple[dict[int, int], bool]:
    """One Spark partition in one transaction (module rules): ({topic partition: records},
    whether an earlier attempt had committed it and nothing was written)."""
    cluster = _connect(ctx)
    topic, write_id = ctx["topic"], ctx["write_id"]
    group, key = write_group(write_id), done_key(ctx["topic"], task)
    producer = cluster.producer(transactional_id=f"rayka-write-{write_id}-{task}",
                                **ctx["producer"])
    try:
        producer.init_transactions(timeout_s)          # fences every earlier attempt
        done = committed_stable(cluster, group, key, timeout_s)
        if done is not None:
            for _ in batches:                          # Spark hands us the rows anyway
                pass
            return {int(p): n for p, n in json.loads(done or "{}").items()}, True
        producer.begin_transaction()
        futures = []
        for batch in batches:
            keys = batch.column(0).to_pylist()
            values = batch.column(1).to_pylist()
            for lo in range(0, len(values), CHUNK_ROWS):
                futures.append(producer.send_batch(topic, values[lo: lo + CHUNK_ROWS],
                                                   keys[lo: lo + CHUNK_ROWS]))
        counts: dict[int, int] = collections.Counter()
        for f in futures:
            for md in f.result(timeout=producer.delivery_timeout_ms / 1000 + 60):
                counts[md.partition] += 1
        producer.send_offsets_to_transaction(
            {key: (sum(counts.values()) + 1, json.dumps(counts))}, group, timeout_s)
        producer.commit_transaction(timeout_s)
        return dict(counts), False
    finally:
        producer.close(60)


def committed_stable(cluster, group: str, key: tuple[str, int],
                     timeout_s: float = 120.0) -> str | None:
    """The metadata of the group's committed offset for `key`, None when there is none;
    waits out a commit still pending in a transaction (UNSTABLE_OFFSET_COMMIT)."""
    from coordinator import messages as gm
    from rayka.client.group import CoordinatorLink
    from replicas.errors import ErrorCode as E
    from replicas.errors import error_for_code
    link = CoordinatorLink(cluster, group)
    deadline = time.monotonic() + timeout_s
    while True:
        r = link.call(gm.OffsetFetch(0, group, (key,), require_stable=True), deadline)
        found = next((x for x in r.partitions if (x.topic, x.partition) == key), None)
        error = r.error or (found.error if found is not None else E.NONE)
        if error == E.UNSTABLE_OFFSET_COMMIT and time.monotonic() < deadline:
            time.sleep(0.05)       # a transaction still finishing: poll until it settles
            continue
        if error:
            raise error_for_code(error, f"committed offset of {key} in {group}")
        return None if found is None or found.offset < 0 else (found.metadata or "")


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
