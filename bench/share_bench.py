"""Share groups (KIP-932) on Ray: records/s of Ray workers as one share group, and a worker
killed mid-run with every record still accepted exactly once.

Setup: one local rayka cluster (3 brokers, 2 controllers, embedded ZooKeeper); per run a
fresh 2-partition topic (RF 3, min.insync.replicas 2) prefilled by librdkafka with RECORDS
records of 100 B (100,000; --quick 10,000) and a fresh share group reading it from the
start (share.auto.offset.reset earliest, share.record.lock.duration.ms 15000, Kafka's
lowest by default). Workers are `cluster.share_workers` (Ray actors, explicit
acknowledgement, max_records 500, one commit per poll).

Measured per run:
1. throughput: 8 workers accept every record: records/s from the workers' start until the
   last record is accepted (the workers' logs, read every 0.25 s). Every record must be
   accepted exactly once (settled by the broker once), else the run fails.
2. killed worker: 4 workers; the worker that takes offset RECORDS/6 of partition 0 on its
   first delivery hangs there (its log is then final: it is taken) and is killed with
   ray.kill. Every record must still be accepted exactly once by the end (the dead worker's
   log plus the others'); the records it held come back once their locks expire, with
   delivery count 2. Reported: seconds to the last acceptance (the lock duration is in
   it), records delivered again.

    .venv/bin/python bench/share_bench.py [--quick] [--runs 3] [--out bench/out/share.json]
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (arg_parser, emit, figure, local_cluster, machine_facts,  # noqa: E402
                          replicated_topic, say)

NAME = "share"
DEFAULT_OUT = Path(__file__).resolve().parent / "out" / f"{NAME}.json"
RECORDS, QUICK_RECORDS = 100_000, 10_000
PARTITIONS, THROUGHPUT_WORKERS, KILL_WORKERS = 2, 8, 4
LOCK_MS = 15_000
MAX_RECORDS = 500
POLL_S = 0.25
TIMEOUT_S = 600.0
VALUE = b"v" * 100


def accept(_record) -> str:
    return "accept"


class HangOn:
    """The process function of the kill run: the first delivery of (0, offset) never ends;
    the worker holding it names itself to the latch actor."""

    def __init__(self, latch_name: str, offset: int):
        self.latch_name, self.offset = latch_name, offset

    def __call__(self, record) -> str:
        if (record.partition, record.offset, record.delivery_count) == (0, self.offset, 1):
            import ray
            latch = ray.get_actor(self.latch_name)
            ray.get(latch.hold.remote(ray.get_runtime_context().get_actor_id()))
            time.sleep(3600)
        return "accept"


def _latch_class():
    import ray

    @ray.remote(num_cpus=0)
    class Latch:
        def __init__(self):
            self.holder = None

        def hold(self, actor_id: str) -> None:
            self.holder = actor_id

        def held(self):
            return self.holder
    return Latch


def fill(cluster, n: int) -> str:
    from confluent_kafka import Producer
    topic = replicated_topic(cluster, "share-", PARTITIONS, 120)
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "linger.ms": 5,
                  "enable.idempotence": True})
    for i in range(n):
        p.produce(topic, VALUE, partition=i % PARTITIONS)
        if i % 1000 == 0:
            p.poll(0)
    if p.flush(120) != 0:
        raise RuntimeError("records left unsent")
    return topic


def new_group(cluster) -> str:
    group = f"sb-{uuid.uuid4().hex[:8]}"
    cluster.admin().set_group_config(group, {"share.auto.offset.reset": "earliest",
                                             "share.record.lock.duration.ms": LOCK_MS})
    return group


def accepted_counts(entries) -> dict:
    """{(partition, offset): [delivery counts of its settled acceptances]}."""
    out: dict = {}
    for _t, p, o, n, outcome, settled in entries:
        if outcome == "accept" and settled:
            out.setdefault((p, o), []).append(n)
    return out


def check_once(counts: dict, n: int) -> None:
    per_partition = n // PARTITIONS
    want = {(p, o) for p in range(PARTITIONS) for o in range(per_partition)}
    missing = want - set(counts)
    twice = {k: v for k, v in counts.items() if len(v) > 1}
    if missing or twice or set(counts) != want:
        raise AssertionError(f"{len(missing)} records never accepted, {len(twice)} accepted "
                             f"twice (e.g. {sorted(twice.items())[:3]})")


def wait_all(workers, n: int, extra=()) -> tuple[float, list]:
    """Poll the workers' logs until every record is accepted; (time seen, entries)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        entries = list(extra) + workers.log()
        if len(accepted_counts(entries)) >= n:
            return time.monotonic(), entries
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(accepted_counts(entries))} of {n} records accepted "
                               f"after {TIMEOUT_S} s")
        time.sleep(POLL_S)                     # the logs' poll interval


