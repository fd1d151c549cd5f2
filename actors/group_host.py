"""GroupHost: the broker's shell around the pure group coordinator (coordinator/), a
CoordinatorHost (actors/coordinator_host.py) of `__consumer_offsets`.

Rules:
- Appends: a plain Append is one batch of key/value records; a TxnOffsetCommit's Append is
  a TRANSACTIONAL batch of its producer id and epoch (Kafka's GroupMetadataManager
  storeOffsets), pending in the coordinator until that producer's marker.
- A TxnOffsetCommit is verified first (KIP-890, as Kafka's GroupCoordinator does before
  doTxnCommitOffsets): unless the producer already has a transaction open on the group's
  `__consumer_offsets` partition, the transaction coordinator must confirm the partition
  is in the transaction (actors/txn_verification.py); its error answers every partition
  (coordinator/error_codes.py), else the event goes to the coordinator and its append
  carries the verification's guard. Verifying before the event keeps appends in token
  order.
- Load: every batch of the partition's log from the log start, in order: key/value records
  (with their producer id, whether transactional, and log offset) and, for each control
  batch, a TxnMarkerRecord (the producer's COMMIT or ABORT); the coordinator replays them
  (pending transactional offsets become committed or are dropped at their marker).
- Transaction completion: after the leader appended a producer's COMMIT/ABORT marker to
  `__consumer_offsets` partitions (WriteTxnMarkers), `complete_txn` hands CompleteTxn to
  the coordinator (Kafka's onTransactionCompleted).
- Share groups (actors/share_host.py) live beside the coordinator's groups under the same
  ids: ListGroups lists them (type and protocol type "share"), DeleteGroups deletes an
  empty one, a JoinGroup for one is INCONSISTENT_GROUP_PROTOCOL and a
  ConsumerGroupHeartbeat GROUP_ID_NOT_FOUND "Group G is not a consumer group.".
- `__consumer_offsets` is created on first use: offsets.topic.num.partitions partitions,
  replication factor min(3, live brokers) (Kafka's offsets.topic.replication.factor,
  capped so a small cluster works), cleanup.policy compact.
"""

from __future__ import annotations

import logging
import time

from actors.coordinator_host import CoordinatorHost, Waiter, clock_ms
from coordinator import messages as m
from coordinator.error_codes import commit_append_error, txn_commit_answer
from coordinator.config import GroupCoordinatorConfig
from coordinator.coordinator import GroupCoordinator
from coordinator.records import OffsetsRecord
from replicas import records
from replicas.errors import ErrorCode as E
from replicas.errors import KafkaError
from replicas.control import CONTROL_FLAG, TRANSACTIONAL_FLAG, control_type
from replicas.control import COMMIT

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_REPLICATION_FACTOR = 3


def _commit_result(event, code: int) -> m.OffsetCommitResult:
    """Every partition of a TxnOffsetCommit answered `code` (a failed verification)."""
    answer = txn_commit_answer(commit_append_error(code), event.version)
    return m.OffsetCommitResult(tuple(m.CommitPartitionResult(o.topic, o.partition, answer)
                                      for o in event.offsets))


