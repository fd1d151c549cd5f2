"""rayka beside Apache Kafka 3.9.2 on this machine: the same workloads, the same librdkafka
client, one run after the other, every figure for both and the ratio rayka / Kafka.

Rules:
- Systems: bench/systems.py (rayka: 3 broker actors and 2 controllers on a local Ray, the
  embedded ZooKeeper; Kafka: 3 broker JVMs in ZooKeeper mode with Debian's ZooKeeper,
  heap -Xmx3G -Xms3G each, bench/systems.py KAFKA_HEAP; Kafka's defaults otherwise).
  Each system's settings are in setup.systems.
- Families (FAMILIES): bench/versus_<family>.py, each `run(system, sheet, runs, quick)`
  (bench/versus.py). They run in this order on each system: the data path, groups and
  transactions, 10,000 partitions, Kafka's own perf tools, and failover last (it kills).
- Settling: every fresh system is warmed before its first family (bench/settle.py: a
  produce-and-read of 200,000 records, then paced windows at 1,000 and 10,000 records/s
  until the brokers' compiler threads are quiet, at most 10 min): a fresh Kafka JVM
  compiles its hot paths for minutes and answers slower meanwhile, a user's Kafka does
  not. Its facts per run are noted ("settle": settled, seconds, windows); its seconds are
  in wall_s (<system>.settle). A settle that raises is a family error (family "settle")
  and the families still run on that system, noted as not settled.
- Runs alternate: run 1 on a fresh rayka, run 1 on a fresh Kafka, run 2 on a fresh rayka...
  (each family with runs=1 per cluster): a drift of the machine between runs lands on both
  systems alike, and run i's ratio compares neighbours. Only one system runs at a time.
- Figures: for each name a family records, versus.<name>.rayka and versus.<name>.kafka
  (one sample per run) and versus.<name>.ratio = rayka / Kafka run by run, with target 1.0
  (>= 1 when higher is better, <= 1 when lower is; a figure whose Kafka sample is 0 has
  no ratio). A family with a target of its own (records lost: 0) keeps it on both systems.
- A family that raises on a system is recorded in "family_errors" (system, family, run,
  error, traceback); the other families and systems still run, the system is healed
  (wait_healed) or, if that fails, replaced by a fresh one for the next family; the suite
  reports the bench as failed (bench/report.py).
- setup.load_average: the machine's load (1, 5, 15 min) at the start and at the end: a
  figure counts from a quiet machine. Each system's run notes "machine": its pace before
  the run (bench/common.py machine_pace: a fixed Python loop's CPU and wall ms, best of
  3) and the seconds the hypervisor stole during it (steal_s): this VM's speed moves by
  hours, and both systems of a run pair should have seen the same machine.

    .venv/bin/python bench/kafka_bench.py [--quick] [--runs 3] [--families data,groups]
        [--systems rayka,kafka] [--out bench/out/kafka.json]
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import (arg_parser, emit, figure, machine_facts, machine_pace,  # noqa: E402
                          say, steal_s)
from bench.settle import settle  # noqa: E402
from bench.systems import SYSTEMS, open_system  # noqa: E402
from bench.versus import Sheet  # noqa: E402

NAME = "kafka"
FAMILIES = ("data", "groups", "scale", "tools", "failover")
DEFAULT_OUT = ROOT / "bench" / "out" / f"{NAME}.json"
HEAL_S = 300.0


def _family(name: str):
    return importlib.import_module(f"bench.versus_{name}")


def _family_error(errors: list, system: str, family: str, run_i: int, exc: Exception) -> str:
    """Record a family that raised (in an except block: its traceback is taken) and say
    so; the error's text."""
    error = f"{type(exc).__name__}: {exc}"
    errors.append({"system": system, "family": family, "run": run_i, "error": error,
                   "traceback": traceback.format_exc()})
    say(f"run {run_i}: {system} {family} FAILED: {error}")
    return error


def _settle(system, quick: bool, run_i: int, errors: list) -> dict:
    """The settle note of a fresh system; a settle that raises is a family error (family
    "settle") and the families still run, on a system noted as not settled."""
    try:
        return settle(system, quick, say=say) | {"run": run_i}
    except Exception as exc:  # noqa: BLE001 - recorded; the families still run
        error = _family_error(errors, system.name, "settle", run_i, exc)
        return {"settled": False, "run": run_i, "error": error}


