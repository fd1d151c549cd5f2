"""The replica manager's reads: Kafka's ReplicaManager.fetchMessages / readFromLog for one
partition, the leader's (consumers and followers) and a follower's for consumers, with
ListOffsets and OffsetsForLeaderEpoch. A part of `replicas.replica_manager.ReplicaManager`
(its state: `_partitions`, the offline partitions, `_process`, `_persist`).

Rules:
- `fetch` (Kafka's fetchRecords): KIP-320 fencing by current_leader_epoch first (74 older / 75
  newer), then the role (6): leader only, except for a consumer carrying client metadata
  (`client`: Fetch v11+, FetchParams.fetchOnlyLeader false), which a follower serves too
  from its own log, below its own HW (its own LSO for read_committed: a follower keeps
  its producer state from the leader's batches and markers). KIP-392: when this broker
  leads, has a `replica.selector.class` and the selector prefers a follower for that
  client (replicas/replica_selector.py; followers in the committed ISR whose LEO and log
  start, as their last fetch said, cover the offset), the answer is that
  `preferred_read_replica` with no records, no error and this replica's marks, the read
  skipped (ReplicaManager.readFromLog). Consumers (replica_id -1): offsets outside [log
  start, LEO] → OFFSET_OUT_OF_RANGE (1); data only below the HW (an offset in [HW, LEO]
  reads nothing, as Kafka: a consumer may be ahead of a new leader's or a follower's HW).
  Followers (replica_id >= 0) must
  be a replica of the partition (else 6); below the log start → OFFSET_OUT_OF_RANGE; with
  last_fetched_epoch >= 0 the leader checks divergence (Kafka's
  `validateFetchOffsetAndMaybeGetDivergingEpoch`): its (epoch, end) for
  that epoch has end < fetch offset or epoch < last_fetched_epoch → diverging_epoch=(epoch,
  end), no records, follower state untouched; else reads up to the LEO and records
  FollowerFetched (HW, ISR expansion, acks=-1 completions; the follower's log start as
  its fetch carried it). The returned HW is the one AFTER that update.
- Every batch read from a segment file is CRC-checked before it is served: a corrupt one
  is never sent, and its log directory goes offline (KAFKA_STORAGE_ERROR,
  replicas/log_dirs.py), as an I/O error while reading does. A read at the log end that
  is exactly the last append is served from memory (Log.read_tail): those bytes were
  validated before they were written and never came back from the disk.
"""

from __future__ import annotations

from replicas import offsets
from replicas import partition_state as ps
from replicas import records
from replicas.errors import CorruptRecord
from replicas.log import Log
from replicas.metadata_cache import TopicPartition
from replicas.partition_state import (NO_EPOCH, NONE, NOT_LEADER_OR_FOLLOWER,
                                     OFFSET_OUT_OF_RANGE)
from replicas.replica_selector import ReplicaView, preferred_read_replica
from replicas.replica_types import (READ_COMMITTED, READ_UNCOMMITTED, ClientMetadata,
                                    FetchResult, LeaderMarks)