class GroupHost(CoordinatorHost):
    topic = OFFSETS_TOPIC
    messages = m

    def __init__(self, broker, config: GroupCoordinatorConfig):
        self.config = config
        super().__init__(broker, GroupCoordinator(broker.id, clock_ms, config), "group")

    def call(self, make_event):
        from protocol.api import Deferred
        rid = next(self._ids)
        event = make_event(rid)
        if isinstance(event, (m.ListGroups, m.DeleteGroups)):
            return self._with_share_groups(event, rid)
        taken = self._share_group_answer(event)
        if taken is not None:
            return Deferred.done(taken)
        if not isinstance(event, m.TxnOffsetCommit):
            return super().call(lambda _rid: event, rid)
        tp = (self.topic, self.partition_for(event.group_id))
        add = event.version >= 5      # transaction.version 2: the offsets partition is added
        try:
            with self.broker.lock:
                guard = self.broker.rm.maybe_start_verification(
                    tp, event.producer_id, event.producer_epoch, supports_epoch_bump=add)
        except KafkaError as exc:                  # not the offsets partition's leader
            return Deferred.done(_commit_result(event, exc.code))
        if guard is None:
            return super().call(lambda _rid: event, rid)
        waiter = self._waiters[rid] = Waiter()
        asked = self.broker.verifier.verify(event.transactional_id, event.producer_id,
                                            event.producer_epoch, [tp], add=add)

        def verified():
            error = asked.errors.get(tp, E.NONE)
            if error:
                self._waiters.pop(rid, None)
                for callback in waiter.answer(_commit_result(event, error)):
                    callback()
            else:
                self.process(event)
        asked.when_ready(lambda: self._acks.submit(verified))
        return Deferred(waiter.answer_when_ready, waiter.when_ready)

    def _share_group_answer(self, event):
        """A share group's id is refused to the other kinds (GroupMetadataManager):
        JoinGroup INCONSISTENT_GROUP_PROTOCOL, ConsumerGroupHeartbeat GROUP_ID_NOT_FOUND."""
        from coordinator.consumer_group import HeartbeatAnswer
        if isinstance(event, m.JoinGroup) and self.broker.shares.is_share_group(event.group_id):
            return m.JoinGroupResult(E.INCONSISTENT_GROUP_PROTOCOL, "")
        if isinstance(event, m.ConsumerGroupHeartbeat) and \
                self.broker.shares.is_share_group(event.request.group_id):
            return HeartbeatAnswer(E.GROUP_ID_NOT_FOUND, f"Group {event.request.group_id} is "
                                                         f"not a consumer group.")
        return None

    def _with_share_groups(self, event, rid: int):
        """ListGroups and DeleteGroups cover the share groups this broker coordinates too
        (actors/share_host.py): listed with type and protocol type "share", deleted when
        empty (NON_EMPTY_GROUP otherwise)."""
        from dataclasses import replace
        shares = self.broker.shares
        if isinstance(event, m.ListGroups):
            states = {s.lower() for s in event.states}
            types = {t.lower() for t in event.types}
            extra = tuple(m.ListedGroup(g, "share", state, "share")
                          for g, state in shares.listed()
                          if (not states or state.lower() in states)
                          and (not types or "share" in types))
            return super().call(lambda _rid: event, rid).then(
                lambda r: replace(r, groups=tuple(r.groups) + extra))
        mine = {g: shares.delete(g) for g in event.group_ids if shares.is_share_group(g)}
        rest = tuple(g for g in event.group_ids if g not in mine)
        pending = super().call(lambda _rid: replace(event, group_ids=rest), rid)
        return pending.then(lambda r: replace(r, groups=tuple(r.groups) + tuple(
            m.DeletedGroup(g, code) for g, code in mine.items())))

    def batch_of(self, effect) -> bytes:
        if not getattr(effect, "transactional", False):
            return super().batch_of(effect)
        return bytes(records.build_batch(
            [r.value for r in effect.records], [r.key for r in effect.records],
            timestamps_ms=int(time.time() * 1000), producer_id=effect.producer_id,
            producer_epoch=effect.producer_epoch, base_sequence=0, transactional=True))

    def status(self, group_id: str) -> tuple[int | None, bool]:
        """(NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / None, whether a classic or
        consumer group holds the id) for the share groups' host."""
        with self._lock:
            return (self.coordinator.group_status(group_id),
                    self.coordinator.group(group_id) is not None)

    def set_group_configs(self, configs: dict[str, dict[str, str]]) -> None:
        self.process(m.GroupConfigs(tuple(sorted(
            (g, tuple(sorted(c.items()))) for g, c in configs.items()))))

    def complete_txn(self, producer_id: int, partitions, committed: bool) -> None:
        self.process(m.CompleteTxn(producer_id, tuple(sorted(partitions)), committed))

    # -- load / unload ---------------------------------------------------------------------------
    def load_events(self, partition: int, leader_epoch: int):
        yield m.BeginLoad(partition)
        loaded = tuple(self._records(partition))
        yield m.LoadPartition(partition, loaded)
        # Kafka logs every load; Ray forwards actor logs to drivers: only real ones
        (log.info if loaded else log.debug)("broker %s: loaded %d records of %s-%s",
                                            self.broker.id, len(loaded), self.topic, partition)

    def unload_event(self, partition: int, leader_epoch: int):
        return m.UnloadPartition(partition)

    def _records(self, partition: int):
        for h, raw in self.read_batches(partition):
            if h.attributes & CONTROL_FLAG:
                if h.producer_id >= 0:
                    yield m.TxnMarkerRecord(h.producer_id, control_type(raw) == COMMIT,
                                            h.base_offset)
                continue
            transactional = bool(h.attributes & TRANSACTIONAL_FLAG)
            for r in records.decode_records(raw):
                if r.key is not None:
                    yield OffsetsRecord(r.key, r.value, h.producer_id, transactional, r.offset)

    # -- the topic --------------------------------------------------------------------------------
    def topic_plan(self) -> tuple[int, int, dict]:
        return (self.config.offsets_topic_num_partitions, OFFSETS_REPLICATION_FACTOR,
                {"cleanup.policy": "compact"})

    def ensure_offsets_topic(self) -> bool:
        return self.ensure_topic()