def run_system_once(name: str, sheet: Sheet, families, quick: bool, run_i: int,
                    errors: list, wall: dict, settings: dict) -> None:
    """Run every family once on a fresh system `name`."""
    system = None
    stack = None
    pace, steal0 = machine_pace(), steal_s()
    try:
        for fam in families:
            if system is None:
                import contextlib
                stack = contextlib.ExitStack()
                t0 = time.monotonic()
                system = stack.enter_context(open_system(name))
                wall.setdefault(f"{name}.start", []).append(time.monotonic() - t0)
                settings[name] = {"version": system.version, **system.settings}
                t0 = time.monotonic()
                sheet.note("settle", _settle(system, quick, run_i, errors))
                wall.setdefault(f"{name}.settle", []).append(time.monotonic() - t0)
            say(f"run {run_i}: {name} {fam}")
            t0 = time.monotonic()
            sheet.family = fam
            try:
                _family(fam).run(system, sheet, 1, quick)
            except Exception as exc:  # noqa: BLE001 - recorded; the other families still run
                _family_error(errors, name, fam, run_i, exc)
                try:
                    system.wait_healed(HEAL_S)
                except Exception:  # noqa: BLE001 - a broken system is replaced
                    stack.close()
                    system = None
            wall.setdefault(f"{name}.{fam}", []).append(time.monotonic() - t0)
    finally:
        if stack is not None:
            stack.close()
        sheet.note("machine", {**pace, "steal_s": round(steal_s() - steal0, 1)})


def versus_figures(sheets: dict[str, Sheet]) -> list[dict]:
    """versus.<name>.{rayka,kafka,ratio} for every name either system recorded."""
    figures = []
    names = list(dict.fromkeys(n for s in sheets.values() for n in s.series))
    for n in names:
        series = {sys_name: s.series.get(n) for sys_name, s in sheets.items()}
        known = next(v for v in series.values() if v is not None)
        for sys_name, s in series.items():
            figures.append(figure(f"versus.{n}.{sys_name}", known.unit,
                                  s.samples if s else [], known.target, known.better,
                                  system=sys_name, **known.params))
        ray_s, kaf_s = series.get("rayka"), series.get("kafka")
        if ray_s and kaf_s:
            ratios = [a / b for a, b in zip(ray_s.samples, kaf_s.samples) if b]
            figures.append(figure(f"versus.{n}.ratio", "x", ratios, 1.0, known.better,
                                  of=f"{n} ({known.unit})", system="rayka/kafka",
                                  family=known.params.get("family")))
    return figures


def run(quick: bool = False, runs: int = 3, families=FAMILIES, systems=SYSTEMS) -> dict:
    sheets = {s: Sheet(s) for s in systems}
    errors: list = []
    wall: dict = {}
    settings: dict = {}
    load_at_start = os.getloadavg()
    for run_i in range(runs):
        for name in systems:
            run_system_once(name, sheets[name], families, quick, run_i, errors, wall, settings)
    setup = {"systems": settings, "families": list(families), "runs": runs, "quick": quick,
             "order": "runs alternate between systems; each run on fresh clusters",
             "client": "confluent-kafka 2.16.1 (librdkafka 2.16.0), in this process",
             "machine": machine_facts(),
             "load_average": {"at_start": [round(x, 2) for x in load_at_start],
                              "at_end": [round(x, 2) for x in os.getloadavg()]}}
    result = {"bench": NAME, "setup": setup, "figures": versus_figures(sheets),
              "extra": {"wall_s": wall, **{f"{s}.notes": sh.extra for s, sh in sheets.items()}}}
    if errors:
        result["family_errors"] = errors
    return result


def main(argv=None) -> dict:
    p = arg_parser(__doc__, DEFAULT_OUT, "small sizes, 1 s latency runs")
    p.add_argument("--families", default=",".join(FAMILIES))
    p.add_argument("--systems", default=",".join(SYSTEMS))
    args = p.parse_args(argv)
    fams = [f for f in args.families.split(",") if f]
    unknown = [f for f in fams if f not in FAMILIES]
    if unknown:
        p.error(f"unknown families {unknown}: {FAMILIES}")
    return emit(run(args.quick, args.runs, fams, [s for s in args.systems.split(",") if s]),
                args.out)


if __name__ == "__main__":
    main()
