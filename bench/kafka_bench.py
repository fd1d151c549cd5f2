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
- Paired families (--pair; those with `steps`, bench/versus.py: the data path): both
  clusters are started and settled once and stay up together; each run takes every step on
  one system and at once on the other, the first system alternating run by run, fresh
  topics per step, so each ratio compares two measurements a minute or two apart.
  setup.paired.idle_cores is the machine's busy cores with both up and idle after
  settling (0.17-0.18 measured: Ray's daemons, rayka's brokers and controllers, Kafka's
  JVMs). Not the default: an idle rayka beside a settled Kafka doubled Kafka's ack p99 at
  10,000 records/s, linger.ms 2 (30 s windows alternating with and without it: 188, 182,
  123 ms against 78, 71, 104; the p50s unchanged), which would flatter rayka.
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
- Ctrl-C (SIGINT) stops the bench, every system up closed: librdkafka turns a
  KeyboardInterrupt raised inside its calls into a SystemError, which would pass for a
  family error, so the handler also sets `interrupted` and the next family error raises
  KeyboardInterrupt instead.
- setup.load_average: the machine's load (1, 5, 15 min) at the start and at the end: a
  figure counts from a quiet machine. Each system's run notes "machine": its pace before
  the run (bench/common.py machine_pace: a fixed Python loop's CPU and wall ms, best of
  3) and the seconds the hypervisor stole during it (steal_s): this VM's speed moves by
  hours, and both systems of a run pair should have seen the same machine.
  setup.steal_per_run lists them run by run and marks a run whose systems lost more than
  10 s apart `uneven` (bench/versus_compare.py steal_per_run), said at the end too.

    .venv/bin/python bench/kafka_bench.py [--quick] [--runs 3] [--families data,groups]
        [--systems rayka,kafka] [--pair] [--out bench/out/kafka.json]
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import (arg_parser, busy_share_since, emit, figure,  # noqa: E402
                          machine_busy, machine_facts, machine_pace, say, steal_s)
from bench.settle import settle  # noqa: E402
from bench.systems import SYSTEMS, open_system  # noqa: E402
from bench.versus import Sheet  # noqa: E402
from bench.versus_compare import steal_per_run  # noqa: E402

NAME = "kafka"
FAMILIES = ("data", "groups", "scale", "tools", "failover")
DEFAULT_OUT = ROOT / "bench" / "out" / f"{NAME}.json"
HEAL_S = 300.0
IDLE_S, QUICK_IDLE_S = 10.0, 1.0


def _family(name: str):
    return importlib.import_module(f"bench.versus_{name}")


interrupted = threading.Event()      # Ctrl-C seen (rule "Ctrl-C")


def _on_sigint(signum, frame) -> None:
    interrupted.set()
    signal.default_int_handler(signum, frame)


def _family_error(errors: list, system: str, family: str, run_i: int, exc: Exception) -> str:
    """Record a family that raised (in an except block: its traceback is taken) and say
    so; the error's text. After a Ctrl-C: KeyboardInterrupt, whatever the error."""
    if interrupted.is_set():
        raise KeyboardInterrupt(f"interrupted during {system} {family} (run {run_i})") from exc
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


def _open(name: str, stack: contextlib.ExitStack, wall: dict, settings: dict, open_=None):
    """A fresh system `name` entered on `stack`; its start's seconds and settings noted."""
    t0 = time.monotonic()
    system = stack.enter_context((open_ or open_system)(name))
    wall.setdefault(f"{name}.start", []).append(time.monotonic() - t0)
    settings[name] = {"version": system.version, **system.settings}
    return system


def _settle_noted(system, sheet: Sheet, quick: bool, run_i: int, errors: list, wall: dict,
                  settle_=None) -> None:
    """Settle `system` (_settle's rules), its note on `sheet` and its seconds in wall."""
    t0 = time.monotonic()
    sheet.note("settle", (settle_ or _settle)(system, quick, run_i, errors))
    wall.setdefault(f"{system.name}.settle", []).append(time.monotonic() - t0)


def _machine_note(pace: dict, steal0: float, **extra) -> dict:
    """A run's "machine" note: the pace before it and the seconds stolen since `steal0`."""
    return {**pace, "steal_s": round(steal_s() - steal0, 1), **extra}


def run_system_once(name: str, sheet: Sheet, families, quick: bool, run_i: int,
                    errors: list, wall: dict, settings: dict) -> None:
    """Run every family once on a fresh system `name`."""
    system = None
    stack = None
    pace, steal0 = machine_pace(), steal_s()
    try:
        for fam in families:
            if system is None:
                stack = contextlib.ExitStack()
                system = _open(name, stack, wall, settings)
                _settle_noted(system, sheet, quick, run_i, errors, wall)
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
        sheet.note("machine", _machine_note(pace, steal0))


