"""The suite's PNG plots, written beside the report's JSON (<stem> is the JSON path without
its suffix).

Rules:
- <stem>-bench-<name>.png per bench that did not fail: horizontal bars of medians with
  min–max error bars and a marker at each target (green met, red missed), one panel per
  unit; log scale when a panel spans more than 50x.
- <stem>-peers.png: rayka against the peers of bench/peers_bench.py (PEER_ROWS), log scale.
- <stem>-latency.png: one line per percentile against the offered rate, from figures named
  latency.* or *.latency.* with a time unit (not the side-by-side versus.* ones); drawn only
  when such figures exist.
- <stem>-versus-<family>.png per family of the report's "versus" rows (bench/kafka_bench.py):
  for each figure, rayka's and Kafka's medians as two bars side by side with min–max error
  bars and rayka / Kafka written beside them; one panel per unit, log scale when a panel
  spans more than 50x. The bench itself gets no <stem>-bench-<name>.png (VERSUS_BENCHES):
  these replace it.
- A plot with nothing to draw is not written; `write_plots` returns the files it wrote.
- matplotlib is imported on first use, with the Agg backend: no display, and the runner's
  children never pay for it.
"""

from __future__ import annotations

import collections
import math
import re
from pathlib import Path

from bench.report import (VERSUS_PREFIX, NATS_CONSUME, NATS_PRODUCE, QUEUE_GET, QUEUE_PUT, QUEUE_PUT_ITEM,
                          RAYKA_CONSUME, RAYKA_PRODUCE, figure_label, find_figure, fmt, ok_figures)

PEER_ROWS = [("rayka produce (acks=all, RF 3, bulk)", RAYKA_PRODUCE, "#3b6ea5"),
             ("NATS JetStream R3 produce (async acks)", NATS_PRODUCE, "#e67e22"),
             ("ray.util.queue put_nowait_batch", QUEUE_PUT, "#95a5a6"),
             ("ray.util.queue put per item", QUEUE_PUT_ITEM, "#bdc3c7"),
             ("rayka consume (RF 3)", RAYKA_CONSUME, "#3b6ea5"),
             ("NATS JetStream R3 consume (pull)", NATS_CONSUME, "#e67e22"),
             ("ray.util.queue get_nowait_batch", QUEUE_GET, "#95a5a6")]
TIME_UNITS = ("ms", "s", "us", "µs", "ns")
RATE_KEYS = ("rate", "rate_per_s", "records_per_s", "target_rate", "rate_records_per_s")


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
            ax.annotate(f"{fmt(f['median'])}", (max(f["max"], f.get("target") or 0), yi),
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
        ax.annotate(fmt(m) + "/s", (f["max"], yi), textcoords="offset points", xytext=(6, -3), fontsize=7)
    ax.set_xlabel("records/s, 100-byte values, same machine (log scale; median, min–max)")
    ax.set_title("rayka vs peers")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def latency_points(benches: dict) -> dict[str, list[tuple[float, dict]]]:
    """percentile label -> [(rate, figure)] from figures named latency.* (or *.latency.*)."""
    points: dict[str, list] = collections.defaultdict(list)
    for _, f in ok_figures(benches):
        if f["name"].startswith(VERSUS_PREFIX):
            continue
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


VERSUS_BENCHES = ("kafka",)
COLORS = {"rayka": "#3b6ea5", "kafka": "#e67e22"}


def plot_versus(family: str, rows: list[dict], path: Path) -> bool:
    """rayka and Kafka side by side for one family's rows; see the module's rules."""
    rows = [r for r in rows if r["rayka"].get("median") is not None
            or r["kafka"].get("median") is not None]
    if not rows:
        return False
    plt = _plt()
    units = list(dict.fromkeys(r["unit"] for r in rows))
    heights = [sum(r["unit"] == u for r in rows) for u in units]
    fig, axes = plt.subplots(len(units), 1, squeeze=False,
                             figsize=(10, 1.4 + 0.7 * sum(heights) + 0.6 * len(units)),
                             gridspec_kw={"height_ratios": heights})
    for ax, unit in zip(axes[:, 0], units):
        rs = [r for r in rows if r["unit"] == unit]
        values = []
        for offset, side in ((-0.2, "rayka"), (0.2, "kafka")):
            ys = [i + offset for i in range(len(rs))]
            med = [r[side].get("median") or 0 for r in rs]
            err = [[m - (r[side].get("min") or m) for m, r in zip(med, rs)],
                   [(r[side].get("max") or m) - m for m, r in zip(med, rs)]]
            ax.barh(ys, med, height=0.38, xerr=err, color=COLORS[side], capsize=2,
                    label="rayka" if side == "rayka" else "Apache Kafka 3.9.2")
            values += med + [r[side].get("max") or 0 for r in rs]
            for y, m, r in zip(ys, med, rs):
                ax.annotate(fmt(m) if r[side].get("median") is not None else "-",
                            (r[side].get("max") or m, y), textcoords="offset points",
                            xytext=(4, -3), fontsize=7)
        labels = [r["name"] + (" (lower is better)" if r["better"] == "lower" else "")
                  + ("" if r["ratio"] is None else f"\nrayka/Kafka {r['ratio']:.2f}")
                  for r in rs]
        ax.set_yticks(list(range(len(rs))), labels, fontsize=7)
        ax.invert_yaxis()
        if _log_scale(values):
            ax.set_xscale("log")
        ax.set_xlabel(f"{unit} (median, min–max)", fontsize=8)
    axes[0, 0].legend(fontsize=8, loc="lower right")
    axes[0, 0].set_title(f"rayka beside Apache Kafka 3.9.2: {family}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_plots(report: dict, json_path: Path) -> list[Path]:
    stem, written = json_path.with_suffix(""), []
    for bench, result in report["benches"].items():
        if bench in VERSUS_BENCHES:
            continue
        if isinstance(result, dict) and "error" not in result:
            p = Path(f"{stem}-bench-{bench}.png")   # not <stem>-peers.png: that one compares
            if plot_bench(bench, result, p):
                written.append(p)
    for suffix, fn in (("peers", plot_peers), ("latency", plot_latency)):
        p = Path(f"{stem}-{suffix}.png")
        if fn(report["benches"], p):
            written.append(p)
    families: dict[str, list] = {}
    for row in report.get("versus", []):
        families.setdefault(row.get("family") or "other", []).append(row)
    for family, rows in families.items():
        p = Path(f"{stem}-versus-{family}.png")
        if plot_versus(family, rows, p):
            written.append(p)
    return written
