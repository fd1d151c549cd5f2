"""The Spark task side of read_topic: pull one partition's [start, end) from its leader.

Rules:
- Runs in a Spark executor's Python worker, which connects to Ray once per process
  (pipeline.spark.ensure_ray) and calls the leader broker actor's `fetch_many` as a
  consumer does (replica id -1, below the HW, the leader epoch it knows: KIP-320 fencing).
- A retriable answer (the consumer's `REFETCH`: NOT_LEADER_OR_FOLLOWER, FENCED /
  UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION while metadata catches up ...) or a dead /
  restarting / unreachable broker re-resolves the leader from the live brokers' metadata
  (highest leader epoch wins) and continues from the position: the range is read exactly
  once, whichever broker serves each piece. Anything else raises its typed error and Spark
  retries the task (a retry re-reads the whole range: the output is the same).
- A failpoint hold (ctx["holds"]: partition → offset) parks the task once its position
  reaches that offset until the driver releases it (pipeline.tasklog).
- Gives up with REQUEST_TIMED_OUT when the range cannot be completed within
  `read_timeout_s` (no leader for that long).
- Transaction markers are skipped; with ctx["read_committed"] the fetch reads below the
  last stable offset and aborted transactions are dropped (replicas/visible.py). The
  position moves past skipped batches.
- Yields Arrow batches (one per fetch answer) whenever `rows_per_batch` rows have
  accumulated, and the rest at the end; reports where it ran to the
  TaskLog at the end (after the last batch was handed to Spark).
"""

from __future__ import annotations

import os
import time

import ray

from actors.cluster_host import broker_actor_name
from rayka.client.columns import Columns
from rayka.client.fetcher import REFETCH
from rayka.client.metadata import first_answers
from replicas.visible import visible_batches
from pipeline.spark import ensure_ray, node_of_process
from pipeline.tasklog import NAME as TASKLOG
from replicas.errors import RequestTimedOut, error_for_code
from replicas.records import iter_headers

ROWS_PER_BATCH = 200_000
POLL_MS = 200                    # long-poll while a new leader's HW catches up
RESOLVE_TIMEOUT_S = 5.0          # no broker answered at all: try again on the next round
PROGRESS_S = 0.2                 # how often a task reports its position to the TaskLog
_handles: dict = {}


def read_range(desc: dict, ctx: dict, read_timeout_s: float = 120.0,
               rows_per_batch: int = ROWS_PER_BATCH):
    ensure_ray(ctx["address"], ctx["namespace"])
    ns = ctx["namespace"]
    tp = (desc["topic"], desc["partition"])
    start, end = desc["start"], desc["end"]
    leader, epoch = desc["leader"], desc["leader_epoch"]
    pos, cols, resolves, rows = start, Columns(*tp), 0, 0
    t0 = last_report = time.monotonic()
    tasklog = ray.get_actor(TASKLOG, namespace=ns)
    hold_at = ctx.get("holds", {}).get(tp[1])
    while pos < end:
        if hold_at is not None and pos >= hold_at:
            _hold(tasklog, ctx["read_id"], tp[1], pos)
            hold_at = None
        if time.monotonic() - last_report >= PROGRESS_S:
            tasklog.record_progress.remote(ctx["read_id"], tp[1], pos)
            last_report = time.monotonic()
        if time.monotonic() - t0 > read_timeout_s:
            raise RequestTimedOut(f"{tp}: read stopped at {pos} of [{start}, {end}): "
                                  f"no leader served it within {read_timeout_s} s")
        committed = bool(ctx.get("read_committed"))
        answer = _fetch(ns, leader, tp, pos, epoch, ctx["fetch_max_bytes"], committed) \
            if leader is not None and leader >= 0 else None
        if answer is None or answer["error"] in REFETCH:
            before = (leader, epoch)
            leader, epoch = _resolve_leader(ns, ctx["brokers"], tp, epoch)
            resolves += 1
            if leader is None or (leader, epoch) == before:
                time.sleep(POLL_MS / 1000)   # election or metadata propagation in progress
            continue
        if answer["error"]:
            raise error_for_code(answer["error"], f"read {tp[0]}-{tp[1]} at offset {pos}")
        if answer["records"]:
            data = answer["records"]
            passed = max([pos] + [h.next_offset for h in iter_headers(data)])
            data = visible_batches(data, (answer.get("aborted_transactions") or ())
                                   if committed else None)
            pos = max(pos, cols.add(data, pos, end) if data else pos, min(passed, end))
            if hold_at is not None and pos >= hold_at:   # crossed it in one fetch: park now
                _hold(tasklog, ctx["read_id"], tp[1], pos)
                hold_at = None
        if len(cols) >= rows_per_batch:
            rows += len(cols)
            yield from cols.take()
    rows += len(cols)
    yield from cols.take()
    _report(tasklog, ns, ctx, desc, leader, rows, resolves, time.monotonic() - t0)


