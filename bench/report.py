"""The suite's report: what one `bench/run_all.py` run writes to <out-dir>/<date>[-N].json.

Rules:
- Pure: built from the benches' result dicts (bench/common.py's protocol) and the runner's
  wall times; no processes, no files except choosing the next free results path.
- A bench that failed ({"error": ...}) contributes no figure anywhere: not to the target
  table, not to the ratios; it is listed under "failed".
- Targets: every figure with a target becomes one row of "targets" with its verdict; a
  figure without "met" gets it from its median and whether higher or lower is better.
- Ratios (RATIOS): rayka against the peers of bench/peers_bench.py, median over median,
  and the worst case (rayka's min over the peer's max); a figure missing on either side
  leaves the ratio None and names what is missing.
- Side by side (VERSUS_PREFIX, bench/kafka_bench.py): every figure pair
  versus.<name>.rayka / versus.<name>.kafka becomes one row of "versus": both systems'
  median, min and max, rayka / Kafka median over median (`ratio`), the run-by-run ratios'
  median, min and max (versus.<name>.ratio), and whether rayka is at least level with Kafka
  (`ahead`: ratio >= 1 when higher is better, <= 1 when lower is; None without a ratio).
  Families that failed on a system (the bench's "family_errors") are listed under
  "failed" as "<bench>: <system> <family> run <i>".
- Figures sharing a name are told apart by the params that differ between them
  (`figure_label`), in the report, the plots and the summary alike.
- Shape: date, machine, total_s, quick, runs, budget_s, benches, wall_s, targets, ratios,
  versus, failed.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

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


VERSUS_PREFIX = "versus."
VERSUS_SYSTEMS = ("rayka", "kafka")


def compute_versus(benches: dict) -> list[dict]:
    """One row per figure measured on both systems; see the module's rules."""
    by_name: dict[str, dict[str, dict]] = {}
    for _, f in ok_figures(benches):
        name = f["name"]
        if not name.startswith(VERSUS_PREFIX):
            continue
        stem, _, side = name[len(VERSUS_PREFIX):].rpartition(".")
        if side in VERSUS_SYSTEMS + ("ratio",):
            by_name.setdefault(stem, {})[side] = f
    rows = []
    for stem, sides in by_name.items():
        known = sides.get("rayka") or sides.get("kafka")
        if known is None:
            continue
        row = {"name": stem, "unit": known.get("unit"), "better": known.get("better", "higher"),
               "family": (known.get("params") or {}).get("family"),
               "target": known.get("target"), "ratio": None, "ahead": None}
        for side in VERSUS_SYSTEMS:
            f = sides.get(side) or {}
            row[side] = {k: f.get(k) for k in ("median", "min", "max", "runs")}
        a, b = row["rayka"]["median"], row["kafka"]["median"]
        if a is not None and b:
            row["ratio"] = a / b
            row["ahead"] = row["ratio"] >= 1.0 if row["better"] == "higher" else row["ratio"] <= 1.0
        r = sides.get("ratio") or {}
        row["ratio_runs"] = {k: r.get(k) for k in ("median", "min", "max", "runs")}
        rows.append(row)
    return rows


def failed(benches: dict) -> list[str]:
    out = [n for n, r in benches.items() if not isinstance(r, dict) or "error" in r]
    for n, r in benches.items():
        if isinstance(r, dict):
            out += [f"{n}: {e.get('system')} {e.get('family')} run {e.get('run')}"
                    for e in r.get("family_errors", [])]
    return out


def results_path(out_dir: Path, today: datetime.date) -> Path:
    """<out_dir>/<date>.json, or <date>-2.json, -3... when taken."""
    stem = today.isoformat()
    path, n = out_dir / f"{stem}.json", 1
    while path.exists():
        n += 1
        path = out_dir / f"{stem}-{n}.json"
    return path


def build_report(benches: dict, wall_s: dict, total_s: float, machine: dict, today: datetime.date,
                 quick: bool, runs: int, *, budget_s: float) -> dict:
    return {"date": today.isoformat(), "machine": machine, "total_s": round(total_s, 2),
            "quick": quick, "runs": runs, "budget_s": budget_s,
            "benches": benches, "wall_s": {k: round(v, 2) for k, v in wall_s.items()},
            "targets": target_table(benches), "ratios": compute_ratios(benches),
            "versus": compute_versus(benches), "failed": failed(benches)}


def fmt(v) -> str:
    """A figure as a person reads it in a table or on a plot: 1.23 M, 45.6 k, 789, 0.123."""
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
