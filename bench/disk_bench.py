"""Flush policies: what each costs an acks=all producer, and what a power loss takes from it.

Policies (Kafka's topic configs, and rayka's broker setting log.flush.before.ack):
- `replication`: Kafka's defaults (flush.messages and flush.ms never): a log is fsynced when
  a segment rolls and at a clean shutdown; durability comes from replication alone.
- `flush.ms=1000`: every log fsynced at least once a second (the broker's tick).
- `flush.messages=1`: every append fsynced before the append returns (Kafka's strictest).
- `flush-before-ack`: log.flush.before.ack=true: no acks=all produce is answered before
  every ISR replica fsynced it (group commit: a leader fsyncs at each follower fetch).

Setup: a local rayka cluster (3 brokers, 2 controllers, embedded ZooKeeper), a fresh topic
of 6 partitions, RF 3, min.insync.replicas 2, 100-byte values, librdkafka (confluent-kafka)
idempotent acks=all producers in this process.

Measured, per policy, one sample per run:
1. cost, on this machine's disk (the data dir; no fault layer): produce throughput (N
   records, linger.ms 5; bench/wire_bench.py's produce_once) and the acknowledgement
   latency at 1,000 records/s, linger.ms 0 (p50, p99; wire_bench.latency_once).
2. loss: every broker keeps its log directory on its own faultfs mount (rayka/chaos/
   faultfs.py: data durable only once fsynced, metadata at once; no background writeback,
   so an unsynced write stays unsynced until the power goes: harsher than a kernel, which
   writes dirty pages back within vm.dirty_expire_centisecs, 30 s by default). A producer
   writes numbered records at 2,000/s; after 4 s the power goes: `one` = the leader of
   partition 0's broker, `all` = every broker at the same instant (every mount frozen,
   then every broker process killed, every mount reverted, thawed). The brokers are started
   again on what their disks kept; once they registered anew and every partition is led
   with a full ISR (or 60 s)
   the producer's pending records get 60 s to be answered, then every partition is read
   from its log start to its end. lost = acknowledged records not read back; also the
   records acknowledged before the loss, and whether the producer failed (an idempotent
   producer whose acknowledged records vanished gets OUT_OF_ORDER_SEQUENCE: librdkafka
   raises a fatal error).
   The loss needs root and FUSE; without them part 2 reports why and is skipped.
3. a full disk (once per run, Kafka's default policy): broker 1 keeps its log directory on
   a 48 MiB tmpfs; an idempotent acks=all producer (linger.ms 5) sends 150,000 records of
   1 KB to a topic of 6 partitions, RF 3, min.insync.replicas 2, 1 MiB segments. Figures:
   records acknowledged, refused (a delivery error) and lost (acknowledged, not read back),
   the seconds until the last acknowledgement, and `rayka status`' offline directories.
   Needs root (the tmpfs mount).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path

if __package__ in (None, ""):
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import arg_parser, emit, figure, machine_facts, say

POLICIES = {
    "replication": ({}, {}),
    "flush.ms=1000": ({}, {"flush.ms": "1000"}),
    "flush.messages=1": ({}, {"flush.messages": "1"}),
    "flush-before-ack": ({"log.flush.before.ack": "true"}, {}),
}
PARTITIONS, VALUE = 6, 100
RATE, BEFORE_S = 2_000, 4.0
TIMEOUT_S = 60.0


def new_topic(cluster, topic_config: dict) -> str:
    name = f"d{uuid.uuid4().hex[:8]}"
    cluster.admin().create_topic(name, PARTITIONS, 3, {"min.insync.replicas": 2,
                                                       **topic_config}, timeout_s=TIMEOUT_S)
    return name


# -- 1. cost ----------------------------------------------------------------------------------
def cost_once(cluster, topic_config: dict, n: int, latency_s: float) -> dict:
    from bench import wire_bench
    import numpy as np
    bootstrap = cluster.bootstrap_servers()
    elapsed = wire_bench.produce_once(bootstrap, new_topic(cluster, topic_config), n)
    lat = wire_bench.latency_once(bootstrap, new_topic(cluster, topic_config), 1_000,
                                  latency_s)
    acks = lat["ack_ms"]
    return {"throughput": n / elapsed, "ack_p50_ms": float(np.percentile(acks, 50)),
            "ack_p99_ms": float(np.percentile(acks, 99))}


# -- 2. loss ----------------------------------------------------------------------------------
class Writer:
    """A paced idempotent acks=all producer of numbered records; what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Producer
        self.topic, self.acked, self.errors = topic, set(), []
        self.fatal = None
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5,
                                  "message.timeout.ms": 300_000,
                                  "error_cb": self._on_error})
        self.stop = threading.Event()
        self.sent = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_error(self, err) -> None:
        if err.fatal():
            self.fatal = str(err)

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.add(int(msg.value()[:12]))
        else:
            self.errors.append(str(err))

    def _run(self) -> None:
        try:
            self._pace()
        except Exception as exc:            # librdkafka raises its fatal error from poll()
            self.fatal = self.fatal or str(exc)

    def flush(self, timeout_s: float) -> int:
        """Records still unanswered after `timeout_s` (all of them on a fatal error)."""
        try:
            return self.producer.flush(timeout_s)
        except Exception as exc:
            self.fatal = self.fatal or str(exc)
            return len(self.producer)

    def _pace(self) -> None:
        t0 = time.monotonic()
        while not self.stop.is_set() and self.fatal is None:
            due = int((time.monotonic() - t0) * RATE)
            while self.sent < due:
                value = b"%012d" % self.sent
                try:
                    self.producer.produce(self.topic, value.ljust(VALUE, b"."),
                                          on_delivery=self._delivered)
                except BufferError:
                    break
                except Exception as exc:    # a fatal idempotence error refuses every send
                    self.fatal = self.fatal or str(exc)
                    return
                self.sent += 1
            self.producer.poll(0.005)


