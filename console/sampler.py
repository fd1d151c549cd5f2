"""Sampler: the console's one background sweep, every `interval_s`, feeding History.

Rules:
- One thread sweeps (console/source.py) and then records, per sweep: each topic's end offset
  (the sum of its partitions' leader log end offsets), bytes on its leaders, bytes in from
  producers and out to consumers (the brokers' per-topic counters), and the offsets its
  groups committed; each group's lag, in total and per topic; each broker's
  request and byte counters; the cluster's under-replicated and offline partition counts.
  Rates are drawn from these counters when a plot asks (console/history.py). A figure
  with a part unknown in a sweep (a partition between leaders) is not recorded for that
  sweep: the plot shows a gap, not a dip and a burst.
- Pages read `latest` (the last Snapshot) and never wait for a sweep; `wait_newer(t)` lets
  a caller (a test, a page after an action) wait for a sweep that started after `t`.
- The series of a topic or group that no longer exists are dropped at the next sweep.
- A sweep that raises is logged and the next one runs on time: the console keeps serving
  the last snapshot, with the error shown.
"""

from __future__ import annotations

import logging
import threading
import time

from console.history import History
from console.source import Snapshot, Source, error_text

log = logging.getLogger(__name__)


def record(history: History, snap: Snapshot) -> None:
    """One snapshot's figures into history, at the snapshot's time."""
    t = snap.time_s
    topics = snap.topics()
    for topic, parts in topics.items():
        # a partition between leaders has no end this sweep: a sum without it would dip and
        # its return would plot as a burst, so such a sweep leaves a gap instead
        if all(p.log_end is not None for p in parts):
            history.add(f"topic:{topic}:end", t, sum(p.log_end for p in parts))
            history.add(f"topic:{topic}:bytes", t, sum(p.size_bytes or 0 for p in parts))
    consumed: dict[str, int] = {}
    for group, offsets in snap.committed.items():
        lag = snap.lag(group)
        per_topic: dict[str, int] = {}
        unknown = set()
        for tp, o in offsets.items():
            consumed[tp[0]] = consumed.get(tp[0], 0) + o
            if lag[tp]["lag"] is None:
                unknown.add(tp[0])          # its high watermark unknown this sweep: a gap
            else:
                per_topic[tp[0]] = per_topic.get(tp[0], 0) + lag[tp]["lag"]
        for topic in unknown:
            per_topic.pop(topic, None)
        if not unknown:
            history.add(f"group:{group}:lag", t, sum(per_topic.values()))
        for topic, value in per_topic.items():
            history.add(f"group:{group}:lag:{topic}", t, value)
    for topic, value in consumed.items():
        history.add(f"topic:{topic}:consumed", t, value)
    if not any(e.startswith("broker_io") for e in snap.errors):
        for topic in topics:      # 0 before its first bytes: a rate needs a sample before
            bytes_in, bytes_out = snap.topic_io.get(topic, (0, 0))
            # a broker restarting counts from 0 again: the rate skips that backward step
            history.add(f"topic:{topic}:bytes_in", t, bytes_in)
            history.add(f"topic:{topic}:bytes_out", t, bytes_out)
    for broker, io in snap.broker_io.items():
        for key, value in io.items():
            history.add(f"broker:{broker}:{key}", t, value)
    history.add("cluster:under_replicated", t, len(snap.under_replicated()))
    history.add("cluster:offline", t, len(snap.offline()))
    if not any(e.startswith(("partitions", "groups")) for e in snap.errors):
        for topic in {name.split(":")[1] for name in history.names("topic:")} - set(topics):
            history.drop(f"topic:{topic}:")
        # a group id may hold ':' (a topic name may not), and a group still listed whose
        # offset fetch failed this sweep still exists: keep the series of every known group
        known = tuple(f"group:{g}:" for g in {*snap.committed, *(g["group"] for g in snap.groups)})
        for name in history.names("group:"):
            if not name.startswith(known):
                history.drop(name)


class Sampler:
    def __init__(self, source: Source, interval_s: float = 2.0, capacity: int = 1800):
        self.source = source
        self.interval_s = interval_s
        self.history = History(capacity)
        self.latest = Snapshot()
        self.lock = threading.Lock()
        self.swept = threading.Condition(self.lock)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name="console-sampler", daemon=True)

    def start(self) -> "Sampler":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=30)

    def sweep_once(self) -> Snapshot:
        try:
            snap = self.source.sweep()
        except Exception as exc:          # keep serving the last snapshot, say why
            log.warning("console sweep failed: %s", error_text(exc))
            with self.lock:
                self.latest.errors = [f"sweep: {error_text(exc)}"]
                return self.latest
        with self.swept:
            record(self.history, snap)
            self.latest = snap
            self.swept.notify_all()
        return snap

    def wait_newer(self, after_time_s: float, timeout_s: float) -> Snapshot | None:
        with self.swept:
            ok = self.swept.wait_for(lambda: self.latest.time_s > after_time_s, timeout_s)
            return self.latest if ok else None

    def _run(self) -> None:
        while not self.stop_event.is_set():
            started = time.monotonic()
            self.sweep_once()
            self.stop_event.wait(max(0.0, self.interval_s - (time.monotonic() - started)))
