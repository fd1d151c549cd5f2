"""The transaction coordinator's configuration: Kafka's names and defaults.

Rules:
- Field names are Kafka's property names with dots as underscores; `from_properties` takes a
  mapping keyed by Kafka's own names ("transaction.max.timeout.ms", ...) and rejects unknown
  ones, so a typo in a broker config is loud.
- Defaults (Kafka 3.8's TransactionStateManagerConfigs.java, TransactionLogConfigs.java,
  GroupCoordinatorConfig.java): transaction.max.timeout.ms 900000 (15 minutes),
  transactional.id.expiration.ms 604800000 (7 days),
  transaction.abort.timed.out.transaction.cleanup.interval.ms 10000,
  transaction.remove.expired.transaction.cleanup.interval.ms 3600000,
  transaction.state.log.num.partitions 50, transaction.state.log.replication.factor 3,
  transaction.state.log.min.isr 2, transaction.state.log.segment.bytes 104857600,
  offsets.topic.num.partitions 50 (AddOffsetsToTxn adds the group's `__consumer_offsets`
  partition to the transaction).
- Kafka's name for the expiration interval is transaction.remove.expired.TRANSACTION.cleanup.
  interval.ms; `transaction_remove_expired_transactional_id_cleanup_interval_ms` reads the
  same field.
- `topic_configs()` is what `__transaction_state` is created with
  (TransactionStateManager.transactionTopicConfigs): compacted, uncompressed, no unclean
  election, the min ISR and segment size above.
- Not Kafka configs: LOG_APPEND_RETRY_BACKOFF_MS, how long a failed CompleteCommit /
  CompleteAbort append waits before it is retried (Kafka retries on the marker sender
  thread's next pass; retry.backoff.ms's default is the number).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Mapping

from replicas.config_keys import dotted_key

LOG_APPEND_RETRY_BACKOFF_MS = 100


@dataclass(frozen=True, slots=True)
class TransactionCoordinatorConfig:
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    transaction_state_log_segment_bytes: int = 100 * 1024 * 1024
    offsets_topic_num_partitions: int = 50

    def __post_init__(self) -> None:
        if min(getattr(self, f.name) for f in fields(self)) < 1:
            raise ValueError(f"bad transaction coordinator config {self}")

    @property
    def transaction_remove_expired_transactional_id_cleanup_interval_ms(self) -> int:
        return self.transaction_remove_expired_transaction_cleanup_interval_ms

    def topic_configs(self) -> dict[str, str]:
        return {"unclean.leader.election.enable": "false", "compression.type": "uncompressed",
                "cleanup.policy": "compact",
                "min.insync.replicas": str(self.transaction_state_log_min_isr),
                "segment.bytes": str(self.transaction_state_log_segment_bytes)}

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> "TransactionCoordinatorConfig":
        known = {dotted_key(f.name): f.name for f in fields(cls)}
        unknown = sorted(set(props) - set(known))
        if unknown:
            raise ValueError(f"unknown transaction coordinator configs: {unknown}")
        return cls(**{known[k]: int(v) for k, v in props.items()})