def paired_families(families, systems) -> list[str]:
    """The families measured paired (rule "Paired families"): those with steps, when more
    than one system runs."""
    if len(systems) < 2:
        return []
    return [f for f in families if hasattr(_family(f), "steps")]


def idle_cores(seconds: float) -> float:
    """The machine's busy cores over `seconds` (/proc/stat), as measured, not slept as a
    wait: the cost of what is up and idle."""
    before = machine_busy()
    time.sleep(seconds)
    return round(busy_share_since(before) * (os.cpu_count() or 1), 3)


def run_paired(names, sheets: dict, families, quick: bool, runs: int, errors: list,
               wall: dict, settings: dict, open_=None, settle_=None,
               module=None) -> dict:
    """Rule "Paired families": every system of `names` up at once, settled once, then
    `runs` runs of each family's steps, each step on every system back to back (the first
    system alternating by run). A step that raises is a family error; its system is healed
    or, if that fails, left out of the remaining steps. Returns setup.paired."""
    module = module or _family
    with contextlib.ExitStack() as stack:
        systems = {name: _open(name, stack, wall, settings, open_) for name in names}
        for name in names:
            _settle_noted(systems[name], sheets[name], quick, 0, errors, wall, settle_)
        idle = idle_cores(QUICK_IDLE_S if quick else IDLE_S)
        broken: set[str] = set()
        orders = []
        for run_i in range(runs):
            order = list(names) if run_i % 2 == 0 else list(reversed(names))
            orders.append(order)
            pace, steal0 = machine_pace(), steal_s()
            for fam in families:
                for label, step in module(fam).steps(quick):
                    for name in order:
                        if name in broken:
                            continue
                        say(f"run {run_i}: {name} {fam}: {label}")
                        sheets[name].family = fam
                        t0 = time.monotonic()
                        try:
                            step(systems[name], sheets[name])
                        except Exception as exc:  # noqa: BLE001 - recorded; the rest still run
                            _family_error(errors, name, fam, run_i, exc)
                            try:
                                systems[name].wait_healed(HEAL_S)
                            except Exception:  # noqa: BLE001 - left out from here on
                                broken.add(name)
                        wall.setdefault(f"{name}.{fam}", []).append(time.monotonic() - t0)
            for name in names:
                sheets[name].note("machine", _machine_note(pace, steal0, paired=True))
    return {"families": list(families), "idle_cores": idle, "orders": orders,
            "left_out": sorted(broken)}


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


def run(quick: bool = False, runs: int = 3, families=FAMILIES, systems=SYSTEMS,
        pair: bool = False) -> dict:
    sheets = {s: Sheet(s) for s in systems}
    errors: list = []
    wall: dict = {}
    settings: dict = {}
    load_at_start = os.getloadavg()
    paired = paired_families(families, systems) if pair else []
    paired_note = None
    if paired:
        paired_note = run_paired(list(systems), sheets, paired, quick, runs, errors, wall,
                                 settings)
    alone = [f for f in families if f not in paired]
    for run_i in range(runs if alone else 0):
        for name in systems:
            run_system_once(name, sheets[name], alone, quick, run_i, errors, wall, settings)
    setup = {"systems": settings, "families": list(families), "runs": runs, "quick": quick,
             "order": ("paired families: both systems up, each step on both back to back; "
                       if paired else "")
             + "runs alternate between systems; each run on fresh clusters",
             "client": "confluent-kafka 2.16.1 (librdkafka 2.16.0), in this process",
             "machine": machine_facts(),
             "load_average": {"at_start": [round(x, 2) for x in load_at_start],
                              "at_end": [round(x, 2) for x in os.getloadavg()]}}
    if paired_note is not None:
        setup["paired"] = paired_note
    result = {"bench": NAME, "setup": setup, "figures": versus_figures(sheets),
              "extra": {"wall_s": wall, **{f"{s}.notes": sh.extra for s, sh in sheets.items()}}}
    setup["steal_per_run"] = steal_per_run(result)
    for r in setup["steal_per_run"]:
        if r["uneven"]:
            say(f"run {r['run']}: uneven: the hypervisor stole {r['rayka']} s during rayka's "
                f"run, {r['kafka']} s during Kafka's; its ratios compare two hosts")
    if errors:
        result["family_errors"] = errors
    return result


def main(argv=None) -> dict:
    p = arg_parser(__doc__, DEFAULT_OUT, "small sizes, 1 s latency runs")
    p.add_argument("--families", default=",".join(FAMILIES))
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--pair", action="store_true",
                   help="measure the families with steps (data) paired: both systems up")
    args = p.parse_args(argv)
    signal.signal(signal.SIGINT, _on_sigint)
    fams = [f for f in args.families.split(",") if f]
    unknown = [f for f in fams if f not in FAMILIES]
    if unknown:
        p.error(f"unknown families {unknown}: {FAMILIES}")
    return emit(run(args.quick, args.runs, fams, [s for s in args.systems.split(",") if s],
                    pair=args.pair), args.out)


if __name__ == "__main__":
    main()
