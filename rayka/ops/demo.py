"""`rayka demo`: the end-to-end job on the embedded default, with a leader killed mid-way.

What it does, on real Ray and a real ZooKeeper:
1. start a local cluster (3 broker actors, 2 controller actors, embedded ZooKeeper);
2. create `clicks` (RF 3, min.insync.replicas 2);
3. produce `records_total` records with acks=all through the bulk API, a progress bar
   on the way; every value carries a unique sequence number;
4. half-way, kill the broker actor leading partition 0 (Ray restarts it) and time the
   failover: from the kill to the first acks=all write acknowledged on partition 0;
5. keep producing, then consume everything back and compare by sequence number:
   acknowledged vs read, lost, duplicated; wait for the restarted broker to rejoin ISRs;
6. print a summary and shut the cluster down. A loss or duplicate makes it fail (exit 1).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import uuid

from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from replicas.errors import KafkaError

TOPIC = "clicks"
CHUNK = 5_000


class DemoFailed(KafkaError):
    """The demo's own check found a lost or duplicated record."""


DEMO_ENTRY_POINTS = "rayka.demos"


def main_job():
    """The main demo job (`rayka demo`, `make demo`): the entry point `main` of the group
    `rayka.demos`, which the Spark pipeline registers (pyproject.toml). rayka never imports
    pipeline/ (it sits above rayka); the job is found the way pytest finds its plugins."""
    from importlib.metadata import entry_points
    found = entry_points(group=DEMO_ENTRY_POINTS, name="main")
    if not found:
        raise DemoFailed(f"no demo job installed (entry point group {DEMO_ENTRY_POINTS!r}, "
                         "name 'main'); run `make install`")
    return next(iter(found)).load()


def _values(start: int, n: int, size: int) -> list[bytes]:
    return [(b"click-%012d|" % i).ljust(size, b".") for i in range(start, start + n)]


def _seq(value: bytes) -> int:
    return int(value[6:18])


@contextlib.contextmanager
def local_cluster(keep: bool = False, console: Console | None = None, dashboard: bool = True):
    """A demo's cluster: Ray (a fresh local instance with its dashboard, unless the caller has
    Ray already), a fresh rayka cluster (3 brokers, 2 controllers, embedded ZooKeeper) in a
    temp data dir; all stopped and removed on the way out (the data dir kept with `keep`)."""
    import ray

    import rayka
    from rayka.cluster import dashboard_url, ensure_ray
    own_ray = ensure_ray("local", include_dashboard=dashboard, logging_level="ERROR",
                         log_to_driver=False)
    if own_ray and console is not None and dashboard_url():
        console.print(f"Ray dashboard: {dashboard_url()}")
    data_dir = tempfile.mkdtemp(prefix="rayka-demo-")
    cluster = None
    try:
        t_start = time.monotonic()
        cluster = rayka.start_local(name=f"demo-{uuid.uuid4().hex[:6]}", brokers=3,
                                    controllers=2, data_dir=data_dir,
                                    replica_lag_time_max_ms=5000)
        if console is not None:
            console.print(f"cluster up in {time.monotonic() - t_start:.1f} s: brokers "
                          f"{[b.id for b in cluster.brokers()]}, controller "
                          f"{cluster.controller().id}, ZooKeeper {cluster.zookeeper}")
        yield cluster
    finally:
        if cluster is not None:
            cluster.shutdown()
        if own_ray:
            ray.shutdown()
        if not keep:
            shutil.rmtree(data_dir, ignore_errors=True)


def run(records_total: int = 300_000, partitions: int = 6, value_size: int = 100,
        keep: bool = False, console: Console | None = None) -> dict:
    from rayka.client.admin import wait_for
    console = console or Console(stderr=True)
    with local_cluster(keep, console) as cluster:
        admin = cluster.admin()
        admin.create_topic(TOPIC, partitions, 3, {"min.insync.replicas": 2})
        summary = _produce_kill_consume(cluster, admin, wait_for, records_total, value_size, console)
    _print_summary(summary, console)
    if summary["lost"] or summary["duplicated"]:
        raise DemoFailed(f"{summary['lost']} acknowledged records lost, "
                         f"{summary['duplicated']} duplicated")
    return summary


