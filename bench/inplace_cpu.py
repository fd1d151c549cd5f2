"""Where rayka's brokers spend their CPU, measured in place: the thread CPU spent inside
chosen entry points of three in-process brokers (tests/broker_world.py: one process, a real
ZooKeeper) while a paced librdkafka producer and consumer in a subprocess
(bench/wire_bench.py latency_once) load them. No sampling profiler's inflation: a py-spy or
cProfile run of the same world slows every step several times over.

Rules:
1. An entry point is `module:Class:method`, or `module:-:function` for a module function
   (wrapped where the module holds it: callers that imported it by name before the wrap
   keep the bare one). `Meter.wrap` replaces it by a wrapper that adds the calling
   thread's CPU inside it (`time.thread_time`) to the entry's label, once per outermost
   call on a thread: a recursive or re-entrant call is not counted twice. A callee wrapped
   too counts under both labels, so the rows do not add up.
2. Per run (`--runs`, each `--duration` s at `--rate` records/s, linger.ms `--linger`, on a
   topic of 6 partitions, RF 3, min.insync.replicas 2): the process's user and system CPU
   over the subprocess's run per record sent per broker, and per label its CPU per record
   per broker, its calls per record per broker and its CPU per call, in µs.
3. Out: one JSON object per run on stdout, all of them in `--out` if given.

Example: `.venv/bin/python bench/inplace_cpu.py --rate 200 --runs 3` (the entries of
DEFAULT_ENTRIES; `--wrap module:Class:method` adds one).
"""

from __future__ import annotations

import argparse
import collections
import importlib
import inspect
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_ENTRIES = (
    "actors.broker:Broker:produce_begin",
    "actors.broker:Broker:fetch_begin",
    "actors.purgatory:FetchPurgatory:changed",
    "actors.timers:Timers:add",
    "protocol.connection:Connection:next_request",
    "protocol.connection:Connection:respond",
    "replicas.replica_manager:ReplicaManager:append",
    "replicas.replica_manager:ReplicaManager:tick",
    "replicas.follower_side:FollowerSide:append_as_follower",
    "replicas.producer_log:ProducerLog:append_as_leader",
    "replicas.log:Log:append_as_leader",
    "replicas.log:Log:append_as_follower",
    "replicas.segment:Segment:append",
)
PARTITIONS = 6


class Meter:
    """Thread CPU inside wrapped entry points (rule 1); `clock` is a thread CPU clock in
    seconds (tests pass their own)."""

    def __init__(self, clock=time.thread_time):
        self.clock = clock
        self.cpu_s: collections.Counter = collections.Counter()
        self.calls: collections.Counter = collections.Counter()
        self._inside = threading.local()

    def wrap(self, owner, name: str, label: str) -> None:
        """Replace `owner.name` (a class's method or a module's function) by its meter."""
        raw = inspect.getattr_static(owner, name)     # a staticmethod as itself
        static = isinstance(raw, staticmethod)
        fn = raw.__func__ if static else raw
        meter = self

        def metered(*args, **kwargs):
            inside = meter._inside.__dict__
            if inside.get(label):
                return fn(*args, **kwargs)
            inside[label] = True
            t0 = meter.clock()
            try:
                return fn(*args, **kwargs)
            finally:
                meter.cpu_s[label] += meter.clock() - t0
                meter.calls[label] += 1
                inside[label] = False
        setattr(owner, name, staticmethod(metered) if static else metered)

    def wrap_spec(self, spec: str) -> str:
        """Wrap `module:Class:method` or `module:-:function`; returns its label."""
        owner, name, label = resolve(spec)
        self.wrap(owner, name, label)
        return label

    def reset(self) -> None:
        self.cpu_s.clear()
        self.calls.clear()

    def rows(self, units: int) -> dict:
        """label → {us_per_unit, calls_per_unit, us_per_call} over `units` (records x
        brokers)."""
        return {label: {"us_per_unit": round(cpu / units * 1e6, 1),
                        "calls_per_unit": round(self.calls[label] / units, 3),
                        "us_per_call": round(cpu / max(self.calls[label], 1) * 1e6, 1)}
                for label, cpu in sorted(self.cpu_s.items())}


def resolve(spec: str) -> tuple:
    """(owner, name, label) of `module:Class:method` or `module:-:function`; ValueError if
    the owner has no such callable."""
    module, owner_name, name = spec.split(":")
    mod = importlib.import_module(module)
    owner = mod if owner_name == "-" else getattr(mod, owner_name)
    if not callable(getattr(owner, name, None)):
        raise ValueError(f"{spec}: no such callable")
    short = module.rsplit(".", 1)[-1]
    return owner, name, f"{short}.{name}" if owner_name == "-" else f"{short}.{owner_name}.{name}"


def _load_code(bootstrap: str, topic: str, rate: int, duration_s: float, linger_ms: float) -> str:
    return ("import json, sys; sys.path.insert(0, %r); from bench.wire_bench import "
            "latency_once; import numpy as np; r = latency_once(%r, %r, %d, %r, %r); "
            "print(json.dumps({'sent': r['sent'], 'ack_p50_ms': float(np.percentile("
            "r['ack_ms'], 50)), 'ack_p99_ms': float(np.percentile(r['ack_ms'], 99))}))"
            % (str(ROOT), bootstrap, topic, rate, duration_s, linger_ms))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, default=200)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--linger", type=float, default=0.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--wrap", action="append", default=[], metavar="MODULE:CLASS:METHOD")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)

    meter = Meter()
    for spec in DEFAULT_ENTRIES + tuple(a.wrap):
        meter.wrap_spec(spec)

    from controller.zookeeper.server import ZooKeeperServer
    from tests.broker_world import InProcessCluster

    tmp = Path(tempfile.mkdtemp(prefix="rayka-inplace-"))
    zk = ZooKeeperServer(data_dir=tmp / "zk").start()
    world = InProcessCluster(zk.connect_string, tmp / "data", broker_ids=(1, 2, 3))
    out = []
    try:
        world.create_topic("inplace", PARTITIONS, 3, {"min.insync.replicas": "2"})
        bootstrap = ",".join(f"127.0.0.1:{world.brokers[b].listeners[0].port}"
                             for b in sorted(world.brokers))
        code = _load_code(bootstrap, "inplace", a.rate, a.duration, a.linger)
        for i in range(a.runs):
            meter.reset()
            c0 = os.times()
            done = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                  text=True, cwd=ROOT, check=True)
            c1 = os.times()
            load = json.loads(done.stdout.strip().splitlines()[-1])
            units = load["sent"] * len(world.brokers)
            run = {"run": i, "rate": a.rate, "linger_ms": a.linger, "duration_s": a.duration,
                   **load,
                   "user_us_per_record_per_broker": round((c1.user - c0.user) / units * 1e6),
                   "system_us_per_record_per_broker":
                       round((c1.system - c0.system) / units * 1e6),
                   "entries": meter.rows(units)}
            print(json.dumps(run), flush=True)
            out.append(run)
    finally:
        world.close()
        zk.stop()
    if a.out:
        a.out.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
