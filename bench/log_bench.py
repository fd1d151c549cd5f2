"""Storage benchmark: append and read throughput of one partition's `Log`.

Measures, for 100-byte values in ~1 MiB RecordBatch v2 batches (pre-built, as a producer
would send them):
- append without fsync (page cache; durability comes from replication, as in Kafka), and
  its slowest batch: the 256 MiB segments roll twice in a full run, and a roll's fsyncs
  are done outside the append (replicas/deferred_writes.py; here by the caller, after
  the append that rolled, untimed, as a broker's background thread does),
- append with an fsync after every batch (flush.messages=1 per batch),
- sequential read of the whole log in 1 MiB fetches (bytes, as a broker serves them),
- decode of what was read into records (consumer side, aiokafka's C codec), for context.
Prints one JSON object; with --out also writes it to a file and a PNG bar chart beside it.
Each figure is the median of --repeat runs. `run(quick, runs)` gives the same measures in
the suite protocol (bench/common.py) for bench/run_all.py: log.append.records_per_s (no
fsync, target 2 M/s), log.append_fsync_each_batch, log.read (bytes), log.read_and_decode.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from replicas import records  # noqa: E402
from replicas.log import Log, LogConfig, fsync_files  # noqa: E402

VALUE = 100
BATCH_BYTES = 1 << 20


def make_batches(total_records: int) -> tuple[list[bytes], int]:
    per_batch = BATCH_BYTES // (VALUE + 11)        # ~11 bytes record overhead
    value = b"v" * VALUE
    template = bytes(records.build_batch([value] * per_batch, timestamps_ms=1_700_000_000_000))
    n = max(1, total_records // per_batch)
    return [template] * n, per_batch


def run_append(directory: Path, batches: list[bytes], fsync_each: bool) -> tuple[float, float]:
    """(seconds of the appends, the slowest one's seconds)."""
    shutil.rmtree(directory, ignore_errors=True)
    cfg = LogConfig(segment_bytes=256 << 20, max_message_bytes=2 * BATCH_BYTES,
                    flush_messages=1 if fsync_each else None)
    log = Log(directory, cfg)
    elapsed = worst = 0.0
    for buf in batches:
        t0 = time.perf_counter()
        log.append_as_leader(buf, leader_epoch=0)
        took = time.perf_counter() - t0
        elapsed += took
        worst = max(worst, took)
        rolled = log.take_rolled_flush()
        if rolled is not None:          # the broker's background thread's part
            fsync_files(rolled.paths)
            log.rolled_flushed(rolled)
    log.close()
    return elapsed, worst


def run_read(directory: Path, decode: bool) -> tuple[float, int, int]:
    log = Log(directory, LogConfig(segment_bytes=256 << 20, max_message_bytes=2 * BATCH_BYTES),
              recovery_point=1 << 62)
    offset, end, nbytes, nrecords = 0, log.log_end_offset, 0, 0
    start = time.perf_counter()
    while offset < end:
        data = log.read(offset, BATCH_BYTES)
        nbytes += len(data)
        last = None
        for header in records.iter_headers(data):
            last = header
        if decode:
            nrecords += len(records.decode_records(data))
        offset = last.next_offset
    elapsed = time.perf_counter() - start
    log.close()
    return elapsed, nbytes, nrecords


def measure(base: Path, total_records: int, fsync_records: int, repeat: int) -> dict:
    """Per measure: records, bytes and the seconds of each of `repeat` runs."""
    batches, per_batch = make_batches(total_records)
    fsync_batches = batches[: max(1, fsync_records // per_batch)]
    batch_size = len(batches[0])
    target = base / "bench-0"
    results = {}
    for name, bs, fsync in (("append_fsync_each_batch", fsync_batches, True),
                            ("append_no_fsync", batches, False)):
        runs = [run_append(target, bs, fsync) for _ in range(repeat)]
        results[name] = {"records": len(bs) * per_batch, "bytes": len(bs) * batch_size,
                         "times": [r[0] for r in runs], "worst_batch_s": [r[1] for r in runs]}
    for name, decode in (("read_bytes", False), ("read_and_decode", True)):
        runs = [run_read(target, decode) for _ in range(repeat)]
        results[name] = {"records": len(batches) * per_batch, "bytes": runs[0][1],
                         "times": [r[0] for r in runs]}
    return {"batch_bytes": batch_size, "records_per_batch": per_batch, "results": results}


# suite figure name -> measure; only the no-fsync append has a target (2 M records/s)
FIGURES = {"log.append.records_per_s": "append_no_fsync",
           "log.append_fsync_each_batch.records_per_s": "append_fsync_each_batch",
           "log.read.records_per_s": "read_bytes",
           "log.read_and_decode.records_per_s": "read_and_decode"}
TARGET_APPEND = 2_000_000


def run(quick: bool = False, runs: int = 3) -> dict:
    """Suite protocol (bench/common.py): one sample per run for each measure."""
    from bench.common import figure
    records, fsync_records = (500_000, 100_000) if quick else (5_000_000, 1_000_000)
    base = Path(tempfile.mkdtemp(prefix="rayka-logbench-"))
    try:
        m = measure(base, records, fsync_records, runs)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    figures = []
    for fname, key in FIGURES.items():
        r = m["results"][key]
        figures.append(figure(fname, "records/s", [r["records"] / t for t in r["times"]],
                              target=TARGET_APPEND if key == "append_no_fsync" else None,
                              record_bytes=VALUE, records=r["records"]))
    worst = m["results"]["append_no_fsync"]["worst_batch_s"]
    figures.append(figure("log.append.slowest_batch_ms", "ms", [w * 1e3 for w in worst],
                          better="lower", batch_bytes=m["batch_bytes"],
                          segment_bytes=256 << 20))
    return {"bench": "log",
            "setup": {"quick": quick, "runs": runs, "value_bytes": VALUE,
                      "batch_bytes": m["batch_bytes"], "records_per_batch": m["records_per_batch"]},
            "figures": figures,
            "extra": {key: {"mb_per_s_median": round(r["bytes"] / statistics.median(r["times"]) / 1e6, 1)}
                      for key, r in m["results"].items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--fsync-records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="write JSON here (+ .png)")
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="rayka-logbench-", dir=args.dir))
    try:
        m = measure(base, args.records, args.fsync_records, args.repeat)
        results = {}
        for name, r in m["results"].items():
            t = statistics.median(r["times"])
            results[name] = {"records": r["records"], "seconds": round(t, 4),
                             "records_per_s": round(r["records"] / t),
                             "mb_per_s": round(r["bytes"] / t / 1e6, 1)}
            if "worst_batch_s" in r:
                results[name]["slowest_batch_ms"] = round(
                    statistics.median(r["worst_batch_s"]) * 1e3, 2)
        report = {
            "benchmark": "log_bench",
            "value_bytes": VALUE, "batch_bytes": m["batch_bytes"],
            "records_per_batch": m["records_per_batch"],
            "repeat": args.repeat, "machine": {"cpus": os.cpu_count(),
                                                "python": platform.python_version()},
            "target_append_no_fsync_records_per_s": TARGET_APPEND,
            "results": results,
        }
        print(json.dumps(report, indent=2))
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(report, indent=2) + "\n")
            plot(report, args.out.with_suffix(".png"))
    finally:
        shutil.rmtree(base, ignore_errors=True)


def plot(report: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["results"])
    rates = [report["results"][n]["records_per_s"] / 1e6 for n in names]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    bars = ax.barh(names, rates, color="#3b6ea5")
    ax.axvline(report["target_append_no_fsync_records_per_s"] / 1e6, color="#c0392b", ls="--",
               label="append target (2 M rec/s)")
    ax.bar_label(bars, fmt="%.1f M/s", padding=3)
    ax.set_xlabel("million records / s (100-byte values, ~1 MiB batches)")
    ax.set_title("rayka Log: one partition, one core")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
