"""`make console-shots`: a screenshot of each console page, from a real cluster with traffic.

It starts a private Ray and a 3-broker rayka cluster with its console
(start_local(console=True)), creates topics, produces for a while, runs a consumer group
that keeps up and one that stopped (lag), leaves a transaction open, reads a topic with
Spark on Ray (the Pipelines page), kills and restarts a broker (the Controller page), runs
a short `rayka chaos` into a fresh directory (the Chaos pages), then opens each
page in headless Chromium and saves docs/console/<page>.png. Everything it started is
stopped at the end (by handle or pid, never by name).

    .venv/bin/python docs/console_shots.py --out docs/console [--no-spark] [--no-chaos]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

PAGES = [("cluster", "/cluster"), ("topics", "/topics"), ("topic", "/topics/orders"),
         ("groups", "/groups"), ("group", "/groups/billing"), ("controller", "/controller"),
         ("transactions", "/transactions"), ("pipelines", "/pipelines"), ("chaos", "/chaos")]


def say(text: str) -> None:
    print(f"console-shots: {text}", flush=True)


def chaos_run(chaos_dir: str) -> None:
    """A short chaos run (two fault kinds) when the directory holds none."""
    if os.path.isdir(chaos_dir) and any(n.startswith("seed-") for n in os.listdir(chaos_dir)):
        return
    out = os.path.join(chaos_dir, f"seed-41-{int(time.time())}")
    say(f"a 20 s chaos run into {out}")
    subprocess.run([sys.executable, "-m", "rayka.cli", "chaos", "--duration", "20", "--seed",
                    "41", "--faults", "kill-broker,pause-leader", "--out", out],
                   check=True, cwd=ROOT, timeout=900)


def traffic(cluster, stop: threading.Event) -> None:
    producer = cluster.producer()
    i = 0
    while not stop.is_set():
        for _ in range(200):
            producer.send("orders", value=b"order-%d" % i, key=b"c%d" % (i % 97))
            producer.send("clicks", value=b"click-%d" % i, key=b"p%d" % (i % 31))
            i += 1
        producer.flush()
        stop.wait(0.25)           # ~800 records/s per topic: a rate to plot, not a load test
    producer.close()


def keep_reading(cluster, group: str, topic: str, stop: threading.Event) -> None:
    consumer = cluster.consumer(group_id=group)
    consumer.subscribe([topic])
    while not stop.is_set():
        consumer.poll(0.5)
        consumer.commit()
    consumer.close()


def read_once(cluster, group: str, topic: str, records: int) -> None:
    consumer = cluster.consumer(group_id=group)
    consumer.subscribe([topic])
    got, deadline = 0, time.monotonic() + 60
    while got < records and time.monotonic() < deadline:
        got += len(consumer.poll(1.0) or [])
    consumer.commit()
    consumer.close()


def open_transaction(cluster):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers(),
                  "transactional.id": "payments-writer", "enable.idempotence": True,
                  "transaction.timeout.ms": 600_000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce("payments", value=b"payment-%d" % i)
    p.flush(30)
    return p                          # left open: the Transactions page shows it ongoing


def spark_read(cluster) -> None:
    import pipeline
    spark = pipeline.start_spark(cluster, executors=2)
    try:
        df = pipeline.read_topic(spark, cluster, "orders")
        say(f"Spark read {df.count()} records of orders")
    finally:
        pipeline.stop_spark()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "console"))
    ap.add_argument("--chaos-dir", default=None,
                    help="runs to show (default: a fresh directory with one short run)")
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--no-chaos", action="store_true")
    ap.add_argument("--traffic-s", type=float, default=40.0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    args.chaos_dir = args.chaos_dir or tempfile.mkdtemp(prefix="rayka-shots-chaos-")
    if not args.no_chaos:
        chaos_run(args.chaos_dir)
    runs = sorted(n for n in os.listdir(args.chaos_dir) if n.startswith("seed-"))
    pages = PAGES + ([("chaos-run", f"/chaos/{runs[-1]}")] if runs else [])

    import ray

    import rayka
    from tests.console_browser import Browser
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    cluster = rayka.start_local(name="shots", brokers=3, data_dir=tempfile.mkdtemp(),
                                replica_lag_time_max_ms=3000, console=True,
                                console_args=("--allow-writes", "--interval-s", "1",
                                              "--chaos-dir", args.chaos_dir))
    say(f"console at {cluster.console_url}")
    stop = threading.Event()
    threads = []
    txn = None
    try:
        admin = cluster.admin()
        admin.create_topic("orders", 6, 3, {"retention.ms": 86_400_000})
        admin.create_topic("clicks", 3, 3)
        admin.create_topic("payments", 3, 3)
        threads = [threading.Thread(target=traffic, args=(cluster, stop), daemon=True),
                   threading.Thread(target=keep_reading, args=(cluster, "analytics", "clicks",
                                                               stop), daemon=True)]
        for t in threads:
            t.start()
        time.sleep(5)                  # let the plots gather a few samples
        read_once(cluster, "billing", "orders", 2000)   # then stops: its lag grows
        txn = open_transaction(cluster)
        if not args.no_spark:
            spark_read(cluster)
        victim = admin.describe_topic("orders")[0].leader
        say(f"killing broker {victim} (Ray restarts it)")
        cluster.kill_broker(victim)
        time.sleep(args.traffic_s)     # the plots' window: traffic, the kill, the recovery
        browser = Browser(cluster.console_url, width=1400, height=1100)
        try:
            for name, path in pages:
                browser.open(path)
                browser.wait(lambda b: b.text("h1"), 30, f"{path} rendered")
                plots = browser.driver.find_elements("css selector", ".plot")
                for i in range(len(plots)):
                    browser.wait(lambda b, i=i: b.driver.find_elements(
                        "css selector", ".plot")[i].get_attribute("data-state") == "ok",
                        30, f"{path}'s plot {i}")
                target = os.path.join(args.out, f"{name}.png")
                browser.screenshot(target)
                say(f"{target} ({browser.page_bytes():,} bytes loaded)")
        finally:
            browser.close()
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        if txn is not None:
            from confluent_kafka import KafkaException
            try:
                txn.abort_transaction(30)
            except KafkaException as exc:     # the coordinator aborted it past its timeout
                say(f"the open transaction ended already: {exc}")
        cluster.shutdown()
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