def read_all(bootstrap: str, topic: str) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    ends = {}
    for p in range(PARTITIONS):
        low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_S)
        ends[p] = high
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS) if ends[p] > 0])
    left = {p for p in ends if ends[p] > 0}
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    while left and time.monotonic() < deadline:
        for m in c.consume(10_000, 0.5):
            if m.error() is not None:
                if m.error().code() == -191:            # partition EOF
                    left.discard(m.partition())
                continue
            got.append(int(m.value()[:12]))
    c.close()
    if left:
        raise TimeoutError(f"partitions {sorted(left)} not read to their end")
    return got


def led_with_full_isrs(cluster, topic: str) -> bool:
    try:
        return not cluster.under_replicated() and all(
            p.leader >= 0 for p in cluster.admin().describe_topic(topic))
    except Exception:                       # a broker restarting: ask again
        return False


def power_loss_once(cluster, mounts: dict, topic_config: dict, who: str) -> dict:
    from rayka.client.admin import wait_for
    from rayka.errors import RequestTimedOut
    topic = new_topic(cluster, topic_config)
    bootstrap = cluster.bootstrap_servers()
    w = Writer(bootstrap, topic)
    w.thread.start()
    time.sleep(BEFORE_S)                    # the workload's length before the power goes
    leader = cluster.admin().describe_topic(topic)[0].leader
    victims = sorted(mounts) if who == "all" else [leader]
    for b in victims:                       # the instant of the loss: no disk moves after it
        mounts[b].freeze()
    acked_before = len(w.acked)
    epochs = {b: r.epoch for b, r in cluster.store.get_brokers().items() if b in victims}
    for b in victims:
        cluster.kill_broker(b, restart=False)
    reverted = {b: mounts[b].power_loss() for b in victims}
    wait_for(lambda: all(cluster.broker_actor(b) is None for b in victims), TIMEOUT_S,
             "the brokers gone")
    for b in victims:
        mounts[b].thaw()
    cluster.ensure_actors()                 # started again on what their disks kept
    t0 = time.monotonic()
    cluster.wait_registered_anew(epochs, TIMEOUT_S)
    try:
        wait_for(lambda: led_with_full_isrs(cluster, topic), TIMEOUT_S,
                 "every partition led with a full ISR")
        healthy = True
    except RequestTimedOut:                 # reported: a partition with no replica left
        healthy = False
    recovery_s = time.monotonic() - t0
    w.stop.set()
    w.thread.join(30)
    left = w.flush(TIMEOUT_S)
    got = read_all(bootstrap, topic)
    acked = w.acked
    return {"who": who, "victims": victims, "sent": w.sent, "acked": len(acked),
            "acked_before_loss": acked_before, "lost": len(acked - set(got)),
            "duplicated": len(got) - len(set(got)), "unanswered": left,
            "producer_fatal": w.fatal, "failed_deliveries": len(w.errors),
            "healthy_again": healthy, "recovery_s": recovery_s,
            "dropped_bytes": sum(r["bytes_dropped"] for r in reverted.values())}


