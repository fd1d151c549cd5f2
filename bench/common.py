"""What every benchmark of the suite shares: the figure record, summaries, machine facts.

Protocol (bench/run_all.py relies on it): a benchmark module `bench/<name>_bench.py`
exposes `run(quick: bool = False, runs: int = 3) -> dict` returning
    {"bench": <name>, "setup": {...}, "figures": [figure, ...], "extra": {...}}
where each figure is made by `figure()`: one sample per run (the suite reports the median
with min/max), the target when there is one, and whether higher is better.
`quick` shrinks sizes for a smoke run (tests, development), never for reported figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def say(msg: str) -> None:
    """Progress for the person watching, on stderr (stdout is the JSON)."""
    print(f"# {msg}", file=sys.stderr, flush=True)


def replicated_topic(cluster, prefix: str, partitions: int, timeout_s: float) -> str:
    """A fresh RF-3, min-ISR-2 topic named <prefix><random>."""
    import uuid
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    cluster.admin().create_topic(name, partitions, 3, {"min.insync.replicas": 2},
                                 timeout_s=timeout_s)
    return name


def produce_all(producer, topic: str, n: int, value: bytes, timeout_s: float) -> float:
    """Seconds for a librdkafka Producer to send n records of `value` and have every one
    acknowledged (RuntimeError if any failed or went unanswered)."""
    import time
    failed = []
    produce, poll = producer.produce, producer.poll
    report = lambda err, _m: failed.append(err) if err else None  # noqa: E731
    t0 = time.perf_counter()
    for i in range(n):
        try:
            produce(topic, value, on_delivery=report)
        except BufferError:
            poll(0.01)                       # the local queue is full: let deliveries drain
            produce(topic, value, on_delivery=report)
        if i % 10_000 == 0:
            poll(0)
    left = producer.flush(timeout_s)
    elapsed = time.perf_counter() - t0
    if left or failed:
        raise RuntimeError(f"produce: {left} unanswered, {len(failed)} failed ({failed[:1]})")
    return elapsed


def proc_cpu_s(pids) -> float:
    """User + system CPU seconds of these processes (all their threads), from /proc."""
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            total += _stat_cpu_s(f.read())
    return total


def _stat_cpu_s(stat: str) -> float:
    """utime + stime (fields 14 and 15) of a /proc/<pid>/stat or task stat line, in s."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_jiffies(stat_line: str | None = None) -> list[int]:
    """The values of /proc/stat's `cpu` line (every CPU summed; `stat_line`: that line)."""
    if stat_line is None:
        with open("/proc/stat") as f:
            stat_line = f.readline()
    return [int(x) for x in stat_line.split()[1:]]


def machine_busy() -> tuple[float, float]:
    """(busy jiffies, total jiffies) of every CPU, from /proc/stat (idle and iowait are not
    busy)."""
    fields = _cpu_jiffies()
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def busy_share_since(before: tuple[float, float]) -> float:
    """The share of every CPU busy since `before` (a machine_busy() sample), 0 to 1."""
    busy, total = machine_busy()
    return (busy - before[0]) / max(1, total - before[1])


PACE_LOOPS = 300_000


def machine_pace(loops: int = PACE_LOOPS, tries: int = 3, clock=None) -> dict:
    """How fast this machine runs the brokers' kind of work right now: the best of `tries`
    runs of a fixed pure-Python loop (dict and list work, calls), as CPU ms and wall ms.
    The same bench gave one system's produce throughput 349 k then 649 k records/s three
    hours apart on this 2-core VM, Kafka's alike: a host that gives the VM less shows in
    the wall ms (its steal, `steal_s`), a slower core or a noisy neighbour's cache in the
    CPU ms. `clock`: (cpu_s, wall_s) functions, for tests."""
    import time
    # this thread's CPU: the bench process has other threads (Ray's, librdkafka's) running
    cpu, wall = clock or (time.thread_time, time.perf_counter)
    best = None
    for _ in range(tries):
        c0, w0 = cpu(), wall()
        _pace_work(loops)
        took = ((cpu() - c0) * 1000, (wall() - w0) * 1000)
        best = took if best is None or took[1] < best[1] else best
    return {"loops": loops, "cpu_ms": round(best[0], 1), "wall_ms": round(best[1], 1)}


def _pace_work(loops: int) -> int:
    table: dict = {}
    items: list = []
    total = 0
    for i in range(loops):
        key = i & 1023
        table[key] = table.get(key, 0) + i
        items.append(key)
        if len(items) > 64:
            total += len(items) + abs(items.pop(0) - key)
    return total


def steal_s(stat_line: str | None = None) -> float:
    """Seconds of CPU the hypervisor gave other guests while this VM wanted it (the 8th
    value of /proc/stat's `cpu` line, summed over the CPUs); 0 where it is not counted."""
    fields = _cpu_jiffies(stat_line)
    return fields[7] / os.sysconf("SC_CLK_TCK") if len(fields) > 7 else 0.0


