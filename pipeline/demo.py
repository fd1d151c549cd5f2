"""The demo job behind `make demo` / `rayka demo`: clickstream → Spark on Ray → page counts.

What it does, on real Ray, a real ZooKeeper and real Spark (RayDP):
1. start a local rayka cluster (3 brokers, 2 controllers, embedded ZooKeeper) and Spark
   with `executors` executors;
2. produce `clicks_total` click events (key: user, value: "page|event time ms|user") into
   `clicks` (12 partitions, RF 3, min ISR 2) with acks=all, counting per page and minute
   in the driver as it goes: the independent reference;
3. run the Spark job: read `clicks` pinned to the leaders' nodes, count per page per
   minute, write the counts to `page-counts` from the executors. While it runs, the task
   of the biggest partition is parked half-way (the read's failpoint), the broker leading
   that partition is killed (Ray restarts it), and the task is released: it must find
   the new leader and finish its exact range;
4. read `page-counts` back and compare with the driver's counts; print a summary table with
   "partitions pinned: 12/12". Any mismatch, or a task that ran away from its leader's
   node, raises DemoFailed (exit 1).
"""

from __future__ import annotations

import collections
import random
import threading
import time

from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from rayka.ops.demo import DemoFailed

CLICKS, COUNTS = "clicks", "page-counts"
PAGES = 40
MINUTES = 10
EPOCH_MS = 1_795_262_400_000          # 2026-11-21 12:00 UTC: event times are fixed data
CHUNK = 20_000


def _clicks(n: int, seed: int):
    """(user key, value, page, minute) for n clicks; pages Zipf-like, users uniform."""
    rng = random.Random(seed)
    weights = [1 / (i + 1) for i in range(PAGES)]
    pages = rng.choices(range(PAGES), weights, k=n)
    for i, page in enumerate(pages):
        ts = EPOCH_MS + rng.randrange(MINUTES * 60_000)
        user = b"user-%05d" % rng.randrange(5_000)
        yield user, b"/page/%02d|%d|%s" % (page, ts, user), f"/page/{page:02d}", ts // 60_000


def produce_clicks(cluster, n: int, seed: int, console) -> tuple[collections.Counter, float]:
    producer = cluster.producer(acks="all")
    expected: collections.Counter = collections.Counter()
    futures = []
    t0 = time.monotonic()
    with tqdm(total=n, unit="click", unit_scale=True, desc="produce clicks acks=all") as bar:
        keys, values = [], []
        for i, (user, value, page, minute) in enumerate(_clicks(n, seed), 1):
            expected[f"{page}|{minute}"] += 1
            keys.append(user)
            values.append(value)
            if i % CHUNK == 0 or i == n:     # send_batch routes each user by murmur2
                futures.append((producer.send_batch(CLICKS, values, keys), len(values)))
                keys, values = [], []
                while len(futures) > 4:
                    f, k = futures.pop(0)
                    f.result(300)
                    bar.update(k)
        for f, k in futures:
            f.result(300)
            bar.update(k)
    producer.close(60)
    return expected, time.monotonic() - t0


def page_counts(df):
    from pyspark.sql import functions as F
    fields = F.split(F.col("value").cast("string"), r"\|")
    per_minute = df.select(fields[0].alias("page"),
                           F.floor(fields[1].cast("long") / 60_000).alias("minute"))
    counts = per_minute.groupBy("page", "minute").count()
    return counts.select(F.concat_ws("|", "page", F.col("minute").cast("string")).alias("key"),
                         F.col("count").cast("string").alias("value"))


def run(clicks_total: int = 300_000, executors: int = 3, seed: int = 7, keep: bool = False,
        console: Console | None = None) -> dict:
    from pipeline import start_spark, stop_spark
    from rayka.ops.demo import local_cluster
    console = console or Console(stderr=True)
    with local_cluster(keep, console) as cluster:
        t = time.monotonic()
        spark = start_spark(cluster, executors=executors)
        console.print(f"Spark on Ray up in {time.monotonic() - t:.1f} s ({executors} executors)")
        try:
            summary = run_on(spark, cluster, clicks_total, seed, executors, console)
        finally:
            stop_spark()
    _print(summary, console)
    if summary["mismatched"] or summary["pinned"] != summary["partitions"]:
        raise DemoFailed(f"{summary['mismatched']} page counts differ from the driver's; "
                         f"pinned {summary['pinned']}/{summary['partitions']}")
    return summary


