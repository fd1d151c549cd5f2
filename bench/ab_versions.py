"""Two versions of rayka's code measured in alternation on this machine: a paired A/B that
survives a host whose pace drifts within the hour (bench/results show this machine's same
loop taking 43 ms one hour and 70 the next; a before/after pair of bench runs an hour apart
measures the host as much as the change).

Rules:
1. Versions are commits. The product files that differ between `--old` and `--new`
   (under PRODUCT_DIRS) are written into this work tree from each commit in turn, so the
   Ray workers the systems start (they import the work tree) run that version; the bench's
   own code stays the work tree's. The work tree must have no changes to those files when
   the run starts (refused otherwise), and gets the `--new` commit's files back at the end,
   also when the run fails or is interrupted (SIGTERM as well as Ctrl-C).
2. A pair is one fresh rayka cluster per version (bench/systems.py), back to back, the
   order alternating pair by pair (old first, then new first, ...): each cluster gets one
   unmeasured warm-up window (1,000 records/s for 10 s), then (`--idle-partitions N`) a
   topic of N partitions, RF 3, that nothing is produced to (its replicas' fetch sessions
   and checks are what the windows then pay for), then the measured windows of
   `--windows` (rate:linger.ms, each `--duration` s, bench/settle.py `window`: ack p50/p99,
   broker CPU per record, the machine's busy share).
3. Per figure (a window's key at a rate and linger): each version's values, each pair's
   new - old, and the median of those differences with its min–max: a change stands out
   when the paired differences agree in sign, not when two medians differ.
4. Out: a line per window as it ends, the summary, and all of it in `--out` (JSON).

Example: `.venv/bin/python bench/ab_versions.py --old HEAD~1 --new HEAD --pairs 4`.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PRODUCT_DIRS = ("actors", "console", "controller", "coordinator", "pipeline", "protocol",
                "rayka", "replicas", "share", "transactions")
FIGURES = ("ack_p50_ms", "ack_p99_ms", "broker_us_per_record", "machine_busy")


def git(*args: str, root: Path = ROOT, binary: bool = False):
    out = subprocess.run(["git", *args], cwd=root, capture_output=True, check=True)
    return out.stdout if binary else out.stdout.decode()


def changed_files(old: str, new: str, root: Path = ROOT) -> list[str]:
    """The product files (PRODUCT_DIRS) that differ between two commits."""
    dirs = [d for d in PRODUCT_DIRS if (root / d).is_dir()]
    return git("diff", "--name-only", old, new, "--", *dirs, root=root).split()


def dirty(files: list[str], root: Path = ROOT) -> list[str]:
    """Those of `files` the work tree has changed (or not committed)."""
    if not files:
        return []
    return [line[3:] for line in git("status", "--porcelain", "--", *files,
                                     root=root).splitlines()]


def use(commit: str, files: list[str], root: Path = ROOT) -> None:
    """Write `files` as `commit` has them (removed where it has none)."""
    for f in files:
        path = root / f
        try:
            data = git("show", f"{commit}:{f}", root=root, binary=True)
        except subprocess.CalledProcessError:
            path.unlink(missing_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def order(pair: int) -> tuple[str, str]:
    """Which version runs first in pair `pair` (0-based): they alternate."""
    return ("old", "new") if pair % 2 == 0 else ("new", "old")


def parse_windows(text: str) -> list[tuple[int, float]]:
    """"200:0,1000:0" → [(200, 0.0), (1000, 0.0)]."""
    out = []
    for part in text.split(","):
        rate, _, linger = part.partition(":")
        out.append((int(rate), float(linger or 0)))
    return out


def summarize(rows: list[dict]) -> dict:
    """Per "rate/linger/figure": each version's values and the paired new - old
    differences (the same pair and the same window of the pair) with their median."""
    out: dict[str, dict] = {}
    keys = sorted({(r["rate"], r["linger_ms"], r["window"]) for r in rows})
    for rate, linger, window in keys:
        for fig in FIGURES:
            name = f"{rate}/s linger {linger:g} #{window} {fig}"
            by = {(r["pair"], r["version"]): r[fig] for r in rows
                  if (r["rate"], r["linger_ms"], r["window"]) == (rate, linger, window)
                  and fig in r}
            pairs = sorted({p for p, _ in by})
            deltas = [by[(p, "new")] - by[(p, "old")] for p in pairs
                      if (p, "new") in by and (p, "old") in by]
            out[name] = {
                "old": [by[(p, "old")] for p in pairs if (p, "old") in by],
                "new": [by[(p, "new")] for p in pairs if (p, "new") in by],
                "deltas": [round(d, 3) for d in deltas],
                "median_delta": round(statistics.median(deltas), 3) if deltas else None,
                "min_delta": round(min(deltas), 3) if deltas else None,
                "max_delta": round(max(deltas), 3) if deltas else None,
                "same_sign": bool(deltas) and (all(d > 0 for d in deltas)
                                               or all(d < 0 for d in deltas)),
            }
    return out


def run(old: str, new: str, pairs: int, windows, duration_s: float, say=print,
        idle_partitions: int = 0) -> dict:
    from bench.settle import window
    from bench.systems import open_system

    old_c, new_c = git("rev-parse", old).strip(), git("rev-parse", new).strip()
    files = changed_files(old_c, new_c)
    if not files:
        raise SystemExit(f"no product file differs between {old} and {new}")
    busy = dirty(files)
    if busy:
        raise SystemExit(f"the work tree has changes to files this A/B swaps: {busy}")
    commits = {"old": old_c, "new": new_c}
    rows: list[dict] = []

    def restore(*_):
        use(new_c, files)
        raise SystemExit("interrupted: the work tree has the new version's files back")

    previous = signal.signal(signal.SIGTERM, restore)
    try:
        for pair in range(pairs):
            for version in order(pair):
                use(commits[version], files)
                with open_system("rayka") as system:
                    window(system, 1000, 0, 10)            # warm-up, not measured
                    if idle_partitions:
                        system.create_topic("ab-idle", idle_partitions, 3)
                    for i, (rate, linger) in enumerate(windows):
                        got = window(system, rate, linger, duration_s)
                        row = {"pair": pair, "version": version, "window": i, **got}
                        rows.append(row)
                        say(json.dumps(row), flush=True)
    finally:
        use(new_c, files)
        signal.signal(signal.SIGTERM, previous)
    return {"bench": "ab_versions", "old": old_c, "new": new_c, "files": files,
            "pairs": pairs, "duration_s": duration_s, "idle_partitions": idle_partitions,
            "rows": rows,
            "summary": summarize(rows)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", default="HEAD")
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--windows", default="200:0,1000:0")
    ap.add_argument("--duration", type=float, default=15.0)
    ap.add_argument("--idle-partitions", type=int, default=0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    result = run(args.old, args.new, args.pairs, parse_windows(args.windows), args.duration,
                 idle_partitions=args.idle_partitions)
    for name, s in result["summary"].items():
        print(f"{name:48s} old {s['old']} new {s['new']} new-old median {s['median_delta']} "
              f"({s['min_delta']}..{s['max_delta']}){' same sign' if s['same_sign'] else ''}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
