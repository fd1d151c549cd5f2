"""What the side-by-side benchmark's workload families share: the sheet they record on.

Rules:
- A family is a module bench/versus_<family>.py with
  `run(system, sheet, runs: int, quick: bool) -> None`: it runs its workloads `runs` times
  against one `bench.systems.System` and records one sample per run per figure with
  `sheet.add(name, value, unit, better, **params)`. The SAME family code runs against
  rayka and against Kafka; nothing in it may ask which system it has, except to record
  facts in `sheet.extra`.
- A family may also give `steps(quick) -> [(label, step(system, sheet)), ...]`: one run
  cut into parts, each recording its own figures once (its `run` is then every step in
  order, `runs` times). With two systems and --pair, bench/kafka_bench.py measures such a
  family PAIRED: both systems up at once, each part on one system and at once on the
  other, so that the machine's drift between the two is the drift of a minute, not of
  one system's whole run (this VM's speed moves 2x within an hour); not the default (the
  idle system's background moves the other's p99s, kafka_bench's rules).
- A figure name is short and the same for both systems (e.g. "produce.records_per_s");
  bench/kafka_bench.py turns each into versus.<name>.rayka, versus.<name>.kafka and
  versus.<name>.ratio (rayka / Kafka, run by run).
- `better` is "higher" or "lower"; params describe the workload (the same on both).
- Each family runs alone too: `family_main(run, doc)` is its command line
  (`bench/versus_<family>.py rayka|kafka [--runs N] [--quick] [--heap H] [--no-settle]`),
  printing the sheet as JSON; the system is settled first (bench/settle.py) as in the
  bench, unless --no-settle.
- Failures are not figures: a family raises, and the bench reports the error; a count
  that must be 0 (records lost) is a figure with better="lower" and target 0 (`target=`).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field


@dataclass
class Series:
    unit: str
    better: str
    params: dict
    target: float | None = None
    samples: list = field(default_factory=list)


class Sheet:
    """Samples per figure name for ONE system, in the order they were first recorded."""

    def __init__(self, system_name: str):
        self.system = system_name
        self.series: dict[str, Series] = {}
        self.extra: dict = {}
        self.family: str | None = None       # set by the bench around each family's run

    def add(self, name: str, value: float, unit: str, better: str = "higher",
            target: float | None = None, **params) -> None:
        if better not in ("higher", "lower"):
            raise ValueError(f"better must be 'higher' or 'lower', not {better!r}")
        if self.family is not None:
            params = {"family": self.family, **params}
        s = self.series.setdefault(name, Series(unit, better, params, target))
        if (s.unit, s.better) != (unit, better):
            raise ValueError(f"{name}: recorded as {s.unit}/{s.better}, now {unit}/{better}")
        s.samples.append(float(value))

    def note(self, key: str, value) -> None:
        """A fact for the JSON's extra (per system), e.g. a run's raw timings."""
        self.extra.setdefault(key, []).append(value)


def family_main(run, doc: str, default_runs: int = 3, argv=None) -> None:
    """A family's command line: `run` against one fresh system, the sheet printed as JSON
    (system, version, settings, wall seconds, series, extra)."""
    import argparse

    from bench.systems import SYSTEMS, open_system
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("system", choices=SYSTEMS)
    ap.add_argument("--runs", type=int, default=default_runs)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--heap", default=None, help="Kafka brokers' heap, e.g. '-Xmx512m -Xms512m'")
    ap.add_argument("--no-settle", action="store_true", help="measure the fresh system as it is")
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    with open_system(a.system, **({"heap": a.heap} if a.heap and a.system == "kafka" else {})) \
            as system:
        sheet = Sheet(system.name)
        if not a.no_settle:
            from bench.settle import settle
            sheet.note("settle", settle(system, a.quick, say=lambda m: print(m, file=sys.stderr)))
        run(system, sheet, a.runs, a.quick)
    print(json.dumps({"system": sheet.system, "version": system.version,
                      "settings": system.settings, "wall_s": round(time.monotonic() - t0, 1),
                      "series": {k: dataclasses.asdict(v) for k, v in sheet.series.items()},
                      "extra": sheet.extra}, indent=1, default=str))