def self_cpu_s() -> float:
    """User + system CPU seconds of this process (all its threads)."""
    t = os.times()
    return t.user + t.system


def poll_timeout_s(wait_s: float) -> float:
    """A confluent_kafka poll() timeout for a wait of `wait_s`: rounded UP to whole
    milliseconds (0 when nothing is left to wait). confluent_kafka passes librdkafka
    int(timeout * 1000), so poll(0.0008) returns at once: a pacing loop calling it with
    sub-millisecond waits spins on a core, and that spin takes whatever CPU the brokers
    under test leave (at 1,000 records/s: 0.6-1 core of this 2-core machine)."""
    return math.ceil(wait_s * 1000) / 1000 if wait_s > 0 else 0.0


def thread_cpu_s(pid: int | str = "self") -> dict[int, tuple[str, float]]:
    """A process's threads (this one's by default): {thread id: (name, CPU seconds)}, from
    /proc (librdkafka names its threads rdk:main, rdk:broker<id>, ...; a JVM its compiler
    threads "C2 CompilerThre"). A thread that ended is missing: compare two samples of
    long-lived threads."""
    out: dict[int, tuple[str, float]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except (FileNotFoundError, ProcessLookupError):    # ended since the listing
            continue                                      # (ESRCH: ended while read)
        out[int(tid)] = (stat[stat.index("(") + 1:stat.rindex(")")], _stat_cpu_s(stat))
    return out


def threads_cpu_by_name(before: dict, after: dict, min_s: float = 0.01) -> dict[str, float]:
    """CPU seconds between two thread_cpu_s samples, summed by thread name with a number
    after '-' or '#' made '#' (one entry for every broker's "ray::broker-#:B"; a JVM's "C1"
    and "C2" compilers stay apart), largest first; names under `min_s` left out."""
    by: dict[str, float] = {}
    for tid, (name, cpu) in after.items():
        key = re.sub(r"(?<=[-#])\d+", "#", name)
        by[key] = by.get(key, 0.0) + cpu - before.get(tid, (name, 0.0))[1]
    return {k: round(v, 3) for k, v in sorted(by.items(), key=lambda kv: -kv[1]) if v >= min_s}


def figure(name: str, unit: str, samples, target: float | None = None,
           better: str = "higher", **params) -> dict:
    """One measured quantity: `samples` holds one value per run."""
    if better not in ("higher", "lower"):
        raise ValueError(f"better must be 'higher' or 'lower', not {better!r}")
    samples = [float(s) for s in samples]
    out = {"name": name, "unit": unit, "samples": samples, "target": target,
           "better": better, "params": params}
    out.update(summary(samples))
    if target is not None and samples:
        out["met"] = (out["median"] >= target) if better == "higher" else (out["median"] <= target)
    return out


def summary(samples) -> dict:
    samples = [float(s) for s in samples]
    if not samples:
        return {"median": None, "min": None, "max": None, "runs": 0}
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "runs": len(samples)}


def machine_facts() -> dict:
    mem_gib = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_gib = round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    versions = {"python": platform.python_version()}
    for mod in ("ray", "pyspark", "raydp", "kazoo", "aiokafka", "nats"):
        try:
            m = __import__(mod)
            versions[mod] = getattr(m, "__version__", "?")
        except Exception:  # a peer's client may be missing on a trimmed install
            versions[mod] = None
    return {"cpus": os.cpu_count(), "mem_total_gib": mem_gib, "platform": platform.platform(),
            "versions": versions}


def emit(result: dict, out: Path) -> dict:
    """A bench's main(): print the JSON and write it to `out`."""
    text = json.dumps(result, indent=2)
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")
    return result


def arg_parser(doc: str, default_out: Path, quick_help: str) -> argparse.ArgumentParser:
    """The flags every bench takes (--quick, --runs, --out); a bench adds its own."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=default_out)
    return parser


@contextlib.contextmanager
def local_cluster(prefix: str, **config):
    """A fresh rayka cluster (3 brokers, 2 controllers, embedded ZooKeeper, a temp data dir)
    on this process's Ray (a fresh local one when none runs): yields (cluster, data_dir);
    stops everything it started and removes the data dir afterwards."""
    import shutil
    import tempfile
    import uuid

    import ray

    import rayka
    from rayka.cluster import ensure_ray
    own_ray = ensure_ray("local", include_dashboard=False)
    data_dir = tempfile.mkdtemp(prefix=f"rayka-{prefix}-bench-")
    cluster = None
    try:
        cluster = rayka.start_local(name=f"{prefix}-{uuid.uuid4().hex[:6]}", data_dir=data_dir,
                                    **config)
        yield cluster, data_dir
    finally:
        if cluster is not None:
            cluster.shutdown()
        if own_ray:
            ray.shutdown()
        shutil.rmtree(data_dir, ignore_errors=True)
