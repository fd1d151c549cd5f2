"""Client-side cluster metadata: which broker leads which partition, at which leader epoch.

Rules:
- Read from the live brokers' metadata caches (fed by the controller's UpdateMetadata), as a
  Kafka client does. Every live broker is asked AT ONCE: a paused (SIGSTOPped) broker is
  still registered until its ZooKeeper session expires and must not hold the refresh up.
  The first answer gives the partition list; answers arriving within MERGE_WINDOW_S after
  it may only move a partition to a NEWER leader epoch (`newest_leaders`): a frozen
  leader's own cache would still name itself, a broker that just got UpdateMetadata names
  the new leader.
- `refresh()` is called on a miss or after a NOT_LEADER / FENCED / UNKNOWN error; callers
  never trust Ray's view of which actor is alive for leadership.
- Unknown topics are retried until `topic_wait_s` before UnknownTopicOrPartition (3): a
  topic just created may not have reached every broker's cache yet.
"""

from __future__ import annotations

import threading
import time

import ray
from ray.exceptions import RayError

from controller.store_api import ZkStoreError
from replicas.errors import UnknownTopicOrPartition

POLL_S = 0.05
REFRESH_TIMEOUT_S = 5.0    # no broker answered at all: keep what we know
MERGE_WINDOW_S = 0.02      # later answers merged in; short, so a frozen broker costs 20 ms


def newest_leaders(answers: list[dict]) -> dict:
    """The partitions of the first answer, each from the answer with the highest leader
    epoch for it (tp → (leader, leader_epoch, replicas, isr))."""
    merged = dict(answers[0])
    for other in answers[1:]:
        for tp, got in other.items():
            mine = merged.get(tp)
            if mine is not None and got[1] > mine[1]:
                merged[tp] = got
    return merged


def first_answers(refs: dict, timeout_s: float) -> tuple[list, list]:
    """Answers of calls made at once ({ObjectRef: key}): waits for the first good one (up to
    `timeout_s`), then MERGE_WINDOW_S for the others, so a frozen callee costs 20 ms.
    Returns ([(key, value)], [key of a call that failed]); a call still running is in
    neither."""
    pending, answers, failed = list(refs), [], []
    deadline = time.monotonic() + timeout_s
    while pending and not answers:
        ready, pending = ray.wait(pending, num_returns=1,
                                  timeout=max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        if pending:
            more, pending = ray.wait(pending, num_returns=len(pending), timeout=MERGE_WINDOW_S)
            ready += more
        for ref in ready:
            try:
                answers.append((refs[ref], ray.get(ref)))
            except RayError:   # that callee is down or restarting: the others answer
                failed.append(refs[ref])
    return answers, failed


class Metadata:
    def __init__(self, cluster, topic_wait_s: float = 10.0):
        self.cluster = cluster
        self.topic_wait_s = topic_wait_s
        self.partitions: dict[tuple, tuple] = {}   # tp → (leader, leader_epoch, replicas, isr)
        self._actors: dict[int, object] = {}
        self._lock = threading.Lock()

    def refresh(self) -> None:
        try:
            live = sorted(self.cluster.store.get_broker_ids())
        except ZkStoreError:       # ZooKeeper is failing over: keep what we know, retry later
            return
        refs = {broker.metadata.remote(): broker_id for broker_id, broker in self._handles(live)}
        got, failed = first_answers(refs, REFRESH_TIMEOUT_S)
        for broker_id in failed:
            self._actors.pop(broker_id, None)
        answers = [{tuple(tp): v for tp, v in md["partitions"].items()} for _, md in got]
        if answers:
            merged = newest_leaders(answers)
            with self._lock:
                self.partitions = merged

    def _handles(self, broker_ids) -> list:
        """(id, actor handle) of each broker, looked up once (get_actor is a GCS call)."""
        out = []
        for broker_id in broker_ids:
            actor = self._actors.get(broker_id)
            if actor is None:
                actor = self.cluster.broker_actor(broker_id)
                if actor is None:
                    continue
                self._actors[broker_id] = actor
            out.append((broker_id, actor))
        return out

    def partition_count(self, topic: str) -> int:
        deadline = time.monotonic() + self.topic_wait_s
        while True:
            with self._lock:
                n = sum(1 for t, _ in self.partitions if t == topic)
            if n:
                return n
            if time.monotonic() >= deadline:
                raise UnknownTopicOrPartition(f"Topic '{topic}' not present in metadata")
            self.refresh()
            time.sleep(POLL_S)  # poll interval of a deadline loop

    def leader(self, tp) -> tuple[int, int] | None:
        """(leader id, leader epoch) or None when unknown / no leader."""
        with self._lock:
            got = self.partitions.get(tuple(tp))
        if got is None or got[0] < 0:
            return None
        return got[0], got[1]
