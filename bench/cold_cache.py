"""What one record's steps cost a broker with its caches warm and with them cold: the
leader's append, its read for a follower, the follower's append and its next Fetch request,
called on three replica managers in one process (tests/replication_harness.py: real logs
in a temporary directory, no sockets), each step timed alone.

Why: in a running cluster at 200 records/s every step costs several times what it costs in
a loop (bench/inplace_cpu.py against a warm cProfile): between two records the other
brokers, the client and the rest of the machine run, and a step finds little of its code
and data in the caches. This bench shows how much of that a cache sweep alone explains.

Rules:
1. A record is one idempotent batch of one 100-byte value, appended with acks=all on the
   leader (broker 1), then read for each follower (2 and 3), appended by it, and its next
   request (a session plan of that partition among `--quiet` others, written as bytes and
   framed by a client connection) made; the followers fetch once more so the HW moves.
2. Modes: `warm` (nothing between the steps) and `cold` (before each timed step, every
   cache line of a `--sweep-mib` MiB buffer written: 64 MiB by default, twice this
   machine's 32 MiB L3); a `floor` step, the least an append can do (parse the header,
   check the CRC, pwrite, five fields), is timed in both modes as the yardstick.
3. Per run (`--records` records per mode after `--warmup`): each step's p50 in µs per
   mode and cold/warm; `--runs` runs, the median and min–max of each over the runs.
   Out: JSON on stdout (and in `--out`), with the machine's caches and load average.

Example: `.venv/bin/python bench/cold_cache.py --runs 3`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import crc32c
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from actors.fetcher import FETCH, FETCH_VERSION  # noqa: E402
from protocol.client import ClientConnection, EncodedRequest  # noqa: E402
from protocol.fetch_session import FetchData, FetchSessionHandler  # noqa: E402
from protocol.hot_writers import fetch_plan_bytes  # noqa: E402
from replicas import records  # noqa: E402
from tests.replication_harness import Cluster  # noqa: E402

STEPS = ("leader_append", "leader_read", "follower_append", "next_request", "floor")
ACKS_ALL = -1
_HEADER = struct.Struct(">qiiBIhiqqqhi")


class Floor:
    """The least an append does: the batch header parsed, its CRC checked, the bytes
    written at the end of a file, five fields kept."""

    def __init__(self, directory: str):
        self.fd = os.open(os.path.join(directory, "floor.log"), os.O_RDWR | os.O_CREAT)
        self.size = self.next_offset = self.epoch = 0
        self.last = b""

    def append(self, buf: bytes) -> None:
        base, length, epoch, _magic, crc, *_ = _HEADER.unpack_from(buf, 0)
        if crc32c.crc32c(memoryview(buf)[21:12 + length]) != crc:
            raise ValueError("crc")
        os.pwrite(self.fd, buf, self.size)
        self.size += len(buf)
        self.next_offset, self.epoch, self.last = base + 1, epoch, buf


class World:
    def __init__(self, directory: str, quiet: int):
        self.cluster = Cluster(Path(directory), hw_checkpoint_interval_ms=5000)
        self.tp = self.cluster.create("cold", config={"min.insync.replicas": "2"})
        self.floor = Floor(directory)
        self.seq = 0
        self.session = FetchSessionHandler()
        self.session.session_id, self.session.epoch = 7, 1
        self.wanted = {("__consumer_offsets", i): FetchData(0, 1, 1, 0, 1 << 20)
                       for i in range(quiet)}
        self.session.held = dict(self.wanted)
        self.conn = ClientConnection("broker-2-fetcher")

    def record(self, timed: dict, sweep) -> None:
        c, tp = self.cluster, self.tp
        leader = c.brokers[1]
        batch = bytes(records.build_batch([b"x" * 100], timestamps_ms=1_000 + self.seq,
                                          producer_id=1000, producer_epoch=0,
                                          base_sequence=self.seq))
        self.seq += 1
        result = _timed(timed, "leader_append", sweep, leader.append, tp, batch, ACKS_ALL,
                        30_000)
        if result.error:
            raise RuntimeError(f"leader append: error {result.error}")
        for b in (2, 3):
            follower = c.brokers[b]
            pos = follower.follower_fetch_request(tp)
            read = _timed(timed, "leader_read", sweep, leader.fetch, tp, pos.fetch_offset,
                          1 << 20, replica_id=b, current_leader_epoch=pos.current_leader_epoch,
                          last_fetched_epoch=pos.last_fetched_epoch,
                          log_start_offset=follower.log(tp).log_start_offset)
            c.apply(1, read.effects)
            if not read.records:
                raise RuntimeError("the leader's read for a follower returned nothing")
            effects = _timed(timed, "follower_append", sweep, follower.append_as_follower, tp,
                             read.records, read.high_watermark, fetch_offset=pos.fetch_offset,
                             leader_epoch=pos.current_leader_epoch,
                             leader_log_start_offset=read.log_start_offset)
            c.apply(b, effects)
            _timed(timed, "next_request", sweep, self.next_request, follower)
        for b in (2, 3):
            c.fetch_once(b, tp)
        floor = bytes(records.build_batch([b"x" * 100], timestamps_ms=1_000,
                                          base_offset=self.floor.next_offset))
        _timed(timed, "floor", sweep, self.floor.append, floor)

    def next_request(self, follower) -> None:
        pos = follower.follower_fetch_request(self.tp)
        self.wanted[self.tp] = FetchData(pos.fetch_offset, pos.current_leader_epoch,
                                         pos.last_fetched_epoch,
                                         follower.log(self.tp).log_start_offset, 1 << 20)
        plan = self.session.build(self.wanted, {self.tp})
        self.conn.request(EncodedRequest(FETCH, FETCH_VERSION,
                                         fetch_plan_bytes(plan, 2, 500, 1, 10 << 20)))
        self.session.on_response(plan, 0, plan.session_id)


def _timed(timed: dict, step: str, sweep, fn, *args, **kw):
    if sweep is not None:
        np.add(sweep, 1.0, out=sweep)        # every cache line of the sweep written
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    timed[step].append(time.perf_counter() - t0)
    return out


def run_once(n: int, warmup: int, sweep_mib: int, quiet: int) -> dict:
    sweep = np.zeros((sweep_mib << 20) // 8)
    with tempfile.TemporaryDirectory(prefix="rayka-cold-") as d:
        world = World(d, quiet)
        for _ in range(warmup):
            world.record({s: [] for s in STEPS}, None)
        out = {}
        for mode in ("warm", "cold"):
            timed = {s: [] for s in STEPS}
            for _ in range(n):
                world.record(timed, sweep if mode == "cold" else None)
            out[mode] = {s: round(float(np.median(v)) * 1e6, 1) for s, v in timed.items()}
        out["cold_over_warm"] = {s: round(out["cold"][s] / out["warm"][s], 1) for s in STEPS}
        return out


def summary(runs: list[dict]) -> dict:
    """Per mode and step: the median over the runs and its min–max."""
    out = {}
    for mode in ("warm", "cold", "cold_over_warm"):
        out[mode] = {}
        for s in STEPS:
            values = [r[mode][s] for r in runs]
            out[mode][s] = {"median": statistics.median(values), "min": min(values),
                            "max": max(values)}
    return out


def machine() -> dict:
    caches = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
    return {"caches": [ln.split(":", 1)[0].strip() + ": " + ln.split(":", 1)[1].strip()
                       for ln in caches if "cache" in ln.lower()],
            "loadavg": os.getloadavg()}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--sweep-mib", type=int, default=64)
    ap.add_argument("--quiet", type=int, default=16, help="other partitions in the session")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    before = machine()
    runs = [run_once(args.records, args.warmup, args.sweep_mib, args.quiet)
            for _ in range(args.runs)]
    result = {"bench": "cold_cache", "records": args.records, "sweep_mib": args.sweep_mib,
              "quiet_partitions": args.quiet, "machine": before, "runs": runs,
              "summary": summary(runs), "loadavg_after": os.getloadavg()}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return result


if __name__ == "__main__":
    main()
