"""Scale benchmark: a 3-broker cluster (RF 3, min.insync.replicas 2) holding ONE topic of
1,000 or 10,000 partitions (--quick: 100 and 300).

Per size and run, on real Ray and the real (embedded) ZooKeeper:
- a FRESH rayka cluster (new name, new data dir) on the one Ray instance of the process: a
  broker's memory and file descriptors must not carry an earlier run's topics or allocator
  residue, so only Ray itself is reused across runs;
- scale.p{N}.create_topic_s: Admin.create_topic(wait=True), i.e. until every partition is
  led by a live broker AND every broker's metadata cache knows that leader;
- scale.p{N}.produce.records_per_s: 300,000 100-byte values (--quick 50,000; at least 10
  per partition: the same work at every size) with keys `k<i>`, grouped by Kafka's murmur2
  key -> partition (every partition gets data), sent with the bulk API (one send_batch
  per partition, acks=all, idempotent producer); from the first send_batch to the last
  acknowledgement;
- scale.p{N}.consume.records_per_s: one consumer assigned every partition, positioned at
  offset 0 by seek (a per-partition ListOffsets call would be measured otherwise), polling
  until every acknowledged record is read;
- scale.p{N}.broker_rss_mib and scale.p{N}.broker_open_fds, after the load: VmRSS of
  /proc/<pid>/status and len(/proc/<pid>/fd) of each broker actor's process (pid() of
  the actor), max over the 3 brokers (all brokers are also kept in "extra").

Limits: each replica keeps one open segment = 1 fd (the .log; the .index is opened only to
write it) while the broker's LRU of open files keeps it (at most half RLIMIT_NOFILE), so a
broker of an N-partition RF-3 topic on 3 brokers needs min(N, limit/2) fds plus ~60 (seen). Before ray.init this
raises RLIMIT_NOFILE (soft, and the hard limit too when the process holds CAP_SYS_RESOURCE)
so the raylet and the broker workers inherit it. A size that still does not fit is replaced
by the largest that does (a multiple of 100): its figures are named by the size MEASURED,
carry `requested_partitions` and `limited_by` (the precise reason) in their params, and the
reason is in "extra.limited". On the dev machine the hard limit is 20,000 and the sandbox
drops CAP_SYS_RESOURCE (even for root); with the LRU, 10,000 partitions fit.

    .venv/bin/python bench/scale_bench.py [--quick] [--runs 3] [--out bench/out/scale.json]
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import arg_parser, emit, figure, machine_facts  # noqa: E402

NAME = "scale"
SIZES, QUICK_SIZES = (1_000, 10_000), (100, 300)
VALUE_BYTES = 100
FD_BASELINE = 500           # seen ~65 (sockets, Ray's pipes, ZooKeeper); the rest is headroom
FDS_PER_REPLICA = 1         # replicas/segment.py: the active segment's .log


def segment_fds(replicas: int) -> int:
    """Open .log files a broker of `replicas` replicas keeps: one each, capped by its LRU
    (replicas/open_files.py) at half the descriptor limit (actors/broker_config.py)."""
    return min(FDS_PER_REPLICA * replicas, fd_limit() // 2)
DEFAULT_OUT = ROOT / "bench" / "out" / f"{NAME}.json"


# -- helpers shared with failover_bench --------------------------------------------------------------
def raise_fd_limit(wanted: int) -> dict:
    """Raise RLIMIT_NOFILE of THIS process to `wanted` (call before ray.init: the raylet and
    every actor worker inherit it). Raises the hard limit too when allowed (root / CAP_SYS_
    RESOURCE), never above fs.nr_open. Answers what was before and after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = {"soft": soft, "hard": hard}
    try:
        nr_open = int(Path("/proc/sys/fs/nr_open").read_text())
    except (OSError, ValueError):
        nr_open = hard
    target = min(max(wanted, soft), nr_open)
    refused = None
    if target > hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, target))
            hard = target
        except (ValueError, OSError) as exc:  # needs CAP_SYS_RESOURCE: soft can reach hard only
            refused = f"raising the hard limit to {target} refused ({exc}); " \
                      f"CAP_SYS_RESOURCE held: {_has_cap_sys_resource()}"
            target = hard
    if target > resource.getrlimit(resource.RLIMIT_NOFILE)[0]:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    soft2, hard2 = resource.getrlimit(resource.RLIMIT_NOFILE)
    return {"before": before, "after": {"soft": soft2, "hard": hard2}, "wanted": wanted,
            "refused": refused}


