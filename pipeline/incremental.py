"""Incremental runs: read from a group's committed offsets to the current end, process,
write, then commit — a rerun after a crash neither skips nor double-writes.

State, kept in ZooKeeper as consumer-group offsets (/consumers/<g>/offsets/...):
- `<group>`: the committed input offsets (where the next run starts; a plain consumer or
  `read_topic(starting_offsets="committed:<group>")` sees them too);
- `<group>.sink-start`: the sink's high watermarks when the current run was planned;
- `<group>.planned`: the input end offsets of the current run, written LAST, so a run is
  "pending" exactly when some planned end is past its committed offset.
Rules:
- A new run plans [committed (or log start), HW now) per source partition, records the
  sink-start then the plan, reads, transforms, writes with the idempotent producer and
  only then commits the planned ends as the group's offsets.
- A run that finds a pending plan (its predecessor crashed after planning, before
  committing) redoes EXACTLY that range instead of planning a new one. It reads what the
  crashed run may have written (the sink from sink-start to its end) and writes only the
  output rows not already there (Spark's exceptAll: a multiset difference on key and
  value), then commits. Any crash point therefore yields each output row once.
- Assumptions, stated because exactness depends on them: the transform is deterministic
  (same input rows → same output rows), the sink topic is written only by this pipeline,
  and one runner per group at a time. Reading the group's state from ZooKeeper happens on
  the driver; rows never pass through it.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from pipeline.sink import write_topic
from pipeline.source import read_topic


@dataclasses.dataclass
class RunPlan:
    group: str
    source: str
    sink: str
    ranges: dict[int, tuple[int, int]]     # source partition → [start, end)
    sink_start: dict[int, int]             # sink partition → its HW when planned
    recovering: bool                       # redoing a crashed run's range

    @property
    def records(self) -> int:
        return sum(e - s for s, e in self.ranges.values())


@dataclasses.dataclass
class RunResult:
    plan: RunPlan
    records_in: int
    records_out: int          # rows the transform produced
    records_written: int      # rows produced to the sink by THIS run
    already_present: int      # rows a crashed predecessor had written (recovery only)


def _offsets(cluster, group: str, topic: str) -> dict[int, int]:
    return {p: o for (_, p), o in cluster.admin().committed_offsets(group, topic).items()}


def plan_run(cluster, group: str, source: str, sink: str) -> RunPlan:
    """The pending plan if there is one, else a new plan recorded in ZooKeeper."""
    committed = _offsets(cluster, group, source)
    planned = _offsets(cluster, f"{group}.planned", source)
    if any(end > committed.get(p, -1) for p, end in planned.items()):
        sink_start = _offsets(cluster, f"{group}.sink-start", sink)
        bounds = cluster.consumer().offset_bounds([(source, p) for p in planned])
        ranges = {p: (committed.get(p, bounds[(source, p)][0]), end)
                  for p, end in planned.items()}
        return RunPlan(group, source, sink, ranges, sink_start, recovering=True)
    consumer = cluster.consumer()
    bounds = consumer.offset_bounds([(source, i.partition)
                                     for i in cluster.admin().describe_topic(source)])
    ranges = {p: (committed.get(p, log_start), hw) for (_, p), (log_start, hw) in bounds.items()}
    sink_start = {p: hw for (_, p), hw in consumer.end_offsets(
        [(sink, i.partition) for i in cluster.admin().describe_topic(sink)]).items()}
    cluster.admin().commit_offsets(f"{group}.sink-start", {(sink, p): o for p, o in sink_start.items()})
    cluster.admin().commit_offsets(f"{group}.planned", {(source, p): e for p, (_, e) in ranges.items()})
    return RunPlan(group, source, sink, ranges, sink_start, recovering=False)


def execute(spark, cluster, plan: RunPlan, transform: Callable, **write_options) -> RunResult:
    """Read the plan's range, transform, write (only what is missing when recovering)."""
    df = read_topic(spark, cluster, plan.source,
                    starting_offsets={p: s for p, (s, _) in plan.ranges.items()},
                    ending_offsets={p: e for p, (_, e) in plan.ranges.items()})
    out = transform(df).select("key", "value").cache()
    produced = out.count()
    already = 0
    to_write = out
    if plan.recovering:
        present = read_topic(spark, cluster, plan.sink, starting_offsets=plan.sink_start,
                             ending_offsets="latest").select("key", "value")
        already = present.count()
        to_write = out.exceptAll(present)
    written = write_topic(to_write, cluster, plan.sink, **write_options).records
    out.unpersist()
    return RunResult(plan, plan.records, produced, written, already)


def commit(cluster, plan: RunPlan) -> None:
    cluster.admin().commit_offsets(plan.group, {(plan.source, p): e
                                              for p, (_, e) in plan.ranges.items()})


def run_incremental(spark, cluster, group: str, source: str, sink: str,
                    transform: Callable, **write_options) -> RunResult:
    """One exactly-once step of a pipeline from `source` to `sink` (module rules)."""
    plan = plan_run(cluster, group, source, sink)
    result = execute(spark, cluster, plan, transform, **write_options)
    commit(cluster, plan)
    return result