def run_on(spark, cluster, clicks_total: int, seed: int, executors: int, console) -> dict:
    """The demo's topics on `cluster`, the clicks produced, then the Spark job with the
    leader kill; returns the summary."""
    from pipeline import holding, placements, plan_of, read_topic, release, write_topic
    from controller.store_api import ZkUnavailable
    from rayka.client.admin import wait_for
    admin = cluster.admin()
    admin.create_topic(CLICKS, 12, 3, {"min.insync.replicas": 2})
    admin.create_topic(COUNTS, 6, 3, {"min.insync.replicas": 2})
    expected, produce_s = produce_clicks(cluster, clicks_total, seed, console)

    # the biggest partition's task parks half-way; its leader dies; the task goes on
    sizes = {tp[1]: e for tp, e in cluster.consumer().end_offsets(
        [(CLICKS, p) for p in range(12)]).items()}
    victim_p = max(sizes, key=sizes.get)
    # small fetches so the parked task still has most of its range to read afterwards
    clicks = read_topic(spark, cluster, CLICKS, fetch_max_bytes=64 << 10,
                        hold_at={victim_p: sizes[victim_p] // 2})
    victim = next(r.leader for r in plan_of(clicks).ranges if r.partition == victim_p)
    job: dict = {}

    def spark_job():
        try:
            job["write"] = write_topic(page_counts(clicks), cluster, COUNTS)
        except Exception as e:  # reported by the main thread
            job["error"] = e
    t_job = time.monotonic()
    worker = threading.Thread(target=spark_job, daemon=True)
    worker.start()
    wait_for(lambda: victim_p in holding(clicks) or "error" in job, 300,
             f"the task of {CLICKS}-{victim_p} half-way")
    if "error" not in job:
        console.print(f"killing broker {victim}, leader of {CLICKS}-{victim_p}, "
                      f"while Spark reads it")
        cluster.kill_broker(victim, restart=True)

        def new_leader() -> bool:
            try:
                return admin.describe_topic(CLICKS)[victim_p].leader not in (victim, -1)
            except ZkUnavailable:      # a dropped connection: kazoo reconnects in the session
                return False
        wait_for(new_leader, 120, f"a new leader for {CLICKS}-{victim_p}")
        release(clicks, victim_p)
    worker.join(600)
    if "error" in job:
        raise job["error"]
    job_s = time.monotonic() - t_job
    return _summarize(expected, _read_counts(cluster), placements(clicks), victim, victim_p,
                      clicks_total, produce_s, job_s, job["write"].records, executors)


def _read_counts(cluster) -> dict[str, int]:
    from rayka.client.admin import wait_for
    consumer = cluster.consumer()
    consumer.subscribe([COUNTS])
    ends = consumer.end_offsets(consumer.assignment())
    got: dict[str, int] = {}

    def drained():
        for r in consumer.poll(timeout_ms=200):
            got[r.key.decode()] = got.get(r.key.decode(), 0) + int(r.value)
        return all(consumer.position(tp) >= e for tp, e in ends.items())
    wait_for(drained, 120, f"{COUNTS} read back")
    return got


def _summarize(expected, got, reports, victim, victim_p, total, produce_s, job_s, written,
               executors) -> dict:
    final = {}
    for r in reports:              # the last attempt of each partition's task counts
        final[r["partition"]] = r
    keys = set(expected) | set(got)
    victim_report = final.get(victim_p, {})
    return {
        "clicks": total, "produce_records_per_s": round(total / produce_s),
        "spark_job_s": round(job_s, 1),
        "executors": executors, "page_minutes": len(expected), "rows_written": written,
        "partitions": len(final),
        "pinned": sum(1 for r in final.values()
                      if r["task_node"] is not None and r["task_node"] == r["leader_node_at_plan"]),
        "mismatched": sum(1 for k in keys if expected.get(k) != got.get(k)),
        "killed_broker": victim, "killed_partition": victim_p,
        "task_resolves": victim_report.get("resolves"),
        "new_leader": victim_report.get("leader_at_end"),
    }


def _print(s: dict, console: Console) -> None:
    table = Table(title=f"rayka demo: {CLICKS} → Spark on Ray → {COUNTS}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for row in [
        ("clicks produced (acks=all, 12 partitions, RF 3)", f"{s['clicks']:,}"),
        ("produce throughput", f"{s['produce_records_per_s']:,} records/s"),
        ("Spark job: read → count per page per minute → write (kill included)",
         f"{s['spark_job_s']} s"),
        ("partitions pinned", f"{s['pinned']}/{s['partitions']}"),
        (f"leader of {CLICKS}-{s['killed_partition']} killed mid-read",
         f"broker {s['killed_broker']} → {s['new_leader']} ({s['task_resolves']} re-resolutions)"),
        (f"{COUNTS} rows written", f"{s['rows_written']:,}"),
        ("page-minute counts differing from the driver's", str(s["mismatched"]))]:
        table.add_row(*row)
    console.print(table)
    console.print(f"partitions pinned: {s['pinned']}/{s['partitions']}")
    ok = not s["mismatched"] and s["pinned"] == s["partitions"]
    console.print("[bold green]OK[/]: Spark's counts equal the driver's, every task on its "
                  "leader's node" if ok else "[bold red]FAILED[/]")