FULL_RECORDS, FULL_VALUE, FULL_DISK = 150_000, 1_000, "48m"


def full_disk_once(quick: bool) -> dict:
    import subprocess
    from bench.common import local_cluster
    from confluent_kafka import Producer
    from rayka.cli import status_of
    n = 30_000 if quick else FULL_RECORDS
    small = Path(tempfile.mkdtemp(prefix="rayka-full-disk-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FULL_DISK}", "tmpfs", str(small)],
                   check=True, capture_output=True)
    try:
        with local_cluster("full", broker_configs={1: {"log.dirs": str(small)}}) as (c, _):
            topic = f"full{uuid.uuid4().hex[:6]}"
            c.admin().create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": 2,
                                                          "segment.bytes": 1 << 20},
                                   timeout_s=TIMEOUT_S)
            bootstrap = c.bootstrap_servers()
            acked, refused = set(), []
            p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                          "enable.idempotence": True, "message.timeout.ms": 300_000})

            def report(err, msg):
                if err is None:
                    acked.add(int(msg.value()[:12]))
                else:
                    refused.append(str(err))
            t0 = time.monotonic()
            for i in range(n):
                value = (b"%012d" % i).ljust(FULL_VALUE, b".")
                while True:
                    try:
                        p.produce(topic, value, on_delivery=report)
                        break
                    except BufferError:
                        p.poll(0.05)
                p.poll(0)
            left = p.flush(300)
            elapsed = time.monotonic() - t0
            got = read_all(bootstrap, topic)
            offline = status_of(c)["offline_log_dirs"]
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False, capture_output=True)
        shutil.rmtree(small, ignore_errors=True)
    return {"records": n, "acked": len(acked), "refused": len(refused), "unanswered": left,
            "lost": len(acked - set(got)), "duplicated": len(got) - len(set(got)),
            "seconds": elapsed, "offline_log_dirs": offline,
            "refusals": sorted(set(refused))[:5]}


def with_mounts(brokers, root: Path):
    from rayka.chaos.faultfs import FaultFs
    mounts = {}
    try:
        for b in brokers:
            src, mnt = root / f"src-{b}", root / f"mnt-{b}"
            src.mkdir(parents=True)
            mnt.mkdir(parents=True)
            mounts[b] = FaultFs.start(src, mnt, root / f"ctl-{b}.sock")
    except BaseException:
        for m in mounts.values():
            m.stop()
        raise
    return mounts


def fault_layer_missing() -> str | None:
    if os.geteuid() != 0:
        return "not root"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    return None


