"""The suite's summary on the terminal, printed by `bench/run_all.py` after the JSON and the
plots are written.

Rules:
- Reads the report (bench/report.py) only; computes no figure of its own, so what is printed
  is what the JSON says.
- Four tables: every figure (median over runs, min–max, target, met) except the side-by-side
  ones, rayka against the peers (median over median, worst case), rayka beside Kafka (the
  report's "versus" rows: both medians with min–max, rayka / Kafka, ahead or not), and the
  wall time per bench against its timeout;
  then the total against the report's budget, the files written and the failed benches.
- A failed bench shows the first line of its error where its figures would be.
- Figure labels hold "[params]", which rich would read as markup: they are escaped.
- rich is imported on first use; the width is the terminal's, or 150 columns when piped
  (a log keeps whole rows).
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.report import VERSUS_PREFIX, figure_label, fmt


def print_summary(report: dict, json_path: Path, pngs: list[Path], timeouts: dict) -> None:
    from rich.console import Console
    from rich.markup import escape
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
            if f["name"].startswith(VERSUS_PREFIX):
                continue
            met = f.get("met")
            target = "" if f.get("target") is None else \
                ("≤ " if f.get("better") == "lower" else "≥ ") + fmt(f["target"])
            t.add_row(bench, escape(figure_label(f, figures)), fmt(f.get("median")),
                      f"{fmt(f.get('min'))} – {fmt(f.get('max'))}", f.get("unit", ""),
                      str(f.get("runs", "")), target,
                      "" if met is None else ("[green]yes[/green]" if met else "[red]NO[/red]"))
    console.print(t)

    r = Table(title="rayka vs peers (median / median)")
    for col in ("ratio", "rayka", "peer", "×", "worst ×", "target", "met"):
        r.add_column(col)
    for row in report["ratios"]:
        r.add_row(row["name"], fmt(row["rayka_median"]), fmt(row["peer_median"]),
                  "missing: " + ", ".join(row["missing"]) if row.get("missing") else f"{row['ratio']:.1f}",
                  "" if row["ratio_worst"] is None else f"{row['ratio_worst']:.1f}",
                  "" if row["target"] is None else f"≥ {row['target']:g}",
                  "" if row["met"] is None else ("[green]yes[/green]" if row["met"] else "[red]NO[/red]"))
    console.print(r)

    if report.get("versus"):
        console.print(versus_table(report["versus"]))

    w = Table(title="wall time per bench")
    for col in ("bench", "wall s", "timeout s", "status"):
        w.add_column(col)
    for bench, secs in report["wall_s"].items():
        err = report["benches"][bench].get("error")
        w.add_row(bench, f"{secs:.1f}", str(timeouts.get(bench, "")),
                  f"[red]{escape(str(err).splitlines()[0][:80])}[/red]" if err else "ok")
    console.print(w)
    total, budget = report["total_s"], report["budget_s"]
    console.print(f"total {total:.1f} s ({total / 60:.1f} min; budget {budget // 60} min"
                  + (" [red]EXCEEDED[/red])" if total > budget else ")"))
    load = report.get("machine", {}).get("load_average")
    if load:
        console.print(f"load average (1, 5, 15 min) at the start {load['at_start']}, "
                      f"at the end {load['at_end']} on {report['machine'].get('cpus')} cpus")
    console.print(f"wrote {json_path}" + "".join(f"\n      {p}" for p in pngs))
    if report["failed"]:
        console.print(f"[red]failed benches: {', '.join(report['failed'])}[/red]")


def versus_table(rows: list[dict]):
    """rayka beside Apache Kafka, one row per figure of the report's "versus"."""
    from rich.markup import escape
    from rich.table import Table
    t = Table(title="rayka beside Apache Kafka 3.9.2, same machine, same run (median, min–max)")
    for col in ("family", "figure", "unit", "rayka", "Kafka", "rayka / Kafka", "ahead"):
        t.add_column(col, justify="right" if col in ("rayka", "Kafka", "rayka / Kafka") else "left")
    for row in rows:
        def cell(side):
            v = row[side]
            return f"{fmt(v['median'])} ({fmt(v['min'])}–{fmt(v['max'])})" \
                if v.get("median") is not None else "-"
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        ahead = "" if row["ahead"] is None else \
            ("[green]yes[/green]" if row["ahead"] else "[red]no[/red]")
        t.add_row(row.get("family") or "", escape(row["name"]) +
                  (" (lower is better)" if row["better"] == "lower" else ""),
                  row["unit"] or "", cell("rayka"), cell("kafka"), ratio, ahead)
    return t
