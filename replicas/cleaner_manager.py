"""Which log the broker's cleaner works on next, and what it has cleaned (Kafka's
LogCleanerManager): pure bookkeeping around replicas/cleaner.py.

Rules:
- `grab(logs, now_ms)` (under the broker's lock) plans every compacted log (cleaner.py's
  `plan_cleaning`, up to the bound each log is given: its last stable offset) and returns
  the dirtiest eligible one as a CleanJob, or None, with the aborted transactions of its
  range read from the log's `.txnindex` files (Kafka's collectAbortedTransactions). Its first
  dirty offset is the `cleaner-offset-checkpoint` entry, reset to the log start when it is
  missing, below the log start, or past the log end (a deleted and re-created topic, a
  truncation).
- The job runs WITHOUT the lock (cleaner.run_clean reads the segment files through its own
  descriptors: retention may unlink them meanwhile, the open descriptors keep the bytes).
- `finish(job, stats)` (under the lock again) swaps the cleaned segments in if the log and
  those segments are unchanged (Log.swap_cleaned), then records the cleanable end as the
  new first dirty offset in `cleaner-offset-checkpoint` (Kafka's format) before returning.
  A changed log drops the `.cleaned` files and records nothing: the next round re-plans.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

from replicas.checkpoints import OffsetCheckpoint
from replicas.cleaner import CleanPlan, CleanStats, discard_cleaned, plan_cleaning

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


@dataclass(frozen=True)
class CleanJob:
    tp: tuple
    log: object                     # the Log planned on (identity checked at finish)
    plan: CleanPlan


class CleanerManager:
    def __init__(self, data_dir: str | Path):
        self._file = OffsetCheckpoint(Path(data_dir) / CLEANER_OFFSET_CHECKPOINT)
        self.first_dirty: dict[tuple, int] = self._file.read()

    def grab(self, logs: Iterable[tuple[tuple, object, int]], now_ms: int) -> CleanJob | None:
        """logs: (tp, Log, cleanable bound: the last stable offset). The dirtiest eligible
        compacted log's job."""
        best = None
        for tp, log, bound in logs:
            if not log.config.cleaner.compact:
                continue
            first_dirty = self.first_dirty.get(tuple(tp))
            if first_dirty is not None and not \
                    log.log_start_offset <= first_dirty <= log.log_end_offset:
                first_dirty = None
            plan = plan_cleaning(log.segment_views(), log.log_start_offset, first_dirty, bound,
                                 now_ms, log.config.cleaner)
            if plan is not None and (best is None or plan.dirty_ratio > best.plan.dirty_ratio):
                best = CleanJob(tuple(tp), log, plan)
        if best is not None:
            plan = best.plan
            best = CleanJob(best.tp, best.log, replace(plan, aborted=tuple(
                best.log.collect_aborted(plan.segments[0].base_offset, plan.end))))
        return best

    def finish(self, job: CleanJob, stats: CleanStats, logs: Iterable[tuple]) -> bool:
        """Swap in and checkpoint (see module rules); `logs` as hosted now, as for grab."""
        hosted = {tuple(tp): log for tp, log, _ in logs}
        if hosted.get(job.tp) is not job.log:
            discard_cleaned(stats)
            return False
        if not job.log.swap_cleaned(job.plan, stats):
            return False
        self.first_dirty[job.tp] = job.plan.end
        self._file.write({tp: o for tp, o in self.first_dirty.items() if tp in hosted})
        return True
