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
- `__transaction_state` is created on first use (FindCoordinator key type 1):
  transaction.state.log.num.partitions (50), replication factor min(3, live brokers),
  cleanup.policy compact, min.insync.replicas min(2, RF), unclean election off
  (transactions/config.py topic_configs).
"""

from __future__ import annotations

import logging

from actors.coordinator_host import CoordinatorHost, clock_ms
from actors.txn_markers import TxnMarkerChannel
from replicas import records
from transactions import messages as m
from transactions.config import TransactionCoordinatorConfig
from transactions.coordinator import TransactionCoordinator
from transactions.records import TxnRecord

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"


class TxnHost(CoordinatorHost):
    topic = TXN_TOPIC
    messages = m

    def __init__(self, broker, config: TransactionCoordinatorConfig, new_producer_id):
        self.config = config
        self.markers = TxnMarkerChannel(broker, self.markers_written)
        super().__init__(broker, TransactionCoordinator(broker.id, clock_ms, new_producer_id,
                                                        config), "txn")

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