def _has_cap_sys_resource() -> bool | None:
    """Whether this process may raise a hard rlimit (capability 24 in CapEff)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> 24 & 1)
    except (OSError, ValueError):
        pass
    return None


def fd_shortfall(needed: int, limits: dict) -> str | None:
    """Why `needed` open files per broker cannot be had here, or None if they can."""
    have = fd_limit()
    if needed <= have:
        return None
    return (f"a broker needs ~{needed} open files ({FDS_PER_REPLICA} per replica: the active "
            f".log, plus ~{FD_BASELINE}) but RLIMIT_NOFILE is {have} (hard "
            f"{resource.getrlimit(resource.RLIMIT_NOFILE)[1]}); "
            + (limits.get("refused") or "the limit was not raised"))


def fd_limit() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def broker_process_facts(cluster) -> list[dict]:
    """pid, VmRSS (MiB), open fds and the RLIMIT_NOFILE soft limit of every broker actor."""
    import ray
    out = []
    for b in cluster.facts["brokers"]:
        actor = cluster.broker_actor(b)
        pid = ray.get(actor.pid.remote(), timeout=60)
        rss_kib = limit = None
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss_kib = int(line.split()[1])
        with open(f"/proc/{pid}/limits") as f:
            for line in f:
                if line.startswith("Max open files"):
                    limit = int(line.split()[3])
        out.append({"broker": b, "pid": pid, "rss_mib": round(rss_kib / 1024, 1),
                    "open_fds": len(os.listdir(f"/proc/{pid}/fd")), "fd_limit": limit})
    return out


def init_ray(fds_wanted: int) -> dict:
    import ray
    limits = raise_fd_limit(fds_wanted)
    ray.init(address="local", include_dashboard=False, logging_level="WARNING",
             log_to_driver=False)
    return limits


# -- one run -----------------------------------------------------------------------------------------
def _keyed_groups(records: int, partitions: int) -> dict[int, tuple[list, list]]:
    from rayka.client.partitioner import partition_for_key
    groups: dict[int, tuple[list, list]] = {}
    for i in range(records):
        key = b"k%d" % i
        keys, values = groups.setdefault(partition_for_key(key, partitions), ([], []))
        keys.append(key)
        values.append((b"%d|" % i).ljust(VALUE_BYTES, b"."))
    return groups


def run_size(partitions: int, records: int, timeout_s: float) -> dict:
    """One fresh cluster: create, produce, consume, measure the brokers; then tear down."""
    import rayka
    data_dir = tempfile.mkdtemp(prefix=f"rayka-scale-{partitions}-")
    cluster = None
    try:
        cluster = rayka.start_local(name=f"scale{uuid.uuid4().hex[:6]}", brokers=3,
                                    controllers=2, data_dir=data_dir)
        admin, topic = cluster.admin(), "scale"
        t0 = time.monotonic()
        admin.create_topic(topic, partitions, 3, {"min.insync.replicas": 2}, timeout_s=timeout_s)
        create_s = time.monotonic() - t0

        groups = _keyed_groups(records, partitions)      # built before the clock starts
        producer = cluster.producer(acks="all", linger_ms=5)
        producer.metadata.partition_count(topic)         # metadata warm, outside the clock
        t0 = time.monotonic()
        futures = [producer.send_batch(topic, values, keys, partition=p)
                   for p, (keys, values) in groups.items()]
        acked = sum(len(f.result(timeout=timeout_s)) for f in futures)
        produce_s = time.monotonic() - t0
        producer.close(timeout_s)

        consumer = cluster.consumer()
        consumer.assign([(topic, p) for p in range(partitions)])
        for p in range(partitions):
            consumer.seek((topic, p), 0)
        read = 0
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        while read < acked:          # back-to-back long polls: a sleep here would be measured
            read += len(consumer.poll(timeout_ms=500))
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {read} of {acked} records in {timeout_s} s")
        consume_s = time.monotonic() - t0
        consumer.close()
        procs = broker_process_facts(cluster)
        return {"partitions": partitions, "records": acked, "read": read,
                "partitions_with_data": len(groups), "create_topic_s": create_s,
                "produce_s": produce_s, "consume_s": consume_s,
                "produce_records_per_s": acked / produce_s,
                "consume_records_per_s": read / consume_s, "brokers": procs,
                "broker_rss_mib": max(b["rss_mib"] for b in procs),
                "broker_open_fds": max(b["open_fds"] for b in procs)}
    finally:
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(data_dir, ignore_errors=True)


def records_for(partitions: int, quick: bool) -> int:
    # the SAME work at every size (spread over more partitions), >= 10 records per partition
    return max(50_000 if quick else 300_000, 10 * partitions)


# -- the suite protocol ------------------------------------------------------------------------------
def run(quick: bool = False, runs: int = 3, sizes=None, timeout_s: float = 600.0) -> dict:
    import ray
    sizes = list(sizes or (QUICK_SIZES if quick else SIZES))
    limits = init_ray(FDS_PER_REPLICA * max(sizes) + FD_BASELINE)
    results: dict[int, list[dict]] = {}
    limited: dict[int, str] = {}
    measured: dict[int, int] = {}        # requested size -> size measured
    t_all = time.monotonic()
    try:
        for n in sizes:
            short = fd_shortfall(segment_fds(n) + FD_BASELINE, limits)
            if short:                   # measure the largest size that fits, and say why
                fits = (fd_limit() - FD_BASELINE) // FDS_PER_REPLICA // 100 * 100
                limited[n] = f"{short}; measured {fits} partitions instead"
                print(f"# scale p{n}: {limited[n]}", file=sys.stderr)
                measured[n] = fits
                n = fits
            else:
                measured[n] = n
            results[n] = []
            for i in range(runs):
                r = run_size(n, records_for(n, quick), timeout_s)
                results[n].append(r)
                print(f"# scale p{n} run {i + 1}: create {r['create_topic_s']:.2f} s, produce "
                      f"{r['produce_records_per_s']:,.0f}/s, consume {r['consume_records_per_s']:,.0f}/s, "
                      f"rss {r['broker_rss_mib']} MiB, fds {r['broker_open_fds']}", file=sys.stderr)
    finally:
        ray.shutdown()
    figures = []
    for requested in sizes:
        n = measured.get(requested, requested)
        rs = results.get(n, [])
        extra = {"requested_partitions": requested, "limited_by": limited[requested]} \
            if requested in limited else {}
        for key, unit, better in (("produce.records_per_s", "records/s", "higher"),
                                  ("consume.records_per_s", "records/s", "higher"),
                                  ("broker_rss_mib", "MiB", "lower"),
                                  ("broker_open_fds", "fds", "lower"),
                                  ("create_topic_s", "s", "lower")):
            field = key.replace(".", "_")
            figures.append(figure(f"scale.p{n}.{key}", unit, [r[field] for r in rs],
                                  better=better, partitions=n, **extra))
    return {"bench": NAME,
            "setup": {"brokers": 3, "controllers": 2, "replication_factor": 3,
                      "min_insync_replicas": 2, "value_bytes": VALUE_BYTES, "acks": "all",
                      "sizes": sizes, "measured_sizes": measured,
                      "records": {n: records_for(n, quick) for n in measured.values()},
                      "runs": runs, "quick": quick,
                      "reused": "one Ray instance for every run; a fresh rayka cluster (brokers, "
                                "controllers, ZooKeeper, data dir) per size and run",
                      "fd_limit": limits, "machine": machine_facts()},
            "figures": figures,
            "extra": {"runs": {str(n): rs for n, rs in results.items()},
                      "limited": {str(n): why for n, why in limited.items()},
                      "total_s": round(time.monotonic() - t_all, 1)}}


def main(argv=None) -> dict:
    ap = arg_parser(__doc__, DEFAULT_OUT, "100 and 300 partitions")
    ap.add_argument("--sizes", default=None, help="comma-separated partition counts")
    ap.add_argument("--timeout", type=float, default=600.0, help="per wait, seconds")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    report = run(quick=args.quick, runs=args.runs, sizes=sizes, timeout_s=args.timeout)
    return emit(report, args.out)


if __name__ == "__main__":
    main()
