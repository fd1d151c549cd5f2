"""Controller benchmark: failover time on the REAL ZooKeeper for 100 / 1,000 / 10,000 partitions.

Per size N and run: a fresh chroot on a real standalone ZooKeeper (tickTime 200 ms, 4 s
sessions), 3 brokers registered as plain ZooKeeper sessions, 10 topics of N/10 partitions
(RF 3, Kafka's round-robin assignment), a counting channel in place of the broker actors.
- create_s: controller A (id 100) is active; time from the admin topic writes until A's
  context holds N partitions with live leaders (state znodes written).
- failover_s: controller B (id 101) is a settled standby; A's ZooKeeper session is closed
  (its ephemeral /controller goes at once); time until B has finished
  on_controller_failover (watch → elect → load context → state machines → send).
  Breakdown: elect_s (until B's failover starts), load_context_s, state_machines_s, send_s.
Each figure is the median (with min/max) of --runs runs. Prints one JSON object, writes it
to --out and a PNG plot beside it. Target: failover <= 5 s at 10,000 partitions.
`run(quick, runs)` gives the same measures in the suite protocol (bench/common.py) for
bench/run_all.py: controller.failover_s and controller.create_s per size (params partitions).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller.assignment import assign_replicas  # noqa: E402
from controller.controller import Controller  # noqa: E402
from controller.layout import BrokerRegistration  # noqa: E402
from controller.zookeeper.store import ZkStore  # noqa: E402
from controller.zookeeper.server import ZooKeeperServer  # noqa: E402

BROKERS = (1, 2, 3)
TOPICS = 10
SESSION_S = 4.0
TARGET_S, TARGET_N = 5.0, 10_000
DEFAULT_OUT = Path(__file__).resolve().parent / "out" / "controller_bench.json"


class CountingChannel:
    """A BrokerChannel that only counts requests and partition entries per request type."""

    def __init__(self):
        self.requests, self.partitions = Counter(), Counter()

    def send(self, broker_id, request) -> None:
        kind = type(request).__name__
        self.requests[kind] += 1
        self.partitions[kind] += len(getattr(request, "partition_states", None)
                                     or getattr(request, "partitions", ()) or ())


def wait_for(predicate, timeout_s: float, what: str, poll_s: float = 0.01):
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(poll_s)
    return value


def timed(fn, sink: dict, key: str):
    def wrapper(*a, **kw):
        start = time.monotonic()
        sink.setdefault(key + "_start", start)
        try:
            return fn(*a, **kw)
        finally:
            sink[key] = sink.get(key, 0.0) + time.monotonic() - start
    return wrapper


def run_once(zk: ZooKeeperServer, n: int, timeout_s: float) -> dict:
    cluster = f"bench-{n}-{uuid.uuid4().hex[:8]}"
    stores, controllers, dead = [], [], []

    def store():
        s = ZkStore(zk.connect_string, cluster, session_timeout_s=SESSION_S).start()
        stores.append(s)
        return s

    clock = lambda: int(time.monotonic() * 1000)  # noqa: E731
    try:
        admin = store()
        for b in BROKERS:
            store().register_broker(BrokerRegistration(b, "127.0.0.1", 9000 + b, node_id=f"n{b}",
                                                       actor_name=f"broker-{b}"))
        a = Controller(100, store(), CountingChannel(), clock)
        controllers.append(a.start())
        wait_for(lambda: a.loop.idle(1) and a.is_active, timeout_s, "controller A active")

        t0 = time.monotonic()
        per_topic = [n // TOPICS + (1 if i < n % TOPICS else 0) for i in range(TOPICS)]
        for i, parts in enumerate(p for p in per_topic if p):
            admin.create_topic(f"topic-{i}", assign_replicas(BROKERS, parts, 3, start_index=i % 3))
        t_written = time.monotonic()
        live = set(BROKERS)
        wait_for(lambda: len(a.ctx.leadership) >= n and a.loop.idle(0.5)
                 and all(s.leader in live for s in list(a.ctx.leadership.values())),
                 timeout_s, f"{n} partitions online", poll_s=0.005)
        t_online = time.monotonic()
        on_zk = admin.get_partition_states()
        assert len(on_zk) == n and all(s.leader in live for s in on_zk.values()), len(on_zk)

        phases: dict = {}
        channel_b = CountingChannel()
        b = Controller(101, store(), channel_b, clock)
        b.on_controller_failover = timed(b.on_controller_failover, phases, "failover")
        b._load_context = timed(b._load_context, phases, "load_context")
        b.send = timed(b.send, phases, "send")
        controllers.append(b.start())
        wait_for(lambda: b.loop.idle(1) and b.active_controller_id == 100 and not b.is_active,
                 timeout_s, "controller B settled as standby")

        t_start = time.monotonic()
        a.store.close()                      # A's session ends: /controller is deleted now
        dead.append(a)
        wait_for(lambda: b.failovers_completed >= 1, timeout_s, "failover to B", poll_s=0.001)
        t_done = time.monotonic()
        assert b.is_active and b.ctx.epoch == 2 and len(b.ctx.leadership) == n
        load, send = phases.get("load_context", 0.0), phases.get("send", 0.0)
        return {
            "create_s": round(t_online - t0, 4),
            "create_admin_writes_s": round(t_written - t0, 4),
            "failover_s": round(t_done - t_start, 4),
            "elect_s": round(phases["failover_start"] - t_start, 4),
            "load_context_s": round(load, 4),
            "state_machines_s": round(phases["failover"] - load - send, 4),
            "send_s": round(send, 4),
            "failover_requests": dict(channel_b.requests),
            "failover_request_partitions": dict(channel_b.partitions),
        }
    finally:
        for c in controllers:
            if c in dead:                    # its session is gone (close() drops listeners):
                c.loop.expire()              # resign without ZooKeeper calls, then stop
            c.shutdown()
        for s in stores:
            s.close()


def summarize(runs: list[dict]) -> dict:
    out = {}
    for key in ("failover_s", "create_s", "create_admin_writes_s", "elect_s",
                "load_context_s", "state_machines_s", "send_s"):
        vals = [r[key] for r in runs]
        out[key] = {"median": round(statistics.median(vals), 4), "min": min(vals), "max": max(vals)}
    return out


def machine() -> dict:
    mem_kb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    import kazoo
    return {"cpus": os.cpu_count(), "mem_total_gib": mem_kb and round(mem_kb / 2**20, 1),
            "platform": platform.platform(), "python": platform.python_version(),
            "kazoo": getattr(kazoo, "__version__", None)}


def zk_version(zk: ZooKeeperServer) -> str | None:
    try:
        first = zk.four_letter("srvr").splitlines()[0]
        return first.split(":", 1)[1].strip().split(",")[0]
    except (OSError, IndexError):
        return None


def plot(report: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [int(s) for s in report["results"]]
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, label, color, dy in (("failover_s", "failover (A's session closed → B done)",
                                   "#3b6ea5", -14),
                                  ("create_s", "initial creation (topics written → all online)",
                                   "#7f8c8d", 6)):
        stats = [report["results"][str(s)]["summary"][key] for s in sizes]
        med = [st["median"] for st in stats]
        err = [[m - st["min"] for m, st in zip(med, stats)],
               [st["max"] - m for m, st in zip(med, stats)]]
        ax.errorbar(sizes, med, yerr=err, marker="o", capsize=4, label=label, color=color)
        for s, m in zip(sizes, med):
            ax.annotate(f"{m:.2f} s", (s, m), textcoords="offset points", xytext=(6, dy), fontsize=8)
    ax.axhline(TARGET_S, color="#c0392b", ls="--", label=f"target: {TARGET_S:g} s at {TARGET_N:,}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("partitions (RF 3, 3 brokers)")
    ax.set_ylabel("seconds (median, min–max)")
    ax.set_title("rayka controller on real ZooKeeper")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def measure(sizes: list[int], runs: int, timeout_s: float) -> tuple[dict, str | None]:
    """Per size: a fresh ZooKeeper, `runs` runs; ({str(size): {"summary", "runs"}}, ZK version)."""
    results, zk_ver = {}, None
    for n in sizes:
        zk = ZooKeeperServer(tick_time_ms=200, heap_mb=1024).start()  # sessions up to 4 s
        try:
            zk_ver = zk_ver or zk_version(zk)
            done = [run_once(zk, n, timeout_s) for _ in range(runs)]
        finally:
            zk.stop()
        results[str(n)] = {"summary": summarize(done), "runs": done}
        print(f"# {n} partitions: failover {results[str(n)]['summary']['failover_s']}",
              file=sys.stderr)
    return results, zk_ver


def run(quick: bool = False, runs: int = 3) -> dict:
    """Suite protocol (bench/common.py): controller.failover_s and controller.create_s per
    size (params partitions=N), `runs` runs each; quick: 100 and 1,000 partitions only."""
    from bench.common import figure
    sizes = [100, 1000] if quick else [100, 1000, TARGET_N]
    results, zk_ver = measure(sizes, runs, 300.0)
    figures = []
    for key in ("failover_s", "create_s"):
        for n in sizes:
            figures.append(figure(f"controller.{key}", "s",
                                  [r[key] for r in results[str(n)]["runs"]], better="lower",
                                  target=TARGET_S if key == "failover_s" and n == TARGET_N else None,
                                  partitions=n))
    return {"bench": "controller",
            "setup": {"quick": quick, "runs": runs, "sizes": sizes, "brokers": len(BROKERS),
                      "topics": TOPICS, "replication_factor": 3, "session_timeout_s": SESSION_S,
                      "zk_tick_time_ms": 200, "zookeeper": zk_ver},
            "figures": figures,
            "extra": {"breakdown": {n: r["summary"] for n, r in results.items()}}}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1 run of 100 and 1,000")
    parser.add_argument("--timeout", type=float, default=300.0, help="per wait, seconds")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON path (+ .png)")
    args = parser.parse_args(argv)
    sizes = [100, 1000] if args.quick else [int(s) for s in args.sizes.split(",") if s]
    runs = 1 if args.quick else args.runs

    results, zk_ver = measure(sizes, runs, args.timeout)
    at_target = results.get(str(TARGET_N))
    report = {
        "benchmark": "controller_bench",
        "setup": {"brokers": len(BROKERS), "topics": TOPICS, "replication_factor": 3,
                  "session_timeout_s": SESSION_S, "zk_tick_time_ms": 200, "runs": runs},
        "machine": {**machine(), "zookeeper": zk_ver},
        "target": {"partitions": TARGET_N, "failover_s": TARGET_S,
                   "met": None if at_target is None
                   else at_target["summary"]["failover_s"]["median"] <= TARGET_S},
        "results": results,
    }
    print(json.dumps(report, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, args.out.with_suffix(".png"))
    return report


if __name__ == "__main__":
    main()
