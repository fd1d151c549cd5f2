"""The benchmark suite behind `make bench`: every bench of SUITE, one JSON, PNG plots, a summary.

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
- Output: <out-dir>/<YYYY-MM-DD>[-N].json with date, machine, total_s, benches, wall_s,
  targets (every figure with a target: median/min/max/target/met) and ratios (rayka vs the
  peers of bench/peers_bench.py, median over median); PNGs beside it: <stem>-bench-<name>.png
  per bench, <stem>-peers.png rayka vs peers, and <stem>-latency.png (percentiles per rate)
  when figures named latency.* exist.
- The whole suite must stay under BUDGET_S (20 min); each bench's wall time is printed.

    .venv/bin/python bench/run_all.py [--quick] [--runs 3] [--only log,peers] [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import importlib.util
import json
import math
import os
import re
import signal
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

BENCH_DIR = ROOT / "bench"
SUITE = ["log", "controller", "produce", "wire", "security", "group", "failover", "scale", "peers",
         "pipeline"]
# Caps, not expectations: a bench past its cap is stopped and reported as an error.
TIMEOUT_S = {"log": 300, "controller": 300, "produce": 600, "wire": 600, "security": 600,
             "group": 600, "failover": 600, "scale": 900, "peers": 360, "pipeline": 600}
DEFAULT_TIMEOUT_S = 300
BUDGET_S = 20 * 60

RAYKA_PRODUCE = "produce.acks_all.rf3.bulk.100B.records_per_s"
RAYKA_CONSUME = "consume.rf3.100B.records_per_s"
NATS_PRODUCE = "peers.nats_jetstream_r3.produce.records_per_s"
NATS_CONSUME = "peers.nats_jetstream_r3.consume.records_per_s"
QUEUE_PUT = "peers.ray_queue.put_batch.records_per_s"
QUEUE_PUT_ITEM = "peers.ray_queue.put_per_item.records_per_s"
QUEUE_GET = "peers.ray_queue.get_batch.records_per_s"
# (ratio name, rayka figure, peer figure, target): the target is >= 10x JetStream
RATIOS = [("produce_vs_nats_jetstream_r3", RAYKA_PRODUCE, NATS_PRODUCE, 10.0),
          ("produce_vs_ray_queue_put_batch", RAYKA_PRODUCE, QUEUE_PUT, None),
          ("consume_vs_nats_jetstream_r3", RAYKA_CONSUME, NATS_CONSUME, 10.0),
          ("consume_vs_ray_queue_get_batch", RAYKA_CONSUME, QUEUE_GET, None)]


# ---------------------------------------------------------------- aggregation (pure)


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


def ok_figures(benches: dict):
    """(bench name, figure) for every figure of every bench that did not fail."""
    for bench, result in benches.items():
        if isinstance(result, dict) and "error" not in result:
            for f in result.get("figures", []):
                yield bench, f


def figure_label(fig: dict, siblings: list[dict]) -> str:
    """The figure's name, plus the params that tell it apart from same-named siblings."""
    same = [s for s in siblings if s["name"] == fig["name"]]
    if len(same) < 2:
        return fig["name"]
    params = fig.get("params") or {}
    varying = [k for k in sorted(params)
               if len({json.dumps((s.get("params") or {}).get(k), sort_keys=True) for s in same}) > 1]
    return fig["name"] + "[" + ",".join(f"{k}={params[k]}" for k in varying) + "]"


def target_table(benches: dict) -> list[dict]:
    """Every figure that has a target, flat: one row each."""
    rows = []
    for bench, result in benches.items():
        if not isinstance(result, dict) or "error" in result:
            continue
        figures = result.get("figures", [])
        for f in figures:
            if f.get("target") is None:
                continue
            met = f.get("met")
            if met is None and f.get("median") is not None:
                met = f["median"] >= f["target"] if f.get("better", "higher") == "higher" \
                    else f["median"] <= f["target"]
            rows.append({"bench": bench, "name": f["name"], "label": figure_label(f, figures),
                         "params": f.get("params") or {}, "unit": f.get("unit"),
                         "median": f.get("median"), "min": f.get("min"), "max": f.get("max"),
                         "target": f["target"], "better": f.get("better", "higher"), "met": met})
    return rows


def find_figure(benches: dict, name: str) -> dict | None:
    """The first figure called `name` in a bench that did not fail."""
    for _, f in ok_figures(benches):
        if f["name"] == name:
            return f
    return None


