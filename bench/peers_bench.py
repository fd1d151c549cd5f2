"""Peers benchmark: what a Ray user could use instead of rayka, measured on the same machine.

Same record size (100-byte values) as rayka's produce/consume figures. Every figure is
measured over `runs` runs, each on a fresh stream or queue; one sample per run.

NATS JetStream, R3 (Debian `nats-server`, client nats-py, asyncio):
- 3 nats-server processes on 127.0.0.1 with free ports, JetStream on, routed into one
  cluster, file store in a temp dir (one config file per server). Ready = every server's
  monitoring /healthz answers ok and its /jsz names a meta leader (poll with a deadline).
  The servers are stopped by pid (SIGTERM, SIGKILL after a deadline) in a `finally`.
- N: at most NATS_N; a full run first does a warm-up of N/10 (unreported) and lowers N so
  that each phase takes ~RUN_BUDGET_S (the N used is in the figures' params).
- per run: a stream with num_replicas=3, file storage.
  produce: N messages published with `js.publish_async` (at most WINDOW acks outstanding,
  the client's own back-pressure); the clock stops when every ack is in and none failed.
  consume: a pull consumer (AckPolicy.NONE, like a rayka consumer that does not commit),
  `fetch` in batches of FETCH until N messages arrived.
ray.util.queue.Queue (one actor, in memory, NOT replicated: a lower bar than a log):
- put_batch: N distinct 100-byte values via `put_nowait_batch` in chunks of CHUNK (~1 MB
  per actor call); get_batch: `get_nowait_batch(CHUNK)` until all N are back (in order).
- put_per_item: `put()` of N_ITEM values one call each (what per-record code would do).
Values are built before the clock starts, distinct objects (pickle would otherwise send
one value and N references).

Ray: `ray.init(address="local", include_dashboard=False)` unless Ray is already up, in
which case it is reused and not shut down.

    .venv/bin/python bench/peers_bench.py [--quick] [--runs 3] [--out bench/out/peers.json]
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import arg_parser, emit, figure, machine_facts  # noqa: E402
from controller.zookeeper.server import free_ports  # noqa: E402

RECORD_BYTES = 100
NATS_N, QUEUE_N, QUEUE_ITEM_N = 200_000, 1_000_000, 20_000
WINDOW = 4_000          # outstanding publish acks (nats-py's publish_async default)
FETCH = 5_000           # messages per pull request
CHUNK = 10_000          # queue values per actor call: ~1 MB, Ray's efficient call size
RUN_BUDGET_S = 12.0     # NATS: target seconds per phase of a run (adaptive N, see bench_nats)
NATS_BIN = shutil.which("nats-server") or "/usr/sbin/nats-server"   # Debian installs it in sbin
DEFAULT_OUT = ROOT / "bench" / "out" / "peers.json"


def values(n: int) -> list[bytes]:
    """n distinct RECORD_BYTES-byte values (distinct objects: no pickle memo shortcut)."""
    return [(b"%010d" % i).ljust(RECORD_BYTES, b"v") for i in range(n)]


def wait_for(predicate, timeout_s: float, what: str, poll_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    last_exc = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # not up yet: remember why, for the timeout message
            last_exc = exc
        time.sleep(poll_s)
    raise TimeoutError(f"timed out after {timeout_s} s waiting for {what} (last error: {last_exc!r})")


# ---------------------------------------------------------------- NATS cluster


def nats_server_version() -> str | None:
    try:
        out = subprocess.run([NATS_BIN, "--version"], capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


class NatsCluster:
    """Three routed nats-server processes with JetStream, on loopback, in a temp dir."""

    def __init__(self, size: int = 3, start_timeout_s: float = 30.0):
        self.size, self.start_timeout_s = size, start_timeout_s
        self.dir = Path(tempfile.mkdtemp(prefix="rayka-peers-nats-"))
        ports = free_ports(3 * size)
        self.client_ports = ports[:size]
        self.cluster_ports = ports[size:2 * size]
        self.http_ports = ports[2 * size:]
        self.procs: list[subprocess.Popen] = []

    @property
    def urls(self) -> list[str]:
        return [f"nats://127.0.0.1:{p}" for p in self.client_ports]

    def _config(self, i: int) -> str:
        routes = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in self.cluster_ports)
        store = self.dir / f"n{i}" / "js"
        return (f'server_name: "n{i}"\n'
                f'listen: "127.0.0.1:{self.client_ports[i]}"\n'
                f'http: "127.0.0.1:{self.http_ports[i]}"\n'
                f'jetstream {{\n  store_dir: "{store}"\n  max_memory_store: 256MB\n'
                f'  max_file_store: 8GB\n}}\n'
                f'cluster {{\n  name: "rayka-bench"\n'
                f'  listen: "127.0.0.1:{self.cluster_ports[i]}"\n'
                f'  routes: [{routes}]\n}}\n')

    def start(self) -> "NatsCluster":
        if not os.path.exists(NATS_BIN):
            raise RuntimeError(f"{NATS_BIN} is missing: apt-get install nats-server")
        for i in range(self.size):
            conf = self.dir / f"n{i}.conf"
            conf.write_text(self._config(i))
            log = open(self.dir / f"n{i}.log", "wb")
            # own session: a Ctrl-C to the bench does not hit the servers mid-teardown
            self.procs.append(subprocess.Popen([NATS_BIN, "-c", str(conf)], stdin=subprocess.DEVNULL,
                                               stdout=log, stderr=subprocess.STDOUT,
                                               start_new_session=True))
            log.close()
        wait_for(self._ready, self.start_timeout_s, "the NATS cluster (healthz + JetStream meta leader)",
                 poll_s=0.1)
        return self

    def _ready(self) -> bool:
        for i, port in enumerate(self.http_ports):
            if self.procs[i].poll() is not None:
                raise RuntimeError(f"nats-server n{i} exited with {self.procs[i].returncode}: "
                                   + self.log_tail(i))
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                if json.load(r).get("status") != "ok":
                    return False
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/jsz", timeout=2) as r:
                meta = json.load(r).get("meta_cluster") or {}
            if not meta.get("leader") or meta.get("cluster_size", 0) < self.size:
                return False
        return True

    def log_tail(self, i: int, lines: int = 20) -> str:
        try:
            return "\n".join((self.dir / f"n{i}.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout_s: float = 10.0) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)


async def _nats_run(urls: list[str], run: int, payloads: list[bytes], timeout_s: float) -> tuple[float, float]:
    """One fresh R3 stream: (produce records/s, consume records/s)."""
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig

    n = len(payloads)
    tag = "warmup" if run < 0 else str(run)
    name, subject = f"BENCH_{tag}", f"bench.{tag}"
    nc = await nats.connect(servers=urls, connect_timeout=5, max_reconnect_attempts=0)
    try:
        js = nc.jetstream(publish_async_max_pending=WINDOW, timeout=10)
        cfg = StreamConfig(name=name, subjects=[subject], num_replicas=3, storage=StorageType.FILE)
        deadline = time.monotonic() + timeout_s
        while True:  # right after start-up the meta leader may not know every peer yet
            try:
                await js.add_stream(cfg)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

        start = time.perf_counter()
        futures = [await js.publish_async(subject, p) for p in payloads]
        await asyncio.wait_for(js.publish_async_completed(), timeout_s)
        produce_s = time.perf_counter() - start
        failed = [f.exception() for f in futures if f.exception() is not None]
        if failed:
            raise RuntimeError(f"{len(failed)} of {n} publishes failed, first: {failed[0]!r}")
        if futures[-1].result().seq != n:
            raise RuntimeError(f"last ack has seq {futures[-1].result().seq}, expected {n}")
        del futures

        sub = await js.pull_subscribe(subject, durable=f"reader_{tag}", stream=name,
                                      config=ConsumerConfig(ack_policy=AckPolicy.NONE,
                                                            deliver_policy=DeliverPolicy.ALL))
        got, last = 0, None
        start = time.perf_counter()
        while got < n:
            if time.perf_counter() - start > timeout_s:
                raise TimeoutError(f"consumed {got} of {n} in {timeout_s} s")
            msgs = await sub.fetch(min(FETCH, n - got), timeout=5)
            got += len(msgs)
            last = msgs[-1]
        consume_s = time.perf_counter() - start
        if last.data != payloads[-1]:
            raise RuntimeError("last consumed message differs from the last published")
        await sub.unsubscribe()
        await js.delete_stream(name)  # frees the disk before the next run
        return n / produce_s, n / consume_s
    finally:
        await nc.close()


def bench_nats(n: int, runs: int, timeout_s: float, adapt: bool) -> tuple[int, list[float], list[float]]:
    """(records per run, produce samples, consume samples) on one 3-server cluster.

    With `adapt`, a warm-up run of n/10 records (not reported) measures the rate first and
    n shrinks so that each phase of a run takes about RUN_BUDGET_S: the rate is flat in n
    past a few thousand records, and the suite has a 20-minute budget.
    """
    cluster = NatsCluster().start()
    try:
        if adapt:
            p, c = asyncio.run(_nats_run(cluster.urls, -1, values(max(1_000, n // 10)), timeout_s))
            n = max(n // 10, min(n, int(RUN_BUDGET_S * min(p, c)) // 1_000 * 1_000))
            print(f"# nats warm-up: produce {p:,.0f}/s consume {c:,.0f}/s -> {n:,} records per run",
                  file=sys.stderr)
        payloads = values(n)
        produce, consume = [], []
        for run in range(runs):
            p, c = asyncio.run(_nats_run(cluster.urls, run, payloads, timeout_s))
            produce.append(p)
            consume.append(c)
            print(f"# nats run {run}: produce {p:,.0f}/s consume {c:,.0f}/s", file=sys.stderr)
        return n, produce, consume
    finally:
        cluster.stop()


# ---------------------------------------------------------------- ray.util.queue


def _ray_up() -> bool:
    """Initialise Ray unless it is up; True when this module started it (and must stop it)."""
    import ray
    if ray.is_initialized():
        return False
    ray.init(address="local", include_dashboard=False, logging_level="WARNING")
    return True


def bench_queue(n: int, n_item: int, runs: int) -> dict[str, list[float]]:
    import ray
    from ray.util.queue import Queue

    payloads, item_payloads = values(n), values(n_item)
    out: dict[str, list[float]] = {"put_batch": [], "get_batch": [], "put_per_item": []}
    started = _ray_up()
    try:
        for run in range(runs):
            # num_cpus=0: never wait for a CPU slot on a Ray that other work already fills
            q = Queue(actor_options={"num_cpus": 0})
            try:
                start = time.perf_counter()
                for i in range(0, n, CHUNK):
                    q.put_nowait_batch(payloads[i:i + CHUNK])
                out["put_batch"].append(n / (time.perf_counter() - start))
                got, first, last = 0, None, None
                start = time.perf_counter()
                while got < n:
                    batch = q.get_nowait_batch(min(CHUNK, n - got))
                    first = first if first is not None else batch[0]
                    got, last = got + len(batch), batch[-1]
                out["get_batch"].append(n / (time.perf_counter() - start))
                if first != payloads[0] or last != payloads[-1] or q.size() != 0:
                    raise RuntimeError("queue returned values out of order or kept some")

                start = time.perf_counter()
                for v in item_payloads:
                    q.put(v)
                out["put_per_item"].append(n_item / (time.perf_counter() - start))
                if q.size() != n_item:
                    raise RuntimeError(f"queue holds {q.size()} values after {n_item} puts")
            finally:
                q.shutdown(force=True)
            print(f"# ray queue run {run}: " + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in out.items()),
                  file=sys.stderr)
        return out
    finally:
        if started:
            ray.shutdown()


# ---------------------------------------------------------------- protocol


def run(quick: bool = False, runs: int = 3) -> dict:
    scale = 10 if quick else 1
    nats_n, queue_n, item_n = NATS_N // scale, QUEUE_N // scale, QUEUE_ITEM_N // scale
    nats_timeout = 120.0
    t0 = time.monotonic()
    nats_n, produce, consume = bench_nats(nats_n, runs, nats_timeout, adapt=not quick)
    nats_s = time.monotonic() - t0
    t0 = time.monotonic()
    q = bench_queue(queue_n, item_n, runs)
    queue_s = time.monotonic() - t0

    import ray
    try:
        from importlib.metadata import version
        nats_py = version("nats-py")
    except Exception:
        nats_py = None
    common = {"record_bytes": RECORD_BYTES}
    figures = [
        figure("peers.nats_jetstream_r3.produce.records_per_s", "records/s", produce,
               records=nats_n, replicas=3, storage="file", window=WINDOW, **common),
        figure("peers.nats_jetstream_r3.consume.records_per_s", "records/s", consume,
               records=nats_n, replicas=3, fetch_batch=FETCH, **common),
        figure("peers.ray_queue.put_batch.records_per_s", "records/s", q["put_batch"],
               records=queue_n, chunk=CHUNK, **common),
        figure("peers.ray_queue.get_batch.records_per_s", "records/s", q["get_batch"],
               records=queue_n, chunk=CHUNK, **common),
        figure("peers.ray_queue.put_per_item.records_per_s", "records/s", q["put_per_item"],
               records=item_n, **common),
    ]
    return {
        "bench": "peers",
        "setup": {"quick": quick, "runs": runs, "record_bytes": RECORD_BYTES,
                  "nats": {"servers": 3, "stream_replicas": 3, "storage": "file",
                           "records": nats_n, "records_max": NATS_N // scale,
                           "records_adapted": not quick, "publish_window": WINDOW, "fetch_batch": FETCH,
                           "nats_server": nats_server_version(), "nats_py": nats_py},
                  "ray_queue": {"records_batch": queue_n, "records_per_item": item_n,
                                "chunk": CHUNK, "ray": ray.__version__}},
        "figures": figures,
        "extra": {"nats_wall_s": round(nats_s, 2), "ray_queue_wall_s": round(queue_s, 2)},
    }


def main(argv=None) -> dict:
    args = arg_parser(__doc__, DEFAULT_OUT, "N/10 everywhere (smoke run)").parse_args(argv)
    report = run(quick=args.quick, runs=args.runs)
    report["machine"] = machine_facts()
    return emit(report, args.out)


if __name__ == "__main__":
    main()
