"""The broker's log cleaner thread (Kafka's CleanerThread; `log.cleaner.threads` = 1).

Rules:
- Every `log.cleaner.backoff.ms` (15 s) while `log.cleaner.enable` (true): take the dirtiest
  eligible compacted log under the broker's lock (replicas/cleaner_manager.py), clean it
  WITHOUT the lock (replicas/cleaner.py: own file descriptors, `.cleaned` files), swap the
  result in under the lock; then look for the next one at once, and back off only when no
  log needs cleaning. An I/O error while cleaning takes the log's directory offline, as any
  other I/O error on it (replicas/log_dirs.py).
- Time for the cleaner's rules (compaction lags, the delete horizon) is wall-clock ms, the
  scale of record timestamps. A failed round is logged and retried after the backoff; a
  kill at any point leaves the log whole (the swap is crash-safe).
"""

from __future__ import annotations

import logging
import threading
import time

from replicas.cleaner import run_clean

log = logging.getLogger(__name__)


class LogCleaner:
    def __init__(self, broker, backoff_ms: int, stopped: threading.Event):
        self.broker, self.backoff_s, self.stopped = broker, backoff_ms / 1000, stopped
        self.rounds: list[dict] = []              # what was cleaned (stats), newest last
        threading.Thread(target=self._run, daemon=True, name="log-cleaner").start()

    def _run(self) -> None:
        while not self.stopped.wait(self.backoff_s):
            try:
                while not self.stopped.is_set() and self.clean_once() is not None:
                    pass
            except Exception:                     # a bad round must not stop the cleaner
                log.exception("broker %s: log cleaner round failed", self.broker.id)

    def clean_once(self) -> dict | None:
        """One log cleaned (or found changed); its figures, or None when none needs it."""
        b = self.broker
        with b.lock:
            job = b.rm.cleaner_grab(int(time.time() * 1000))
        if job is None:
            return None
        t0 = time.monotonic()
        try:
            stats = run_clean(job.plan)
        except OSError as exc:                    # its directory failed: Kafka's rule
            with b.lock:
                b.rm.io_failed(job.tp, exc)
            return {"tp": job.tp, "swapped": False, "error": str(exc)}
        with b.lock:
            swapped = b.rm.cleaner_finish(job, stats)
        out = {"tp": job.tp, "swapped": swapped, "segments": len(job.plan.segments),
               "reasons": job.plan.reasons, "bytes_read": stats.bytes_read,
               "bytes_written": stats.bytes_written, "records_kept": stats.records_kept,
               "records_dropped": stats.records_dropped, "seconds": time.monotonic() - t0}
        self.rounds = (self.rounds + [out])[-100:]
        log.info("broker %s: cleaned %s-%s (%s): %d segments, %d -> %d bytes, %d records "
                 "dropped in %.2f s%s", b.id, job.tp[0], job.tp[1], ", ".join(job.plan.reasons),
                 out["segments"], stats.bytes_read, stats.bytes_written, stats.records_dropped,
                 out["seconds"], "" if swapped else " (log changed: not swapped)")
        return out
