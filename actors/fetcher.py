"""Follower fetchers: one thread per (this broker, leader broker) pair (Kafka's
ReplicaFetcherThread), pulling for every partition this broker follows on that leader.

Rules:
- A partition first truncates by leader epoch (KIP-101/279): it asks the leader
  OffsetsForLeaderEpoch for its latest local epoch and truncates as the replica manager
  decides, repeating with an older epoch when told to; only then does it fetch.
- Fetches are long-polls (`max_wait_ms`) carrying each partition's fetch offset, last
  fetched epoch and current leader epoch; what comes back is appended as follower and the
  leader's HW applied (the replica manager enforces truncate-before-HW, KAFKA-14704).
- A diverging-epoch answer sends the partition back to truncation. Every answer carries the
  leader's log start, which the follower adopts (below its own HW); OFFSET_OUT_OF_RANGE below
  that start restarts the replica empty at it (retention reached the leader first).
- Errors (leader gone, NOT_LEADER, FENCED_LEADER_EPOCH) back off briefly and retry; the
  controller's next LeaderAndIsr moves the partition to another fetcher or stops it.
- Every replica-manager call is made under the broker's lock; effects go back to the
  broker (`broker.apply_effects`).
"""

from __future__ import annotations

import logging
import threading

import ray

from replicas.errors import KafkaError, OffsetOutOfRange

OFFSET_OUT_OF_RANGE = OffsetOutOfRange.code
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
        """OffsetsForLeaderEpoch for every partition still truncating (KIP-101/279)."""
        rm, lock = self.broker.rm, self.broker.lock
        with lock:
            todo = [tp for tp, pending in self.partitions.items() if pending]
        for tp in todo:
            with lock:
                if tp not in self.partitions:
                    continue
                pos = rm.follower_fetch_request(tp)
            epoch = pos.last_fetched_epoch
            for _ in range(64):
                if epoch < 0:                     # an empty log: nothing to truncate
                    with lock:
                        self.partitions[tp] = False
                    break
                error, leader_epoch, end_offset = ray.get(
                    leader.offsets_for_leader_epoch.remote(tp, pos.current_leader_epoch, epoch),
                    timeout=30)
                if error:
                    raise RuntimeError(f"OffsetsForLeaderEpoch {tp}: error {error}")
                with lock:
                    if tp not in self.partitions:
                        break
                    r = rm.follower_truncate(tp, leader_epoch, end_offset,
                                             leader_epoch=pos.current_leader_epoch)
                    self.broker.apply_effects(r.effects)
                    if r.completed or r.stale:
                        self.partitions[tp] = False
                        break
                    epoch = r.next_epoch

    def _fetch(self, leader) -> None:
        rm, lock = self.broker.rm, self.broker.lock
        with lock:
            positions = {tp: rm.follower_fetch_request(tp)
                         for tp, pending in self.partitions.items() if not pending}
        if not positions:
            return
        requests = [(tp, p.fetch_offset, p.current_leader_epoch, p.last_fetched_epoch)
                    for tp, p in positions.items()]
        results = ray.get(leader.fetch_many.remote(self.broker.id, requests, MAX_WAIT_MS, 1),
                          timeout=MAX_WAIT_MS / 1000 + 30)
        backoff = False
        with lock:
            for tp, r in results.items():
                tp, pos = tuple(tp), positions[tuple(tp)]
                if self.partitions.get(tp) is not False:
                    continue                      # removed, or back to truncation meanwhile
                try:
                    if r["diverging_epoch"] is not None:
                        epoch, end_offset = r["diverging_epoch"]
                        t = rm.follower_truncate(tp, epoch, end_offset,
                                                 leader_epoch=pos.current_leader_epoch)
                        self.broker.apply_effects(t.effects)
                    elif r["error"] == OFFSET_OUT_OF_RANGE and \
                            r["log_start_offset"] > pos.fetch_offset:
                        # retention or DeleteRecords on the leader removed what we lack
                        self.broker.apply_effects(rm.follower_start_at_leader_log_start(
                            tp, r["log_start_offset"], r["high_watermark"],
                            leader_epoch=pos.current_leader_epoch))
                    elif r["error"]:
                        backoff = True
                    else:
                        self.broker.apply_effects(rm.append_as_follower(
                            tp, r["records"], r["high_watermark"], fetch_offset=pos.fetch_offset,
                            leader_epoch=pos.current_leader_epoch,
                            leader_log_start_offset=r["log_start_offset"]))
                except KafkaError as exc:         # leadership changed under us: the next
                    log.info("fetcher %s: %s", tp, exc)   # LeaderAndIsr moves the partition
        if backoff:
            self._stop.wait(BACKOFF_S)