def throughput_run(cluster, n: int) -> float:
    topic = fill(cluster, n)
    group = new_group(cluster)
    t0 = time.monotonic()
    workers = cluster.share_workers(group, [topic], accept, workers=THROUGHPUT_WORKERS,
                                    max_records=MAX_RECORDS)
    try:
        t1, entries = wait_all(workers, n)
    finally:
        workers.stop()
    check_once(accepted_counts(entries), n)
    return n / (t1 - t0)


def kill_run(cluster, n: int) -> tuple[float, int]:
    import ray
    topic = fill(cluster, n)
    group = new_group(cluster)
    latch_name = f"share-bench-latch-{uuid.uuid4().hex[:6]}"
    latch = _latch_class().options(name=latch_name).remote()
    t0 = time.monotonic()
    workers = cluster.share_workers(group, [topic], HangOn(latch_name, n // PARTITIONS // 3),
                                    workers=KILL_WORKERS, max_records=MAX_RECORDS)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while ray.get(latch.held.remote()) is None:
            if time.monotonic() > deadline:
                raise TimeoutError("no worker took the record it hangs on")
            time.sleep(POLL_S)                 # the latch's poll interval
        holder = ray.get(latch.held.remote())
        victim = next(i for i, a in enumerate(workers.actors) if a._actor_id.hex() == holder)
        final = ray.get(workers.actors[victim].log.remote())      # it hangs: its log is final
        workers.kill(victim)
        t1, entries = wait_all(workers, n, final)
    finally:
        workers.stop()
        ray.kill(latch)
    counts = accepted_counts(entries)
    check_once(counts, n)
    again = sum(1 for v in counts.values() if v[0] > 1)
    if counts[(0, n // PARTITIONS // 3)] != [2]:
        raise AssertionError("the record the dead worker held was not delivered again once")
    return t1 - t0, again


def run(quick: bool = False, runs: int = 3) -> dict:
    n = QUICK_RECORDS if quick else RECORDS
    rates, kill_s, again = [], [], []
    with local_cluster("sb") as (cluster, _):
        for i in range(runs):
            rates.append(throughput_run(cluster, n))
            say(f"run {i}: {THROUGHPUT_WORKERS} share workers accepted {n:,} records at "
                f"{rates[-1]:,.0f}/s, each exactly once")
            seconds, redelivered = kill_run(cluster, n)
            kill_s.append(seconds)
            again.append(redelivered)
            say(f"run {i}: {KILL_WORKERS} workers, one killed holding records: all {n:,} "
                f"accepted exactly once in {seconds:.1f} s, {redelivered} delivered again")
    params = {"partitions": PARTITIONS, "records": n, "value_bytes": len(VALUE),
              "max_records": MAX_RECORDS, "lock_ms": LOCK_MS}
    figures = [
        figure("share.ray_workers.records_per_s", "records/s", rates,
               workers=THROUGHPUT_WORKERS, **params),
        figure("share.worker_killed.seconds", "s", kill_s, better="lower",
               workers=KILL_WORKERS, **params),
        figure("share.worker_killed.delivered_again", "records", again, better="lower",
               workers=KILL_WORKERS, **params)]
    return {"bench": NAME, "machine": machine_facts(),
            "setup": {"brokers": 3, "controllers": 2, "runs": runs, "quick": quick, **params},
            "figures": figures,
            "extra": {"accepted_exactly_once": True}}


def main(argv=None) -> dict:
    args = arg_parser(__doc__, DEFAULT_OUT, f"{QUICK_RECORDS:,} records").parse_args(argv)
    return emit(run(quick=args.quick, runs=args.runs), args.out)


if __name__ == "__main__":
    main()
