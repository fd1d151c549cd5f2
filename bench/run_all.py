"""The benchmark suite behind `make bench`: every bench of SUITE, one JSON, PNG plots, a summary.

This module is the command line and the runner; the report's figures, targets and ratios
are bench/report.py, the PNGs bench/plots.py, the terminal tables bench/summary.py, and
processes are found and stopped by rayka/ops/procs.py.

Rules:
- Each bench is bench/<name>_bench.py exposing `run(quick, runs) -> dict` (bench/common.py).
  It runs in its OWN subprocess (`run_all.py --child <name>`, which writes the result to a
  temp JSON) in its own session, so a crash, a hang or a leaked Ray/ZooKeeper process of
  one bench cannot poison the next. A child past its timeout is stopped with its whole
  process tree (SIGTERM, then SIGKILL): the tree and the child's session are collected
  from /proc and signalled by pid. Processes the child left in its session after a normal
  exit are stopped the same way and named in the report.
- A bench that is missing, crashes, times out or returns a malformed result becomes
  {"error": ...} in the JSON (never silently skipped) and the runner exits 1 at the end.
  Missed targets do not change the exit code: they are reported.
- Output: <out-dir>/<YYYY-MM-DD>[-N].json (bench/report.py) with PNGs beside it
  (bench/plots.py); the summary is printed last (bench/summary.py).
- The whole suite must stay under BUDGET_S (140 min: rayka's own benches ~45, of which the
  console's ~15, the side-by-side run against Apache Kafka ~85, of which Kafka's three
  10,000-partition runs take ~11 min each, settling its fresh clusters 2.5-4.5 min each
  (bench/settle.py) and the data family's 30 s latency windows ~30); each bench's wall
  time is printed.

    .venv/bin/python bench/run_all.py [--quick] [--runs 3] [--only log,peers] [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import machine_facts  # noqa: E402
from bench.plots import write_plots  # noqa: E402
from bench.report import build_report, results_path  # noqa: E402
from bench.summary import print_summary  # noqa: E402
from rayka.ops.procs import family, stop_pids  # noqa: E402

BENCH_DIR = ROOT / "bench"
SUITE = ["log", "controller", "produce", "wire", "security", "group", "txn", "share", "failover",
         "disk", "scale", "console", "peers", "pipeline", "kafka"]
# Caps, not expectations: a bench past its cap is stopped and reported as an error.
TIMEOUT_S = {"log": 300, "controller": 300, "produce": 600, "wire": 600, "security": 600,
             "group": 600, "txn": 300, "share": 900, "failover": 600, "scale": 900, "peers": 360, "pipeline": 600,
             "kafka": 7200, "disk": 1800, "console": 1800}
DEFAULT_TIMEOUT_S = 300
# rayka's own benches take ~30 min (disk_bench ~10; console_bench ~15 more: 3 runs of 100, 1,000
# and 10,000 partitions, two 30 s windows each); the side-by-side one (bench/kafka_bench.py) runs every
# workload on both systems, runs alternating: Kafka's failovers wait out its 18 s ZooKeeper
# sessions, its producer at 10,000 partitions takes ~9 min a run, and each fresh Kafka settles
# for up to 10 min (bench/settle.py; 2.5-4.5 measured)
BUDGET_S = 140 * 60


# ---------------------------------------------------------------- the runner


def validate_result(result, name: str) -> str | None:
    """Why `result` breaks the protocol, or None when it is well formed."""
    if not isinstance(result, dict):
        return f"run() returned {type(result).__name__}, not dict"
    if "error" in result:
        return None
    figures = result.get("figures")
    if not isinstance(figures, list):
        return "result has no 'figures' list"
    for f in figures:
        missing = [k for k in ("name", "unit", "samples", "median", "min", "max") if not isinstance(f, dict)
                   or k not in f]
        if missing:
            return f"figure {f.get('name') if isinstance(f, dict) else f!r} lacks {missing}"
    return None


def run_bench(name: str, quick: bool, runs: int, timeout_s: float, bench_dir: Path = BENCH_DIR,
              echo=print) -> dict:
    """Run one bench in a child process; its result, or {"error": ...}."""
    path = bench_dir / f"{name}_bench.py"
    if not path.exists():
        return {"error": f"{path.relative_to(bench_dir.parent)} does not exist"}
    fd, out = tempfile.mkstemp(prefix=f"rayka-bench-{name}-", suffix=".json")
    os.close(fd)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--runs", str(runs),
           "--child-out", out, "--bench-dir", str(bench_dir)] + (["--quick"] if quick else [])
    tail: collections.deque = collections.deque(maxlen=40)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace",
                            start_new_session=True)

    def pump():  # echo the child's output live (progress) and keep the tail for errors
        for line in proc.stdout:
            tail.append(line.rstrip("\n"))
            echo(f"  [{name}] {line.rstrip()}")

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    result: dict
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        killed = stop_pids(family(proc.pid))
        proc.wait(10)
        reader.join(5)
        os.unlink(out)
        return {"error": f"timed out after {timeout_s:g} s; stopped pids {killed}",
                "output_tail": list(tail)}
    except BaseException:  # Ctrl-C: take the child's tree down with us
        stop_pids(family(proc.pid), grace_s=5)
        raise
    reader.join(5)
    leaked = stop_pids(family(proc.pid))        # the child exited: whatever is left leaked
    try:
        text = Path(out).read_text()
        result = json.loads(text) if text.strip() else None
    except (OSError, ValueError) as exc:
        result = {"error": f"unreadable result: {exc}"}
    finally:
        os.unlink(out)
    if result is None:
        result = {"error": f"child exited with {proc.returncode} and wrote no result"}
    elif "error" not in result and proc.returncode != 0:
        result = {"error": f"child exited with {proc.returncode}"}
    elif (why := validate_result(result, name)) is not None:
        result = {"error": f"malformed result: {why}"}
    if "error" in result:
        result.setdefault("output_tail", list(tail))
    if leaked:
        result["leaked_pids_stopped"] = leaked
    return result


def child_main(name: str, quick: bool, runs: int, out: Path, bench_dir: Path) -> int:
    """In the child: import bench/<name>_bench.py, run it, write its dict to `out`."""
    try:
        path = bench_dir / f"{name}_bench.py"
        spec = importlib.util.spec_from_file_location(f"bench.{name}_bench", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        result = module.run(quick=quick, runs=runs)
        out.write_text(json.dumps(result, default=str))
        return 0
    except BaseException as exc:  # noqa: BLE001 - everything becomes the bench's error entry
        out.write_text(json.dumps({"error": f"{type(exc).__name__}: {exc}",
                                   "traceback": traceback.format_exc()}))
        traceback.print_exc()
        return 1


# ---------------------------------------------------------------- main


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run), passed to every bench")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default=None, help="comma-separated subset of " + ",".join(SUITE))
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per bench (default: per bench)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--bench-dir", type=Path, default=BENCH_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args.child, args.quick, args.runs, args.child_out, args.bench_dir)

    names = SUITE if not args.only else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in SUITE]
    if unknown:
        parser.error(f"unknown bench(es) {unknown}; the suite is {SUITE}")
    timeouts = {n: args.timeout or TIMEOUT_S.get(n, DEFAULT_TIMEOUT_S) for n in names}

    start, load_at_start = time.monotonic(), os.getloadavg()
    benches, wall = {}, {}
    for name in names:
        print(f"== {name}: bench/{name}_bench.py (timeout {timeouts[name]:g} s)", flush=True)
        t0 = time.monotonic()
        benches[name] = run_bench(name, args.quick, args.runs, timeouts[name], args.bench_dir)
        wall[name] = time.monotonic() - t0
        status = f"ERROR: {str(benches[name]['error']).splitlines()[0]}" if "error" in benches[name] else "ok"
        print(f"== {name}: {wall[name]:.1f} s, {status}", flush=True)
    today = datetime.date.today()
    machine = machine_facts()
    # a figure counts on a quiet machine: its load beside the figures (1, 5, 15 min)
    machine["load_average"] = {"at_start": [round(x, 2) for x in load_at_start],
                               "at_end": [round(x, 2) for x in os.getloadavg()]}
    total = time.monotonic() - start
    report = build_report(benches, wall, total, machine, today, args.quick, args.runs,
                          budget_s=BUDGET_S)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    json_path = results_path(args.out_dir, today)
    json_path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    pngs = write_plots(report, json_path)
    print_summary(report, json_path, pngs, timeouts)
    print(f"elapsed {time.monotonic() - start:.1f} s (with plots and summary)")
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
