"""Failover benchmark: how long a 3-broker rayka cluster (RF 3, min.insync.replicas 2) is
unavailable when a broker or the controller dies, and how long leadership moves take.

Figures (one sample per run; better = lower):
- failover.broker_kill.first_ack_s (target 2 s) and
  failover.broker_kill_no_restart.first_ack_s: an idempotent acks=all producer writes
  single records back to back to partition 0 of a 3-partition topic; the broker B leading it
  (as ZooKeeper names it) has its actor killed (ray.kill, as `rayka demo` does: Ray restarts
  it; or with no_restart: gone until re-created). Time from the kill to the acknowledgement
  of the first write the NEW leader took: the first acknowledged offset >= the end offset
  of B's leader epoch, which the new leader answers (OffsetsForLeaderEpoch). Every wait
  polls with a deadline. Before the next run the broker is back (re-created if needed) and
  in every ISR.
- failover.leader_paused.first_ack_s (target 6 s): the same, but B's process is
  frozen (SIGSTOP; SIGCONT once the new leader took a write): nothing fails on the
  producer's side, its request timeout is Kafka's 30 s; B's ZooKeeper session (3 s) expires,
  the controller elects a new leader, and the producer, refreshing metadata while an answer
  is late, abandons the frozen request and resends to the new leader.
- failover.controller_kill.serving_s (target 2 s): the active controller's actor is
  killed (Ray restarts it as a candidate); time until the controller epoch has grown AND a
  topic created after that has a live leader known to every broker (Admin.create_topic,
  wait=True). `elected_s` (epoch grown) is in "extra".
- failover.controlled_shutdown_s, partitions_led=100/1,000 (target 1 s at 1,000; 10,000
  with --cs-sizes 100,1000,10000, too slow for the suite, see below): topics of 3×N partitions in all, RF 3, so each broker leads
  ~N; Cluster.restart_broker (the path of `rayka restart-brokers`) on broker 1, 2, 3 in
  turn, the figure being its timing of the controlled-shutdown call alone. Between runs the
  cluster is healed: every ISR full, then a preferred-leader election (asked of the active
  controller actor directly: Admin.elect_preferred_leaders reads ZooKeeper once per
  partition) until each broker leads its N again. Sizes grow on the SAME cluster by
  adding topics (what a broker leads is what counts, not how many topics hold it).
- failover.controller_failover_s, partitions=100/1,000/10,000 (target 5 s at 10,000;
  --quick: 100 and 1,000): bench/controller_bench.py's run_once (real ZooKeeper, counting
  channel), one ZooKeeper server per size as that bench does.

Reused across runs: one Ray instance; one rayka cluster for the broker and controller kills
and the controlled shutdowns (healed before every run, see above). File descriptors: a
broker keeps 1 per replica (the active .log) up to its LRU's cap (half RLIMIT_NOFILE);
RLIMIT_NOFILE is raised before ray.init (bench/scale_bench.raise_fd_limit); a size that
still does not fit is not lowered, its figure has no samples and the precise reason is in
"extra.skipped". 10,000 led (30,000 replicas per broker) is slow rather than impossible:
every run restarts a broker holding 30,000 replicas (about 2 ms per log to reopen here,
~60 s before anything else) and heals it (~40 s): ~6 minutes for 3 runs, so `make bench`
leaves it out (bench/results/2026-11-23-failover-cs.json has it).

    .venv/bin/python bench/failover_bench.py [--quick] [--runs 3] [--out bench/out/failover.json]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import arg_parser, emit, figure, machine_facts  # noqa: E402
from bench.scale_bench import (FD_BASELINE, FDS_PER_REPLICA,  # noqa: E402
                               broker_process_facts, fd_shortfall, init_ray, segment_fds)

NAME = "failover"
# 10,000 led only when asked (--cs-sizes 10000): ~6 minutes, past the suite's 600 s cap
CS_SIZES, CS_QUICK = (100, 1_000), (100, 1_000)
# controller failover vs partitions is controller_bench's figure in the suite; --cf-sizes
# measures it here too (same function) when this bench runs alone
CF_SIZES, CF_QUICK = (), ()
KILL_TOPIC = "failover"
DEFAULT_OUT = ROOT / "bench" / "out" / f"{NAME}.json"


# -- a writer that keeps one acks=all write in flight -------------------------------------------------
class Writer:
    """Back-to-back single-record acks=all sends to one partition, each acknowledgement
    recorded as (monotonic time, offset). Errors past the producer's own retries are kept,
    not raised: the run reports them."""

    def __init__(self, cluster, topic: str, partition: int):
        # Kafka's default request timeout (30 s): a frozen leader is left by the producer
        # noticing the new one, not by a short timeout
        self.producer = cluster.producer(acks="all", linger_ms=0)
        self.topic, self.partition = topic, partition
        self.acks: list[tuple[float, int]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="bench-writer")

    def start(self) -> "Writer":
        self._thread.start()
        return self

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                meta = self.producer.send(self.topic, b"w%012d" % i,
                                          partition=self.partition).result(timeout=120)
                self.acks.append((time.monotonic(), meta.offset))
            except Exception as exc:   # noqa: BLE001 - recorded; the bench fails on it later
                self.errors.append(repr(exc))
            i += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(150)
        self.producer.close(60)


# -- healing helpers ----------------------------------------------------------------------------------
def _states(cluster) -> dict:
    return cluster.store.get_partition_states()     # every topic, pipelined: one round trip


def wait_healed(cluster, timeout_s: float) -> None:
    """Every broker registered, every partition led and its ISR full (RF 3)."""
    from rayka.client.admin import wait_for
    want = set(cluster.facts["brokers"])
    wait_for(lambda: want <= cluster.store.get_broker_ids()
             and all(s.leader in want and len(s.isr) == 3 for s in _states(cluster).values()),
             timeout_s, "every broker back and every ISR full")


def balance_leaders(cluster, timeout_s: float) -> dict[int, int]:
    """Preferred-leader election until every partition is led by its first replica;
    answers {broker: partitions led}."""
    import ray
    from rayka.client.admin import wait_for
    store = cluster.store
    assignment = {}
    for t in store.get_topics():
        for p, replicas in store.get_topic_assignment(t).partitions.items():
            assignment[(t, p)] = replicas[0]

    def balanced():
        states = _states(cluster)
        off = [tp for tp, first in assignment.items()
               if tp not in states or states[tp].leader != first]
        if off:
            try:
                ray.get(cluster.active_controller_actor().elect_preferred_leaders.remote(off),
                        timeout=60)
            except Exception:      # noqa: BLE001 - controller moving: asked again next poll
                pass
            return False
        return True
    wait_for(balanced, timeout_s, "preferred leaders elected")
    led: dict[int, int] = {}
    for s in _states(cluster).values():
        led[s.leader] = led.get(s.leader, 0) + 1
    return led


# -- broker kill -----------------------------------------------------------------------------------
def broker_kill_once(cluster, fault: str, timeout_s: float) -> dict:
    """fault: "restart" (ray.kill, Ray restarts it), "no_restart" (gone until re-created) or
    "pause" (SIGSTOP until a new leader took a write, then SIGCONT)."""
    import os
    import signal

    import ray
    from rayka.client.admin import wait_for
    from rayka.chaos.faults import FaultInjector
    from rayka.ops.procs import pid_alive
    admin = cluster.admin()
    p0 = admin.describe_topic(KILL_TOPIC)[0]
    victim, old_epoch = p0.leader, p0.leader_epoch
    tp = (KILL_TOPIC, p0.partition)
    pid = ray.get(cluster.broker_actor(victim).pid.remote(), timeout=60)
    old_reg = cluster.store.get_broker(victim).epoch
    writer = Writer(cluster, KILL_TOPIC, p0.partition).start()
    try:
        wait_for(lambda: len(writer.acks) >= 20, timeout_s, "the writer acknowledged")
        t_kill = time.monotonic()
        if fault == "pause":
            os.kill(pid, signal.SIGSTOP)
        else:
            cluster.kill_broker(victim, restart=fault == "restart")

        def new_epoch_start():
            """(new leader, its epoch, first offset after B's epoch) once a new leader answers."""
            p = admin.describe_topic(KILL_TOPIC)[0]
            if p.leader_epoch <= old_epoch or p.leader < 0:
                return None
            actor = cluster.broker_actor(p.leader)
            try:
                err, _epoch, end = ray.get(actor.offsets_for_leader_epoch.remote(
                    tp, p.leader_epoch, old_epoch), timeout=5)
            except Exception:      # noqa: BLE001 - that leader is restarting: ask again
                return None
            return None if err else (p.leader, p.leader_epoch, end)
        new_leader, new_epoch, start = wait_for(new_epoch_start, timeout_s, "a new leader of p0")

        def first_new_ack():
            return next((t for t, offset in list(writer.acks) if offset >= start), None)
        t_ack = wait_for(first_new_ack, timeout_s, "an acknowledgement from the new leader")
    finally:
        if fault == "pause":
            os.kill(pid, signal.SIGCONT)
        writer.stop()
    if writer.errors:
        raise RuntimeError(f"writes failed during the broker kill: {writer.errors[:3]}")
    t0 = time.monotonic()
    if fault == "no_restart":     # as FaultInjector does: name freed AND process gone, then re-create
        wait_for(lambda: cluster.broker_actor(victim) is None, timeout_s, "the killed actor gone")
        wait_for(lambda: not pid_alive(pid), timeout_s, f"process {pid} gone")
        FaultInjector(cluster, timeout_s=timeout_s).revive_brokers()
    # healed = the victim registered ANEW (its dead incarnation's znode may still stand)
    wait_for(lambda: (reg := cluster.store.get_broker(victim)) is not None
             and reg.epoch > old_reg, timeout_s, f"broker {victim} registered again")
    wait_healed(cluster, timeout_s)
    return {"victim": victim, "fault": fault, "old_epoch": old_epoch,
            "new_leader": new_leader, "new_epoch": new_epoch, "first_new_offset": start,
            "first_ack_s": t_ack - t_kill, "acks": len(writer.acks),
            "healed_s": time.monotonic() - t0}


# -- controller kill -------------------------------------------------------------------------------
def controller_kill_once(cluster, run: int, timeout_s: float) -> dict:
    import ray
    from rayka.client.admin import wait_for
    admin = cluster.admin()
    old_epoch = cluster.store.get_controller_epoch()[0]
    t_kill = time.monotonic()
    cid = cluster.kill_controller(restart=True)
    wait_for(lambda: cluster.store.get_controller() is not None
             and cluster.store.get_controller_epoch()[0] > old_epoch, timeout_s,
             "a controller of a higher epoch")
    t_elected = time.monotonic()
    admin.create_topic(f"ctl-probe-{run}-{uuid.uuid4().hex[:4]}", 1, 3, timeout_s=timeout_s)
    t_serving = time.monotonic()
    # the killed candidate is back (Ray restarted it) before the next run
    wait_for(lambda: _answers(ray, cluster.controller_actor(cid)), timeout_s,
             f"controller {cid} restarted")
    return {"killed": cid, "old_epoch": old_epoch, "new_controller": cluster.store.get_controller(),
            "new_epoch": cluster.store.get_controller_epoch()[0],
            "elected_s": t_elected - t_kill, "serving_s": t_serving - t_kill}


def _answers(ray, actor) -> bool:
    try:
        ray.get(actor.info.remote(), timeout=5)
        return True
    except Exception:      # noqa: BLE001 - still restarting
        return False


# -- controlled shutdown ---------------------------------------------------------------------------
def controlled_shutdown_size(cluster, led: int, runs: int, timeout_s: float) -> list[dict]:
    """Grow the partitions to 3×led (new topic), then one controlled shutdown per run."""
    store, admin = cluster.store, cluster.admin()
    have = sum(len(store.get_topic_assignment(t).partitions) for t in store.get_topics()
               if t.startswith("cs-"))
    more = 3 * led - have
    t0 = time.monotonic()
    if more > 0:
        admin.create_topic(f"cs-{3 * led}", more, 3, {"min.insync.replicas": 2},
                           timeout_s=timeout_s)
    create_s = time.monotonic() - t0
    out = []
    for i in range(runs):
        broker = cluster.facts["brokers"][i % 3]
        t0 = time.monotonic()
        wait_healed(cluster, timeout_s)
        leads = balance_leaders(cluster, timeout_s)
        heal_s = time.monotonic() - t0
        r = cluster.restart_broker(broker, timeout_s)
        if not r["completed"]:
            raise RuntimeError(f"controlled shutdown of broker {broker} did not complete: {r}")
        out.append({**r, "partitions_led": leads.get(broker, 0), "heal_before_s": heal_s,
                    "create_s": create_s})
        print(f"# controlled shutdown, broker {broker} leading {leads.get(broker, 0)}: "
              f"{r['controlled_shutdown_s']:.3f} s (restart {r['restart_s']:.1f} s, "
              f"heal {heal_s:.1f} s)", file=sys.stderr)
    return out


# -- controller failover (controller_bench) ----------------------------------------------------------
def controller_failover(sizes, runs: int, timeout_s: float) -> dict[int, list[dict]]:
    from bench import controller_bench
    out = {}
    for n in sizes:
        zk = controller_bench.ZooKeeperServer(tick_time_ms=200, heap_mb=1024).start()
        try:
            out[n] = [controller_bench.run_once(zk, n, timeout_s) for _ in range(runs)]
        finally:
            zk.stop()
        print(f"# controller failover, {n} partitions: "
              f"{[r['failover_s'] for r in out[n]]}", file=sys.stderr)
    return out


# -- the suite protocol ------------------------------------------------------------------------------
def run(quick: bool = False, runs: int = 3, cs_sizes=None, cf_sizes=None,
        timeout_s: float = 600.0) -> dict:
    import ray

    import rayka
    cs_sizes = list(cs_sizes or (CS_QUICK if quick else CS_SIZES))
    cf_sizes = list(cf_sizes if cf_sizes is not None else (CF_QUICK if quick else CF_SIZES))
    t_all = time.monotonic()
    # a broker holds every partition of every cs topic (3×max led) plus the small topics
    limits = init_ray(FDS_PER_REPLICA * 3 * max(cs_sizes) + FD_BASELINE)
    data_dir = tempfile.mkdtemp(prefix="rayka-failover-")
    kills: dict[str, list[dict]] = {"restart": [], "no_restart": [], "pause": []}
    ctl: list[dict] = []
    cs: dict[int, list[dict]] = {}
    skipped: dict[str, str] = {}
    procs_after = None
    cluster = None
    try:
        cluster = rayka.start_local(name=f"fo{uuid.uuid4().hex[:6]}", brokers=3, controllers=2,
                                    data_dir=data_dir)
        cluster.admin().create_topic(KILL_TOPIC, 3, 3, {"min.insync.replicas": 2},
                                     timeout_s=timeout_s)
        for i in range(runs):
            for fault in kills:
                r = broker_kill_once(cluster, fault, timeout_s)
                kills[fault].append(r)
                print(f"# broker {fault} run {i + 1}: first ack {r['first_ack_s']:.3f} s",
                      file=sys.stderr)
            r = controller_kill_once(cluster, i, timeout_s)
            ctl.append(r)
            print(f"# controller kill run {i + 1}: elected {r['elected_s']:.3f} s, serving "
                  f"{r['serving_s']:.3f} s", file=sys.stderr)
        for led in sorted(cs_sizes):
            # not lowered: a broker of 3×led replicas needs their open files (LRU-capped)
            short = fd_shortfall(segment_fds(3 * led) + FD_BASELINE, limits)
            if short:
                skipped[f"controlled_shutdown.{led}"] = short
                print(f"# controlled shutdown, {led} led: skipped: {short}", file=sys.stderr)
                continue
            cs[led] = controlled_shutdown_size(cluster, led, runs, timeout_s)
        procs_after = broker_process_facts(cluster)
    finally:
        if cluster is not None:
            cluster.shutdown()
        ray.shutdown()
        shutil.rmtree(data_dir, ignore_errors=True)
    cf = controller_failover(cf_sizes, runs, timeout_s)

    figures = [
        figure("failover.broker_kill.first_ack_s", "s",
               [r["first_ack_s"] for r in kills["restart"]], target=2.0, better="lower"),
        figure("failover.broker_kill_no_restart.first_ack_s", "s",
               [r["first_ack_s"] for r in kills["no_restart"]], target=None, better="lower"),
        figure("failover.leader_paused.first_ack_s", "s",
               [r["first_ack_s"] for r in kills["pause"]], target=6.0, better="lower"),
        figure("failover.controller_kill.serving_s", "s", [r["serving_s"] for r in ctl],
               target=2.0, better="lower"),
    ]
    for led in cs_sizes:     # a skipped size: no samples, its reason in extra.skipped
        figures.append(figure("failover.controlled_shutdown_s", "s",
                              [r["controlled_shutdown_s"] for r in cs.get(led, [])],
                              target=1.0 if led == 1_000 else None, better="lower",
                              partitions_led=led))
    for n in cf_sizes:
        figures.append(figure("failover.controller_failover_s", "s",
                              [r["failover_s"] for r in cf[n]],
                              target=5.0 if n == 10_000 else None, better="lower", partitions=n))
    return {"bench": NAME,
            "setup": {"brokers": 3, "controllers": 2, "replication_factor": 3,
                      "min_insync_replicas": 2, "zk_session_timeout_ms": 3000,
                      "kill_topic_partitions": 3, "controlled_shutdown_led": cs_sizes,
                      "controller_failover_partitions": cf_sizes, "runs": runs, "quick": quick,
                      "reused": "one Ray instance and ONE rayka cluster for the broker kills, "
                                "controller kills and controlled shutdowns (healed before each "
                                "run: brokers back, ISRs full, preferred leaders); controlled-"
                                "shutdown sizes grow on it by adding topics; controller_bench "
                                "runs on its own ZooKeeper per size",
                      "fd_limit": limits, "machine": machine_facts()},
            "figures": figures,
            "extra": {"broker_kill": kills, "controller_kill": ctl,
                      "controlled_shutdown": {str(k): v for k, v in cs.items()},
                      "controller_failover": {str(k): v for k, v in cf.items()},
                      "brokers_at_end": procs_after, "skipped": skipped,
                      "total_s": round(time.monotonic() - t_all, 1)}}


def main(argv=None) -> dict:
    ap = arg_parser(__doc__, DEFAULT_OUT,
                    "controlled shutdown and controller failover at 100 and 1,000")
    ap.add_argument("--cs-sizes", default=None, help="partitions led, comma-separated")
    ap.add_argument("--cf-sizes", default=None, help="controller_bench partitions, comma-separated")
    ap.add_argument("--timeout", type=float, default=600.0, help="per wait, seconds")
    args = ap.parse_args(argv)
    ints = lambda s: [int(x) for x in s.split(",")] if s else None  # noqa: E731
    report = run(quick=args.quick, runs=args.runs, cs_sizes=ints(args.cs_sizes),
                 cf_sizes=ints(args.cf_sizes), timeout_s=args.timeout)
    return emit(report, args.out)


if __name__ == "__main__":
    main()
