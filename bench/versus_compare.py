"""Does a side-by-side run reproduce? Two results of bench/kafka_bench.py compared ratio by
ratio.

Rules:
- Input: two JSON files, each kafka_bench's output or run_all's report holding it (under
  benches.kafka). A ratio is versus.<name>.ratio; its value is the median of its runs.
- For each ratio both files have: both medians, the relative change |b / a - 1|, and two
  verdicts: `within` (the change is at most the tolerance, 20 % unless told) and
  `same_side` (both medians on the same side of 1.0, where 1.0 counts as Kafka's side:
  rayka ahead in both runs or behind in both). A ratio only one file has is listed apart.
- Each system's own medians are shown beside the ratio, with their relative change
  (`rayka_change`, `kafka_change`): a ratio that moved because one system moved says which.
- Steal: each file's seconds the hypervisor stole during each system's run i
  (`extra.<system>.notes.machine[i].steal_s`, kafka_bench's per-run note); a run whose
  systems lost more than STEAL_UNEVEN_S apart is `uneven`: its ratio compares two hosts
  (the run-by-run alternation evens out a drift, not a steal that lands on one system's
  runs: `2026-12-02-kafka-data-30s-14.json` lost 29-82 s in each Kafka run, 0.3-5.8 in
  rayka's).
- Output: a table on stdout; `--json` writes the rows instead. The exit status is 0 either
  way: this reports, it does not judge.

    .venv/bin/python bench/versus_compare.py A.json B.json [--tolerance 0.2] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def kafka_result(result: dict) -> dict:
    """A kafka_bench result as it is, or the one a run_all report holds."""
    return result if "figures" in result else result.get("benches", {}).get("kafka", {})


def figures(result: dict) -> dict[str, dict]:
    """{figure name: figure} of a kafka_bench result or of a report that holds one."""
    return {f["name"]: f for f in kafka_result(result).get("figures", [])}


STEAL_UNEVEN_S = 10.0


def steal_per_run(result: dict) -> list[dict]:
    """[{"run", "rayka", "kafka", "uneven"}] from a result's per-run machine notes (rules);
    [] when it has none."""
    extra = kafka_result(result).get("extra", {})
    notes = {s: [m.get("steal_s") for m in extra.get(f"{s}.notes", {}).get("machine", [])]
             for s in ("rayka", "kafka")}
    out = []
    for i, (ray, kaf) in enumerate(zip(notes["rayka"], notes["kafka"])):
        uneven = None if None in (ray, kaf) else abs(ray - kaf) > STEAL_UNEVEN_S
        out.append({"run": i, "rayka": ray, "kafka": kaf, "uneven": uneven})
    return out


def _ahead(ratio: float, better: str) -> bool:
    return ratio > 1.0 if better == "higher" else ratio < 1.0


def compare(a: dict, b: dict, tolerance: float = 0.2) -> dict:
    """{"rows": [...], "only_in_a": [...], "only_in_b": [...]} (see the module's rules)."""
    fa, fb = figures(a), figures(b)

    def ratios(fs):
        return {n[len("versus."):-len(".ratio")]: f for n, f in fs.items()
                if n.startswith("versus.") and n.endswith(".ratio") and f.get("samples")}

    ra, rb = ratios(fa), ratios(fb)
    rows = []
    for name in ra:
        if name not in rb:
            continue
        x, y = ra[name]["median"], rb[name]["median"]
        better = ra[name].get("better", "higher")
        change = abs(y / x - 1.0) if x else float("inf")
        row = {"name": name, "a": x, "b": y, "change": change, "within": change <= tolerance,
               "same_side": _ahead(x, better) == _ahead(y, better)}
        for system in ("rayka", "kafka"):
            m = [fs.get(f"versus.{name}.{system}", {}).get("median") for fs in (fa, fb)]
            row[system] = m
            row[f"{system}_change"] = (abs(m[1] / m[0] - 1.0) if None not in m and m[0]
                                       else None)
        rows.append(row)
    return {"tolerance": tolerance, "rows": rows,
            "only_in_a": sorted(set(ra) - set(rb)), "only_in_b": sorted(set(rb) - set(ra)),
            "steal": {"a": steal_per_run(a), "b": steal_per_run(b)}}


def _num(v) -> str:
    return "-" if v is None else f"{v:.4g}"


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def render(result: dict) -> str:
    rows = result["rows"]
    width = max((len(r["name"]) for r in rows), default=10)
    lines = [f"{'ratio':{width}s}  {'A':>8s} {'B':>8s} {'change':>7s}  within  same side"
             "   rayka A/B (change)           kafka A/B (change)"]
    for r in rows:
        lines.append(f"{r['name']:{width}s}  {r['a']:8.3f} {r['b']:8.3f}"
                     f" {100 * r['change']:6.0f}%"
                     f"  {'yes' if r['within'] else 'NO':6s}  {'yes' if r['same_side'] else 'NO':9s}"
                     f"   {_num(r['rayka'][0]):>8s}/{_num(r['rayka'][1]):<8s}"
                     f" ({_pct(r['rayka_change']):>4s})"
                     f"   {_num(r['kafka'][0]):>8s}/{_num(r['kafka'][1]):<8s}"
                     f" ({_pct(r['kafka_change']):>4s})")
    within = sum(r["within"] for r in rows)
    side = sum(r["same_side"] for r in rows)
    lines.append(f"{within} of {len(rows)} ratios within {100 * result['tolerance']:.0f} %; "
                 f"{side} of {len(rows)} on the same side of 1.0")
    for system in ("rayka", "kafka"):
        known = [r[f"{system}_change"] for r in rows if r[f"{system}_change"] is not None]
        held = sum(c <= result["tolerance"] for c in known)
        lines.append(f"{system}'s own medians: {held} of {len(known)} within "
                     f"{100 * result['tolerance']:.0f} %")
    for key, runs in result.get("steal", {}).items():
        if runs:
            lines.append(f"{key.upper()}: seconds stolen per run, rayka / kafka: " + ", ".join(
                f"{_num(r['rayka'])} / {_num(r['kafka'])}{' UNEVEN' if r['uneven'] else ''}"
                for r in runs))
    for key in ("only_in_a", "only_in_b"):
        if result[key]:
            lines.append(f"{key.replace('_', ' ')}: {', '.join(result[key])}")
    return "\n".join(lines)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    p.add_argument("--tolerance", type=float, default=0.2)
    p.add_argument("--json", action="store_true", help="the rows as JSON")
    args = p.parse_args(argv)
    out = compare(json.loads(args.a.read_text()), json.loads(args.b.read_text()),
                  args.tolerance)
    print(json.dumps(out, indent=1) if args.json else render(out))
    return out


if __name__ == "__main__":
    sys.exit(0 if main() is not None else 1)