# -- the bench --------------------------------------------------------------------------------
def run(quick: bool = False, runs: int = 3, policies=tuple(POLICIES)) -> dict:
    from bench.common import local_cluster
    n = 50_000 if quick else 300_000
    latency_s = 1.0 if quick else 5.0
    costs: dict[str, list[dict]] = {p: [] for p in POLICIES}
    losses: dict[str, list[dict]] = {p: [] for p in POLICIES}
    missing = fault_layer_missing()
    load_before = os.getloadavg()
    full: list[dict] = []
    for run_i in range(runs):
        if os.geteuid() == 0:
            say(f"run {run_i + 1}/{runs}: a full disk")
            full.append(full_disk_once(quick))
        for policy in policies:
            broker_config, topic_config = POLICIES[policy]
            say(f"run {run_i + 1}/{runs}: {policy}: cost")
            with local_cluster("disk", **broker_config) as (cluster, _):
                costs[policy].append(cost_once(cluster, topic_config, n, latency_s))
            if missing:
                continue
            root = Path(tempfile.mkdtemp(prefix="rayka-disk-bench-"))
            mounts = with_mounts((1, 2, 3), root)
            try:
                configs = {b: {"log.dirs": str(m.mount)} for b, m in mounts.items()}
                with local_cluster("diskloss", broker_configs=configs,
                                   **broker_config) as (cluster, _):
                    for who in ("one", "all"):
                        say(f"run {run_i + 1}/{runs}: {policy}: power loss of {who}")
                        losses[policy].append(power_loss_once(cluster, mounts, topic_config,
                                                              who))
            finally:
                for m in mounts.values():
                    m.stop()
                shutil.rmtree(root, ignore_errors=True)
    figures = []
    for policy in policies:
        c = costs[policy]
        figures.append(figure(f"disk.{policy}.produce", "records/s",
                              [x["throughput"] for x in c], policy=policy))
        figures.append(figure(f"disk.{policy}.ack_p50", "ms", [x["ack_p50_ms"] for x in c],
                              better="lower", policy=policy, rate=1_000))
        figures.append(figure(f"disk.{policy}.ack_p99", "ms", [x["ack_p99_ms"] for x in c],
                              better="lower", policy=policy, rate=1_000))
        for who in ("one", "all"):
            got = [x for x in losses[policy] if x["who"] == who]
            if got:
                target = 0 if who == "one" or policy == "flush-before-ack" else None
                figures.append(figure(f"disk.{policy}.power_loss_{who}.lost", "records",
                                      [x["lost"] for x in got], target=target, better="lower",
                                      policy=policy))
    if full:
        figures.append(figure("disk.full_disk.acknowledged", "records",
                              [x["acked"] for x in full], target=full[0]["records"]))
        figures.append(figure("disk.full_disk.lost", "records", [x["lost"] for x in full],
                              target=0, better="lower"))
        figures.append(figure("disk.full_disk.seconds", "s", [x["seconds"] for x in full],
                              better="lower"))
    return {"bench": "disk", "setup": {"partitions": PARTITIONS, "replication_factor": 3,
                                       "min_insync_replicas": 2, "value_bytes": VALUE,
                                       "records": n, "loss_rate": RATE,
                                       "loss_after_s": BEFORE_S, "machine": machine_facts(),
                                       "load_before": load_before},
            "figures": figures,
            "extra": {"losses": losses, "costs": costs, "loss_skipped": missing,
                      "full_disk": full,
                      "load_after": os.getloadavg()}}


def main(argv=None) -> dict:
    parser = arg_parser(__doc__, Path("bench/results/disk.json"),
                        "50,000 records and 1 s of latency per run (a smoke run)")
    parser.add_argument("--policies", default=",".join(POLICIES),
                        help=f"comma-separated, of {', '.join(POLICIES)}")
    args = parser.parse_args(argv)
    policies = tuple(p for p in args.policies.split(",") if p)
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        parser.error(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
    return emit(run(args.quick, args.runs, policies), args.out)


if __name__ == "__main__":
    main()