def compute_ratios(benches: dict) -> list[dict]:
    """rayka / peer for each of RATIOS, from medians (and the worst case min/max)."""
    out = []
    for rname, num, den, target in RATIOS:
        a, b = find_figure(benches, num), find_figure(benches, den)
        row = {"name": rname, "rayka": num, "peer": den, "target": target,
               "rayka_median": a and a.get("median"), "peer_median": b and b.get("median"),
               "ratio": None, "ratio_worst": None, "met": None}
        missing = [n for n, f in ((num, a), (den, b)) if not f or not f.get("median")]
        if missing:
            row["missing"] = missing
        else:
            row["ratio"] = a["median"] / b["median"]
            row["ratio_worst"] = a["min"] / b["max"] if a.get("min") and b.get("max") else None
            if target is not None:
                row["met"] = row["ratio"] >= target
        out.append(row)
    return out


def failed(benches: dict) -> list[str]:
    return [n for n, r in benches.items() if not isinstance(r, dict) or "error" in r]


def results_path(out_dir: Path, today: datetime.date) -> Path:
    """<out_dir>/<date>.json, or <date>-2.json, -3... when taken."""
    stem = today.isoformat()
    path, n = out_dir / f"{stem}.json", 1
    while path.exists():
        n += 1
        path = out_dir / f"{stem}-{n}.json"
    return path


def build_report(benches: dict, wall_s: dict, total_s: float, machine: dict, today: datetime.date,
                 quick: bool, runs: int) -> dict:
    return {"date": today.isoformat(), "machine": machine, "total_s": round(total_s, 2),
            "quick": quick, "runs": runs, "budget_s": BUDGET_S,
            "benches": benches, "wall_s": {k: round(v, 2) for k, v in wall_s.items()},
            "targets": target_table(benches), "ratios": compute_ratios(benches),
            "failed": failed(benches)}


# ---------------------------------------------------------------- processes


