"""Spark on Ray over rayka: read_topic → count, pinned vs unpinned, and write_topic.

Setup: a multi-node Ray test cluster on this machine (`ray.cluster_utils.Cluster`: a head
for the controllers and three worker nodes, each with one broker and one Spark executor of
1 core), a topic of 12 partitions, RF 3, min.insync.replicas 2, 100-byte values.
Measured (one sample per run, `runs` runs):
- write: `write_topic` of a generated DataFrame (spark.range → 100-byte values, no key,
  6 Spark partitions, acks=all); each run appends 1/runs of the records to the topic read
  below, which ends with 10,000,000 records (--quick 200,000). Clock: the write call,
  i.e. until every record is acknowledged.
- read pinned: `read_topic(...).count()` of the whole topic, every task pinned to its
  leader's node (the tasks' own reports count how many ran there);
- read unpinned: the same with `pin=False` (Spark places tasks anywhere; data then
  crosses Ray nodes, i.e. object stores, even though they share this machine).
Clock for reads: from read_topic (which plans: leaders, offsets, executors) to count()
returning; one uncounted warm-up read first (Python workers start, connect to Ray, load the
compiled decoder). Pinned and unpinned runs alternate. Target: pinned read >= 1,000,000 records/s.

    .venv/bin/python bench/pipeline_bench.py [--quick] [--runs 3] [--out bench/out/pipeline.json]
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import arg_parser, emit, figure, machine_facts  # noqa: E402

NAME = "pipeline"
DEFAULT_OUT = Path(__file__).resolve().parent / "out" / f"{NAME}.json"
RECORDS, QUICK_RECORDS = 10_000_000, 200_000
PARTITIONS, WRITE_TASKS = 12, 6
NODE = {"num_cpus": 2, "resources": {"rayka_broker": 1, "spark_slot": 1}}


def say(msg: str) -> None:
    print(f"[pipeline] {msg}", file=sys.stderr, flush=True)


def generated(spark, n: int):
    from pyspark.sql import functions as F
    return spark.range(0, n, numPartitions=WRITE_TASKS).select(
        F.concat(F.lpad(F.col("id").cast("string"), 10, "0"), F.lit("." * 90))
        .cast("binary").alias("value"))


def write_once(spark, cluster, topic: str, n: int) -> float:
    from pipeline import write_topic
    df = generated(spark, n)
    t0 = time.monotonic()
    result = write_topic(df, cluster, topic, key_column=None)
    seconds = time.monotonic() - t0
    if result.records != n:
        raise RuntimeError(f"write_topic wrote {result.records} of {n}")
    return n / seconds


def read_once(spark, cluster, topic: str, n: int, pin: bool) -> tuple[float, int]:
    from pipeline import placements, read_topic
    t0 = time.monotonic()
    df = read_topic(spark, cluster, topic, pin=pin)
    counted = df.count()
    seconds = time.monotonic() - t0
    if counted != n:
        raise RuntimeError(f"read_topic counted {counted} of {n}")
    local = sum(1 for r in placements(df) if r["task_node"] == r["leader_node_at_plan"])
    return n / seconds, local


def run(quick: bool = False, runs: int = 3) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    import rayka
    from pipeline import start_spark, stop_spark
    n = QUICK_RECORDS if quick else RECORDS
    rc = Cluster(initialize_head=True,
                 head_node_args={"num_cpus": 1, "resources": {"rayka_control": 100}})
    cluster = spark = None
    write, pinned, unpinned, local_pinned, local_unpinned = [], [], [], [], []
    try:
        for _ in range(3):
            rc.add_node(**NODE)
        rc.wait_for_nodes()
        ray.init(address=rc.address, logging_level="WARNING", log_to_driver=False)
        cluster = rayka.start_local(name=f"bench-{uuid.uuid4().hex[:6]}", brokers=3,
                                    controllers=2, data_dir=tempfile.mkdtemp(prefix="rayka-pb-"),
                                    broker_resources={"rayka_broker": 1},
                                    control_resources={"rayka_control": 1})
        spark = start_spark(cluster, executors=3, executor_resource="spark_slot",
                            executor_memory="1g")
        cluster.admin().create_topic("bench", PARTITIONS, 3, {"min.insync.replicas": 2})
        for i in range(runs):
            part = n // runs + (1 if i < n % runs else 0)
            write.append(write_once(spark, cluster, "bench", part))
            say(f"write run {i}: {part:,} records, {write[-1]:,.0f} records/s")
        # warm-up, not counted: every executor starts its Python workers, connects them to
        # Ray and loads the compiled decoder, which the first read would otherwise pay
        read_once(spark, cluster, "bench", n, True)
        for i in range(runs):
            for pin, rates, local in ((True, pinned, local_pinned),
                                      (False, unpinned, local_unpinned)):
                rate, on_node = read_once(spark, cluster, "bench", n, pin)
                rates.append(rate)
                local.append(on_node)
                say(f"read run {i} pin={pin}: {rate:,.0f} records/s, "
                    f"{on_node}/{PARTITIONS} tasks on the leader's node")
    finally:
        if spark is not None:
            stop_spark()
        if cluster is not None:
            cluster.shutdown()
        ray.shutdown()
        rc.shutdown()
    params = {"records": n, "partitions": PARTITIONS, "value_bytes": 100}
    figures = [
        figure("pipeline.read_count.pinned.records_per_s", "records/s", pinned,
               target=1_000_000, **params),
        figure("pipeline.read_count.unpinned.records_per_s", "records/s", unpinned, **params),
        figure("pipeline.read_count.pinned.tasks_on_leader_node", "tasks", local_pinned,
               **params),
        figure("pipeline.read_count.unpinned.tasks_on_leader_node", "tasks", local_unpinned,
               **params),
        figure("pipeline.write_topic.records_per_s", "records/s", write,
               write_tasks=WRITE_TASKS, records_per_run=n // runs, partitions=PARTITIONS,
               value_bytes=100),
    ]
    setup = {"ray_nodes": "head + 3 workers (ray.cluster_utils.Cluster, one machine)",
             "brokers": 3, "executors": 3, "executor_cores": 1, "replication_factor": 3,
             "min_insync_replicas": 2, "records": n, "quick": quick, "runs": runs,
             "machine": machine_facts()}
    return {"bench": NAME, "setup": setup, "figures": figures, "extra": {}}


def main(argv=None) -> dict:
    args = arg_parser(__doc__, DEFAULT_OUT, f"{QUICK_RECORDS:,} records").parse_args(argv)
    result = run(quick=args.quick, runs=args.runs)
    return emit(result, args.out)


if __name__ == "__main__":
    main()
