"""Follower fetchers: one thread per (this broker, leader broker) pair (Kafka's
ReplicaFetcherThread), pulling for every partition this broker follows on that leader.

Rules:
- A partition first truncates by leader epoch (KIP-101/279): it asks the leader
  OffsetsForLeaderEpoch for its latest local epoch and truncates as the replica manager
  decides, repeating with an older epoch when told to; only then does it fetch.
- Fetches are long-polls (`max_wait_ms`) carrying each partition's fetch offset, last
  fetched epoch and current leader epoch; what comes back is appended as follower and the
  leader's HW applied (the replica manager enforces truncate-before-HW, KAFKA-14704).
- A diverging-epoch answer sends the partition back to truncation.
- Errors (leader gone, NOT_LEADER, FENCED_LEADER_EPOCH) back off briefly and retry; the
  controller's next LeaderAndIsr moves the partition to another fetcher or stops it.
- Every replica-manager call is made under the broker's lock; effects go back to the
  broker (`broker.apply_effects`).
"""

from __future__ import annotations

import logging
import threading

import ray

log = logging.getLogger(__name__)

MAX_WAIT_MS = 500
BACKOFF_S = 0.1


class Fetcher:
    def __init__(self, broker, leader_id: int):
        self.broker = broker
        self.leader_id = leader_id
        self.partitions: dict[tuple, bool] = {}     # tp → needs truncation
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"fetcher-{broker.id}-from-{leader_id}")
        self._thread.start()

    def add(self, tps) -> None:
        with self.broker.lock:
            for tp in tps:
                self.partitions[tuple(tp)] = True
        self._wake.set()

    def remove(self, tps) -> None:
        with self.broker.lock:
            for tp in tps:
                self.partitions.pop(tuple(tp), None)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    @property
    def empty(self) -> bool:
        return not self.partitions

    # -- the loop -------------------------------------------------------------------------------
    def _leader(self):
        return self.broker.broker_handle(self.leader_id)

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.partitions:
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            try:
                leader = self._leader()
                self._truncate(leader)
                self._fetch(leader)
            except Exception as exc:  # leader restarting, network, ...: back off and retry
                log.info("fetcher %s←%s: %s", self.broker.id, self.leader_id, exc)
                self.broker.forget_handle(self.leader_id)
                self._stop.wait(BACKOFF_S)

    def _truncate(self, leader) -> None:
        rm, lock = self.broker.rm, self.broker.lock
        with lock:
            todo = [tp for tp, pending in self.partitions.items() if pending]
        for tp in todo:
            for _ in range(64):
                with lock:
                    if tp not in self.partitions:
                        break
                    asked = rm.truncation_request(tp)
                if asked is None:
                    break
                current_epoch, latest_epoch = asked
                answer = ray.get(leader.offsets_for_leader_epoch.remote(tp, current_epoch, latest_epoch),
                                 timeout=30)
                error, epoch, end_offset = answer
                if error:
                    raise RuntimeError(f"OffsetsForLeaderEpoch {tp}: error {error}")
                with lock:
                    result = rm.follower_truncate(tp, epoch, end_offset)
                    if result.done:
                        self.partitions[tp] = False
                        self.broker.apply_effects(result.effects)
                        break

    def _fetch(self, leader) -> None:
        rm, lock = self.broker.rm, self.broker.lock
        with lock:
            requests = []
            for tp, pending in self.partitions.items():
                if not pending:
                    offset, last_epoch, current_epoch = rm.follower_fetch_request(tp)
                    requests.append((tp, offset, current_epoch, last_epoch))
        if not requests:
            return
        results = ray.get(leader.fetch_many.remote(self.broker.id, requests, MAX_WAIT_MS, 1),
                          timeout=MAX_WAIT_MS / 1000 + 30)
        backoff = False
        with lock:
            for tp, r in results.items():
                tp = tuple(tp)
                if tp not in self.partitions or self.partitions[tp]:
                    continue
                if r["diverging_epoch"] is not None:
                    self.partitions[tp] = True
                elif r["error"]:
                    backoff = True
                else:
                    self.broker.apply_effects(rm.append_as_follower(tp, r["records"], r["high_watermark"]))
        if backoff:
            self._stop.wait(BACKOFF_S)