def _hold(tasklog, read_id: str, partition: int, pos: int) -> None:
    tasklog.record_progress.remote(read_id, partition, pos)
    while ray.get(tasklog.hold_here.remote(read_id, partition)):
        time.sleep(0.05)   # failpoint: parked until the driver releases us (tasklog rules)


def _actor(ns: str, broker_id: int):
    key = (ns, broker_id)
    if key not in _handles:
        _handles[key] = ray.get_actor(broker_actor_name(broker_id), namespace=ns)
    return _handles[key]


def _fetch(ns, leader, tp, pos, epoch, max_bytes, committed: bool = False) -> dict | None:
    try:
        ref = _actor(ns, leader).fetch_many.remote(-1, [(tp, pos, epoch, -1)], POLL_MS, 1,
                                                   max_bytes, 1 if committed else 0)
        return ray.get(ref, timeout=POLL_MS / 1000 + 30)[tp]
    except Exception:   # dead, restarting, unreachable or unknown broker: re-resolve
        _handles.pop((ns, leader), None)
        return None


def _resolve_leader(ns, brokers, tp, known_epoch) -> tuple[int | None, int]:
    """The leader with the highest epoch the live brokers' metadata knows. Every broker is
    asked AT ONCE (rayka/client/metadata.py's rule: a frozen broker must not hold the task
    up); answers that come within rayka/client/metadata.py's merge window after the first
    good one are merged."""
    refs = {}
    for b in brokers:
        try:
            refs[_actor(ns, b).metadata_leaders.remote([tp[0]])] = b
        except Exception:   # no such actor (restarting): ask the others
            _handles.pop((ns, b), None)
    got, failed = first_answers(refs, RESOLVE_TIMEOUT_S)
    for b in failed:
        _handles.pop((ns, b), None)
    best = (None, known_epoch)
    for _, leaders in got:
        found = leaders.get(tp)
        if found and found[0] is not None and found[0] >= 0 and found[1] >= best[1]:
            best = (found[0], found[1])
    return best


def _report(tasklog, ns, ctx, desc, leader, rows, resolves, seconds) -> None:
    try:
        from pyspark import TaskContext
        tc = TaskContext.get()
        attempt = tc.attemptNumber() if tc else None
    except Exception:  # outside a Spark task (direct call in a unit test)
        attempt = None
    leader_node = None
    if leader is not None and leader >= 0:
        try:
            leader_node = ray.get(_actor(ns, leader).node_id.remote(), timeout=10)
        except Exception:  # leader gone since: the report says so with None
            pass
    report = {"partition": desc["partition"], "start": desc["start"], "end": desc["end"],
              "rows": rows, "leader_at_plan": desc["leader"],
              "leader_node_at_plan": desc["leader_node"], "leader_at_end": leader,
              "leader_node_at_end": leader_node, "pinned_executor": desc["executor"],
              "task_node": node_of_process(ctx["pids"]), "pid": os.getpid(),
              "resolves": resolves, "attempt": attempt, "seconds": round(seconds, 3)}
    ray.get(tasklog.record.remote(ctx["read_id"], report))