def _proc_table() -> dict[int, tuple[int, int, int]]:
    """pid -> (ppid, pgid, sid) for every process now visible in /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # the command name may hold spaces
        table[int(entry)] = (int(fields[1]), int(fields[2]), int(fields[3]))
    return table


def family(root: int) -> set[int]:
    """`root`, its descendants, and whatever still sits in its process group or session."""
    table = _proc_table()
    found = {p for p, (_, pgid, sid) in table.items() if pgid == root or sid == root}
    if root in table:
        found.add(root)
    children = collections.defaultdict(list)
    for p, (ppid, _, _) in table.items():
        children[ppid].append(p)
    stack = list(found)
    while stack:
        for c in children.get(stack.pop(), []):
            if c not in found:
                found.add(c)
                stack.append(c)
    found.discard(os.getpid())
    return found


def stop_pids(pids: set[int], grace_s: float = 10.0) -> list[int]:
    """SIGTERM each pid, SIGKILL what is left after `grace_s`; returns the pids signalled."""
    signalled = []
    for p in sorted(pids):
        try:
            os.kill(p, signal.SIGTERM)
            signalled.append(p)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace_s
    alive = set(signalled)
    while alive and time.monotonic() < deadline:
        alive = {p for p in alive if _alive(p)}
        time.sleep(0.1)
    for p in alive:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return signalled


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"   # a zombie is gone already
    except OSError:
        return False


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


# ---------------------------------------------------------------- plots


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _log_scale(values) -> bool:
    vals = [v for v in values if v and v > 0]
    return bool(vals) and max(vals) / min(vals) > 50


def plot_bench(bench: str, result: dict, path: Path) -> bool:
    """Horizontal bars of medians, min/max error bars, a marker at each target; one panel per unit."""
    figures = [f for f in result.get("figures", []) if f.get("median") is not None]
    if not figures:
        return False
    plt = _plt()
    units = list(dict.fromkeys(f["unit"] for f in figures))
    heights = [sum(f["unit"] == u for f in figures) for u in units]
    fig, axes = plt.subplots(len(units), 1, squeeze=False,
                             figsize=(9, 1.2 + 0.45 * sum(heights) + 0.6 * len(units)),
                             gridspec_kw={"height_ratios": heights})
    for ax, unit in zip(axes[:, 0], units):
        fs = [f for f in figures if f["unit"] == unit]
        labels = [figure_label(f, figures) + (" (lower is better)" if f.get("better") == "lower" else "")
                  for f in fs]
        med = [f["median"] for f in fs]
        err = [[m - f["min"] for m, f in zip(med, fs)], [f["max"] - m for m, f in zip(med, fs)]]
        y = range(len(fs))
        ax.barh(y, med, xerr=err, color="#3b6ea5", capsize=3)
        ax.set_yticks(list(y), labels, fontsize=8)
        ax.invert_yaxis()
        for yi, f in zip(y, fs):
            # right of the error bar and the target marker, so the value stays readable
            ax.annotate(f"{_fmt(f['median'])}", (max(f["max"], f.get("target") or 0), yi),
                        textcoords="offset points", xytext=(6, -3), fontsize=7)
            if f.get("target") is not None:
                ax.plot([f["target"]], [yi], marker="|", markersize=18, mew=2,
                        color="#27ae60" if f.get("met") else "#c0392b")
        if _log_scale(med + [f.get("target") for f in fs]):
            ax.set_xscale("log")
        ax.set_xlabel(f"{unit} (median, min–max; | = target: green met, red missed)", fontsize=8)
    axes[0, 0].set_title(f"rayka bench: {bench}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


PEER_ROWS = [("rayka produce (acks=all, RF 3, bulk)", RAYKA_PRODUCE, "#3b6ea5"),
             ("NATS JetStream R3 produce (async acks)", NATS_PRODUCE, "#e67e22"),
             ("ray.util.queue put_nowait_batch", QUEUE_PUT, "#95a5a6"),
             ("ray.util.queue put per item", QUEUE_PUT_ITEM, "#bdc3c7"),
             ("rayka consume (RF 3)", RAYKA_CONSUME, "#3b6ea5"),
             ("NATS JetStream R3 consume (pull)", NATS_CONSUME, "#e67e22"),
             ("ray.util.queue get_nowait_batch", QUEUE_GET, "#95a5a6")]


def plot_peers(benches: dict, path: Path) -> bool:
    rows = [(label, f, color) for label, name, color in PEER_ROWS
            if (f := find_figure(benches, name)) and f.get("median")]
    if not rows:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.5 * len(rows)))
    y = list(range(len(rows)))
    med = [f["median"] for _, f, _ in rows]
    err = [[m - f["min"] for m, (_, f, _) in zip(med, rows)], [f["max"] - m for m, (_, f, _) in zip(med, rows)]]
    ax.barh(y, med, xerr=err, color=[c for _, _, c in rows], capsize=3)
    ax.set_yticks(y, [label for label, _, _ in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    for yi, m, (_, f, _) in zip(y, med, rows):
        ax.annotate(_fmt(m) + "/s", (f["max"], yi), textcoords="offset points", xytext=(6, -3), fontsize=7)
    ax.set_xlabel("records/s, 100-byte values, same machine (log scale; median, min–max)")
    ax.set_title("rayka vs peers")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


TIME_UNITS = ("ms", "s", "us", "µs", "ns")
RATE_KEYS = ("rate", "rate_per_s", "records_per_s", "target_rate", "rate_records_per_s")


def latency_points(benches: dict) -> dict[str, list[tuple[float, dict]]]:
    """percentile label -> [(rate, figure)] from figures named latency.* (or *.latency.*)."""
    points: dict[str, list] = collections.defaultdict(list)
    for _, f in ok_figures(benches):
        if not (f["name"].startswith("latency.") or ".latency." in f["name"]) or f.get("median") is None:
            continue
        if f.get("unit") not in TIME_UNITS:     # e.g. latency.rate_N.achieved_rate (records/s)
            continue
        params = f.get("params") or {}
        pct = params.get("percentile")
        if pct is None:
            m = re.search(r"(?:^|[._])p(\d+(?:[._]\d+)?)", f["name"])
            pct = m.group(1).replace("_", ".") if m else f["name"]
            if m and "." not in pct and len(pct) > 2:   # p999 is p99.9
                pct = pct[:2] + "." + pct[2:]
        rate = next((params[k] for k in RATE_KEYS if isinstance(params.get(k), (int, float))), None)
        points[f"p{pct}" if not str(pct).startswith("p") else str(pct)].append((rate, f))
    return dict(points)


def plot_latency(benches: dict, path: Path) -> bool:
    points = latency_points(benches)
    if not points:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.5))

    def order(k):
        try:
            return float(k[1:])
        except ValueError:
            return math.inf
    for pct in sorted(points, key=order):
        pts = sorted(points[pct], key=lambda p: (p[0] is None, p[0] or 0))
        xs = [p[0] if p[0] is not None else i for i, p in enumerate(pts)]
        med = [p[1]["median"] for p in pts]
        err = [[m - p[1]["min"] for m, p in zip(med, pts)], [p[1]["max"] - m for m, p in zip(med, pts)]]
        line = ax.errorbar(xs, med, yerr=err, marker="o", capsize=3, label=pct)
        for x, p in zip(xs, pts):
            if p[1].get("target") is not None:
                ax.plot([x], [p[1]["target"]], marker="_", markersize=16, mew=2,
                        color=line[0].get_color())
    ax.set_yscale("log")
    ax.set_xlabel("rate (records/s)")
    ax.set_ylabel(next(iter(points.values()))[0][1]["unit"])
    ax.set_title("end-to-end latency percentiles (_ = target)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_plots(report: dict, json_path: Path) -> list[Path]:
    stem, written = json_path.with_suffix(""), []
    for bench, result in report["benches"].items():
        if isinstance(result, dict) and "error" not in result:
            p = Path(f"{stem}-bench-{bench}.png")   # not <stem>-peers.png: that one compares
            if plot_bench(bench, result, p):
                written.append(p)
    for suffix, fn in (("peers", plot_peers), ("latency", plot_latency)):
        p = Path(f"{stem}-{suffix}.png")
        if fn(report["benches"], p):
            written.append(p)
    return written


# ---------------------------------------------------------------- summary


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.2f} M"
    if a >= 1e4:
        return f"{v / 1e3:.1f} k"
    if a >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def print_summary(report: dict, json_path: Path, pngs: list[Path], timeouts: dict) -> None:
    from rich.console import Console
    from rich.markup import escape   # figure labels hold [params]: not rich markup
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 150)
    t = Table(title="figures (median over runs)", show_lines=False)
    for col in ("bench", "figure", "median", "min – max", "unit", "runs", "target", "met"):
        t.add_column(col, justify="right" if col in ("median", "min – max", "runs", "target") else "left")
    for bench, result in report["benches"].items():
        if "error" in result:
            t.add_row(bench, f"[red]ERROR: {escape(str(result['error']).splitlines()[0][:90])}[/red]",
                      *[""] * 6)
            continue
        figures = result.get("figures", [])
        for f in figures:
            met = f.get("met")
            target = "" if f.get("target") is None else \
                ("≤ " if f.get("better") == "lower" else "≥ ") + _fmt(f["target"])
            t.add_row(bench, escape(figure_label(f, figures)), _fmt(f.get("median")),
                      f"{_fmt(f.get('min'))} – {_fmt(f.get('max'))}", f.get("unit", ""),
                      str(f.get("runs", "")), target,
                      "" if met is None else ("[green]yes[/green]" if met else "[red]NO[/red]"))
    console.print(t)

    r = Table(title="rayka vs peers (median / median)")
    for col in ("ratio", "rayka", "peer", "×", "worst ×", "target", "met"):
        r.add_column(col)
    for row in report["ratios"]:
        r.add_row(row["name"], _fmt(row["rayka_median"]), _fmt(row["peer_median"]),
                  "missing: " + ", ".join(row["missing"]) if row.get("missing") else f"{row['ratio']:.1f}",
                  "" if row["ratio_worst"] is None else f"{row['ratio_worst']:.1f}",
                  "" if row["target"] is None else f"≥ {row['target']:g}",
                  "" if row["met"] is None else ("[green]yes[/green]" if row["met"] else "[red]NO[/red]"))
    console.print(r)

    w = Table(title="wall time per bench")
    for col in ("bench", "wall s", "timeout s", "status"):
        w.add_column(col)
    for bench, secs in report["wall_s"].items():
        err = report["benches"][bench].get("error")
        w.add_row(bench, f"{secs:.1f}", str(timeouts.get(bench, "")),
                  f"[red]{escape(str(err).splitlines()[0][:80])}[/red]" if err else "ok")
    console.print(w)
    total = report["total_s"]
    over = total > BUDGET_S
    console.print(f"total {total:.1f} s ({total / 60:.1f} min; budget {BUDGET_S // 60} min"
                  + (" [red]EXCEEDED[/red])" if over else ")"))
    console.print(f"wrote {json_path}" + "".join(f"\n      {p}" for p in pngs))
    if report["failed"]:
        console.print(f"[red]failed benches: {', '.join(report['failed'])}[/red]")


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

    start = time.monotonic()
    from bench.common import machine_facts
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
    total = time.monotonic() - start
    report = build_report(benches, wall, total, machine, today, args.quick, args.runs)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    json_path = results_path(args.out_dir, today)
    json_path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    pngs = write_plots(report, json_path)
    print_summary(report, json_path, pngs, timeouts)
    print(f"elapsed {time.monotonic() - start:.1f} s (with plots and summary)")
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