def _produce_kill_consume(cluster, admin, wait_for, total, size, console) -> dict:
    """Produce with a leader kill half-way; return what was acknowledged and read."""
    producer = cluster.producer(acks="all", linger_ms=5)
    acked: set[int] = set()
    pending: list = []                # (future, first sequence number, count), in send order
    killed = victim = None
    probe_acked: list[float] = []
    t0 = time.monotonic()
    with tqdm(total=total + 1, unit="rec", unit_scale=True, desc="produce acks=all") as bar:
        sent = 0
        while sent < total or pending:
            if sent < total:
                n = min(CHUNK, total - sent)
                pending.append((producer.send_batch(TOPIC, _values(sent, n, size)), sent, n))
                sent += n
            if killed is None and sent >= total // 2:
                victim = admin.describe_topic(TOPIC)[0].leader
                console.print(f"killing broker {victim}, leader of {TOPIC}-0")
                killed = time.monotonic()
                cluster.kill_broker(victim, restart=True)
                # the probe's acknowledgement is the first acks=all write after the kill
                probe = producer.send(TOPIC, _values(total, 1, size)[0], partition=0)
                probe.add_done_callback(lambda _f: probe_acked.append(time.monotonic()))
                pending.append((probe, total, 1))
            while pending and (len(pending) > 6 or sent >= total):
                future, first, n = pending.pop(0)
                future.result(timeout=300)
                acked.update(range(first, first + n))
                bar.update(n)
    producer.close(60)
    failover_s = probe_acked[0] - killed
    produce_s = time.monotonic() - t0
    t1 = time.monotonic()
    consumer = cluster.consumer()
    consumer.subscribe([TOPIC])
    read: list[int] = []
    wait_for(lambda: read.extend(_seq(r.value) for r in consumer.poll(timeout_ms=500))
             or len(read) >= len(acked), 300, "every acknowledged record read back")
    consume_s = time.monotonic() - t1
    wait_for(lambda: all(victim in p.isr for p in admin.describe_topic(TOPIC)), 120,
             f"broker {victim} back in every ISR")
    rejoin_s = time.monotonic() - killed
    unique = set(read)
    return {"records_acknowledged": len(acked), "records_read": len(read),
            "lost": len(acked - unique), "duplicated": len(read) - len(unique),
            "produce_records_per_s": round(len(acked) / produce_s),
            "consume_records_per_s": round(len(read) / consume_s),
            "killed_broker": victim, "failover_s": round(failover_s, 3),
            "isr_rejoin_s": round(rejoin_s, 1)}


def _print_summary(s: dict, console: Console) -> None:
    table = Table(title=f"rayka demo: {TOPIC}, RF 3, min ISR 2, acks=all, leader killed mid-way")
    table.add_column("measure")
    table.add_column("value", justify="right")
    rows = [("records acknowledged", f"{s['records_acknowledged']:,}"),
            ("records read back", f"{s['records_read']:,}"),
            ("lost", str(s["lost"])), ("duplicated", str(s["duplicated"])),
            ("produce throughput", f"{s['produce_records_per_s']:,} records/s"),
            ("consume throughput", f"{s['consume_records_per_s']:,} records/s"),
            (f"broker {s['killed_broker']} killed → first acked write", f"{s['failover_s']} s"),
            (f"broker {s['killed_broker']} back in every ISR after", f"{s['isr_rejoin_s']} s")]
    for row in rows:
        table.add_row(*row)
    console.print(table)
    ok = not s["lost"] and not s["duplicated"]
    console.print("[bold green]OK[/]: every acknowledged record read back exactly once" if ok
                  else "[bold red]FAILED[/]: acknowledged records lost or duplicated")
