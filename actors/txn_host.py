"""TxnHost: the broker's shell around the pure transaction coordinator (transactions/), a
CoordinatorHost (actors/coordinator_host.py) of `__transaction_state`.

Rules:
- The coordinator epoch of a loaded partition is the partition's leader epoch when this
  broker became its leader (Kafka's TransactionStateManager takes the same), so a newer
  coordinator's markers fence an older one's at the partition leaders.
- `WriteMarkers` effects go to the marker channel (actors/txn_markers.py), which reports
  `MarkersWritten` once every partition of the transaction has its marker (or is gone).
- Producer ids come from the broker's ZooKeeper block (Kafka's ProducerIdManager), shared
  with idempotent producers (KafkaBrokerApi.new_producer_id).
- A client's AddPartitionsToTxn or AddOffsetsToTxn that the coordinator answers
  CONCURRENT_TRANSACTIONS (the previous transaction's markers are still being written: a
  producer begins its next transaction right after a commit) is not answered at once: it
  is asked again each time one of the coordinator's writes completes, for up to
  CONCURRENT_RETRY_MS, and answered with the first other result (or that error after it).
  The client would retry after its back-off (librdkafka and Kafka's client wait 20-100 ms);
  asking again the moment the transaction completes gives the same answer without the
  wait. The coordinator itself stays Kafka's.
- The coordinator learns the cluster's finalized transaction.version from the broker's
  /feature watch (`set_transaction_version`).
- `__transaction_state` is created on first use (FindCoordinator key type 1):
  transaction.state.log.num.partitions (50), replication factor min(3, live brokers),
  cleanup.policy compact, min.insync.replicas min(2, RF), unclean election off
  (transactions/config.py topic_configs).
"""

from __future__ import annotations

import logging
import threading

from actors.coordinator_host import CoordinatorHost, Waiter, clock_ms
from protocol.api import Deferred
from replicas.errors import ErrorCode as E
from actors.txn_markers import TxnMarkerChannel
from replicas import records
from transactions import messages as m
from transactions.config import TransactionCoordinatorConfig
from transactions.coordinator import TransactionCoordinator
from transactions.records import TxnRecord

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
CONCURRENT_RETRY_MS = 100


class TxnHost(CoordinatorHost):
    topic = TXN_TOPIC
    messages = m

    def __init__(self, broker, config: TransactionCoordinatorConfig, new_producer_id):
        self.config = config
        self._parked: list = []             # (deadline ms, ask again, answer as is)
        self._parked_lock = threading.Lock()
        self.markers = TxnMarkerChannel(broker, self.markers_written)
        super().__init__(broker, TransactionCoordinator(broker.id, clock_ms, new_producer_id,
                                                        config), "txn")

    def call(self, make_event, rid: int | None = None) -> Deferred:
        probe = make_event(0)
        if not (isinstance(probe, m.AddOffsetsToTxn) or
                isinstance(probe, m.AddPartitionsToTxn) and not probe.verify_only):
            return super().call(make_event, rid)
        outer = Waiter()
        deadline = clock_ms() + CONCURRENT_RETRY_MS

        def attempt():
            inner = super(TxnHost, self).call(make_event)

            def answered():
                result = inner.result()
                if result.error == E.CONCURRENT_TRANSACTIONS and clock_ms() < deadline:
                    with self._parked_lock:
                        self._parked.append((deadline, attempt, lambda: finish(result)))
                    self.broker.timers.add(max(0, deadline - clock_ms()) / 1000 + 0.001,
                                           self._expire_parked)
                    return
                finish(result)
            inner.when_ready(answered)

        def finish(result):
            for callback in outer.answer(result):
                callback()
        attempt()
        return Deferred(outer.answer_when_ready, outer.when_ready)

    def set_transaction_version(self, level: int) -> None:
        """The cluster's finalized transaction.version (ZooKeeper's /feature)."""
        self.process(m.FinalizedTransactionVersion(int(level)))

    def process(self, event) -> None:
        super().process(event)
        if isinstance(event, m.AppendDone) and self._parked:
            self._expire_parked(retry=True)

    def _expire_parked(self, retry: bool = False) -> None:
        """A write completed (`retry`): ask every parked request again; else answer those
        past their deadline as they were answered."""
        now = clock_ms()
        with self._parked_lock:
            due = [p for p in self._parked if retry or now >= p[0]]
            self._parked = [p for p in self._parked if p not in due]
        for deadline, again, give_up in due:
            (again if now < deadline else give_up)()

    def on_effect(self, effect) -> None:
        if isinstance(effect, m.WriteMarkers):
            self.markers.send(effect)
        else:
            super().on_effect(effect)

    def markers_written(self, done: m.MarkersWritten) -> None:
        self._acks.submit(self.process, done)

    # -- load / unload ---------------------------------------------------------------------------
    def load_events(self, partition: int, leader_epoch: int):
        yield m.BeginLoad(partition)
        loaded = tuple(TxnRecord(r.key, r.value)
                       for _, raw in self.read_batches(partition)
                       for r in records.decode_records(raw) if r.key is not None)
        yield m.LoadPartition(partition, leader_epoch, loaded)
        (log.info if loaded else log.debug)("broker %s: loaded %d records of %s-%s (epoch %s)",
                                            self.broker.id, len(loaded), self.topic, partition,
                                            leader_epoch)

    def unload_event(self, partition: int, leader_epoch: int):
        return m.UnloadPartition(partition, leader_epoch)

    # -- the topic --------------------------------------------------------------------------------
    def topic_plan(self) -> tuple[int, int, dict]:
        return (self.config.transaction_state_log_num_partitions,
                self.config.transaction_state_log_replication_factor,
                dict(self.config.topic_configs()))

    def stop(self) -> None:
        self.markers.stop()
        super().stop()