class LeaderReads:
    @property
    def selects_read_replicas(self) -> bool:
        """Whether a consumer may be sent to a follower (replica.selector.class is set)."""
        return self._selector is not None

    @staticmethod
    def _read_error(part, replica_id: int, current_leader_epoch: int,
                    client: ClientMetadata | None) -> int:
        """Kafka's Partition.getLocalLog with FetchParams.fetchOnlyLeader: the leader epoch
        asked first, then the role: followers' fetches and consumers without client
        metadata (Fetch < 11, the native door) need the leader; a consumer with it may
        read a follower too (an inactive replica, stopped without deletion, serves none)."""
        state = part.state
        code = ps.check_leader_epoch(state.leader_epoch, current_leader_epoch)
        if code != NONE or state.is_leader:
            return code
        if replica_id < 0 and client is not None and state.role is ps.Role.FOLLOWER:
            return NONE
        return NOT_LEADER_OR_FOLLOWER

    def _preferred_read_replica(self, part, client: ClientMetadata | None,
                                offset: int) -> int:
        """Kafka's findPreferredReadReplica (replicas/replica_selector.py): a consumer's
        preferred read replica when this broker leads `part`, -1 for none."""
        state = part.state
        if self._selector is None or client is None or not state.is_leader:
            return -1
        live = self.metadata.live_brokers

        def rack_of(broker_id: int) -> str | None:
            broker = live.get(broker_id)
            if broker is None or (client.listener is not None and not any(
                    e.listener == client.listener for e in broker.endpoints)):
                return None
            return broker.rack
        now = self._clock()
        followers = [ReplicaView(r, rack_of(r), p.log_end_offset,
                                 now - p.last_caught_up_time_ms)
                     for r, p in state.followers.items()
                     if r in state.isr and p.log_start_offset <= offset <= p.log_end_offset]
        leader = ReplicaView(self.broker_id, rack_of(self.broker_id), part.log.log_end_offset, 0)
        return preferred_read_replica(self._selector, client.rack_id, leader, followers)

    def fetch(self, tp, offset: int, max_bytes: int, replica_id: int = -1,
              current_leader_epoch: int = -1, last_fetched_epoch: int = -1,
              isolation_level: int = READ_UNCOMMITTED, client: ClientMetadata | None = None,
              log_start_offset: int = -1) -> FetchResult:
        part = self._partitions.get(TopicPartition(*tp))
        if part is None:
            return FetchResult(self._not_hosted(tp),
                               message=self._not_hosted_message(tp))
        try:
            return self._fetch(part, offset, max_bytes, replica_id, current_leader_epoch,
                               last_fetched_epoch, isolation_level, client, log_start_offset)
        except (OSError, CorruptRecord) as exc:
            return FetchResult(self._storage_error(part, exc),
                               message=self._offline_message(part.tp))

    def _fetch(self, part, offset: int, max_bytes: int, replica_id: int,
               current_leader_epoch: int, last_fetched_epoch: int, isolation_level: int,
               client: ClientMetadata | None, log_start_offset: int) -> FetchResult:
        tp = part.tp
        state, log = part.state, part.log
        code = self._read_error(part, replica_id, current_leader_epoch, client)
        if code == NONE and replica_id >= 0 and (replica_id == self.broker_id
                                                 or replica_id not in state.followers):
            code = NOT_LEADER_OR_FOLLOWER
        if code:
            return FetchResult(code, message=f"{tp[0]}-{tp[1]} on broker {self.broker_id}: role "
                               f"{state.role.value}, leader epoch {state.leader_epoch}, asked "
                               f"{current_leader_epoch} by replica {replica_id}")
        start, end, hw = log.log_start_offset, log.log_end_offset, state.high_watermark
        lso = part.last_stable_offset()
        if replica_id < 0:
            preferred = self._preferred_read_replica(part, client, offset)
            if preferred >= 0:       # Kafka skips the read: the client goes there instead
                return FetchResult(NONE, b"", hw, start, end, lso,
                                   preferred_read_replica=preferred)
        if replica_id >= 0 and last_fetched_epoch >= 0 and offset >= start:
            # Kafka's validateFetchOffsetAndMaybeGetDivergingEpoch: below the log start is
            # out of range whatever the epochs say (the follower restarts at our start)
            epoch, epoch_end = log.epoch_cache.end_offset_for(last_fetched_epoch, end)
            if epoch_end < offset or epoch < last_fetched_epoch:
                return FetchResult(NONE, b"", hw, start, end, lso,
                                   diverging_epoch=(epoch, epoch_end))
        if not start <= offset <= end:
            return FetchResult(OFFSET_OUT_OF_RANGE, b"", hw, start, end, lso,
                               message=f"offset {offset} outside [{start}, {end}]")
        limit = min(max_bytes, self.config.max_fetch_bytes) if max_bytes > 0 \
            else self.config.max_fetch_bytes
        if replica_id < 0:
            if isolation_level != READ_COMMITTED:
                return FetchResult(NONE, self._read(log, offset, limit, hw), hw, start, end,
                                   lso)
            data = self._read(log, offset, limit, lso)
            return FetchResult(NONE, data, hw, start, end, lso,
                               part.producers.aborted_transactions(offset, data))
        data = self._read(log, offset, limit, None)
        effects = self._flush_for_ack(part)
        effects += self._process(part, ps.FollowerFetched(replica_id, offset, self._clock(),
                                                         log_start_offset))
        self._persist()
        return FetchResult(NONE, data, state.high_watermark, start, end,
                           part.last_stable_offset(), effects=effects)

    @staticmethod
    def _read(log: Log, offset: int, limit: int, max_offset: int | None) -> bytes:
        """A read whose every batch passed its CRC: a corrupt one raises CorruptRecord and
        is never served (its directory goes offline); the last append's bytes come from
        memory, checked when they were appended."""
        data = log.read_tail(offset, limit, max_offset)
        if data is not None:
            return data
        data = log.read(offset, limit, max_offset=max_offset)
        if data:
            try:
                records.validate_batches(data, require_records=False)
            except CorruptRecord as exc:
                raise CorruptRecord(f"{log.dir.name} read at offset {offset}: {exc}") from exc
        return data

    def fetch_ready(self, tp, offset: int, replica_id: int = -1,
                    current_leader_epoch: int = -1,
                    isolation_level: int = READ_UNCOMMITTED,
                    client: ClientMetadata | None = None) -> bool:
        """Whether a fetch parked at `offset` may have something to answer now: records past
        it within what that replica may read (a follower: the log end; a consumer: the HW,
        the LSO for read_committed, of whichever replica serves it here), or an error
        (unknown, not served here, another leader epoch, out of range). The purgatory's
        cheap check before it reads again (Kafka's DelayedFetch.tryComplete)."""
        part = self._partitions.get(TopicPartition(*tp))
        if part is None or self._read_error(part, replica_id, current_leader_epoch, client):
            return True
        end = part.log.log_end_offset
        if replica_id >= 0:
            limit = end
        elif isolation_level == READ_COMMITTED:
            try:
                limit = part.last_stable_offset()
            except OSError as exc:
                self._storage_error(part, exc)
                return True
        else:
            limit = part.state.high_watermark
        return offset < limit or offset > end or offset < part.log.log_start_offset

    def leader_marks(self, tp, current_leader_epoch: int = -1,
                     isolation_level: int = READ_UNCOMMITTED,
                     client: ClientMetadata | None = None,
                     fetch_offset: int = -1) -> LeaderMarks | None:
        """What a quiet partition's fetch answer carries, without a read, while this broker
        serves `tp` at that epoch to that fetcher (its leader; a follower too for
        a client with metadata) and would not send it to a preferred read replica (from
        `fetch_offset`), else None: (high watermark, log start, log end, last stable offset,
        aborted transactions: () for read_committed, None otherwise) of this replica, in
        FetchResult's order after `records` (`FetchResult(0, b"", *marks)`)."""
        part = self._partitions.get(TopicPartition(*tp))
        if part is None or self._read_error(part, -1, current_leader_epoch, client) or \
                self._preferred_read_replica(part, client, fetch_offset) >= 0:
            return None
        log = part.log
        try:
            lso = part.last_stable_offset()
        except OSError as exc:
            self._storage_error(part, exc)
            return None
        return LeaderMarks(part.state.high_watermark, log.log_start_offset, log.log_end_offset,
                           lso, () if isolation_level == READ_COMMITTED else None)

    def offsets_for_leader_epoch(self, tp, current_leader_epoch: int,
                                 leader_epoch: int) -> tuple[int, int, int]:
        """(error, epoch, end offset) for an OffsetsForLeaderEpoch request (KIP-101/279)."""
        part = self._partitions.get(TopicPartition(*tp))
        if part is None:
            return self._not_hosted(tp), NO_EPOCH, -1
        return offsets.offsets_for_leader_epoch(part, current_leader_epoch, leader_epoch)

    def list_offset(self, tp, timestamp: int, current_leader_epoch: int = -1,
                    isolation_level: int = READ_UNCOMMITTED) -> offsets.OffsetLookup:
        """ListOffsets for one partition (replicas/offsets.py): nothing at or past the HW is
        answered, nothing at or past the LSO for read_committed (Kafka's
        fetchOffsetForTimestamp: LATEST is then the LSO)."""
        part = self._partitions.get(TopicPartition(*tp))
        if part is None:
            return offsets.OffsetLookup(self._not_hosted(tp))
        try:
            bound = part.last_stable_offset() if isolation_level == READ_COMMITTED and \
                part.state.is_leader else None
            return offsets.list_offset(part, timestamp, current_leader_epoch, bound)
        except OSError as exc:
            return offsets.OffsetLookup(self._storage_error(part, exc))

