"""KIP-848 consumer groups in the group coordinator: ConsumerGroupHeartbeat,
ConsumerGroupDescribe, their records, and the checks other requests make on such a group.
`GroupCoordinator` (coordinator/coordinator.py) takes these methods as its own.

Rules (Kafka's GroupMetadataManager and GroupCoordinatorService, trunk 1eb7644):
- A consumer group lives in the classic cache as a `GroupMetadata` whose `consumer` is its
  membership (coordinator/consumer_group.py): offsets, their appends, expiry and loading
  are shared with classic groups; its classic part stays Empty.
- ConsumerGroupHeartbeat: the request's own checks first (INVALID_REQUEST with Kafka's
  message, UNSUPPORTED_ASSIGNOR), then the coordinator's (NOT_COORDINATOR,
  COORDINATOR_LOAD_IN_PROGRESS). v0 with an empty member id at epoch 0 gets one from the
  coordinator (v1: the client's). No group and an epoch other than 0 → GROUP_ID_NOT_FOUND
  "Consumer group G not found."; a classic group → GROUP_ID_NOT_FOUND "Group G is not a
  consumer group." unless it is empty and the member joins (epoch 0): then it becomes a
  consumer group, its offsets kept and its classic record tombstoned when it had a
  generation (maybeDeleteEmptyClassicGroup). The group answers (consumer_group.py); a
  refused request changes nothing.
- Persist before answering: every record of the group that changed
  (coordinator/consumer_records.py) and a tombstone for each that went away are ONE
  append; the answer goes when it is done (a failed append answers the mapped error,
  coordinator/error_codes.py, and the group's view of what the log holds goes back to
  before that append, so the next append writes those records again; an unloaded
  partition NOT_COORDINATOR); nothing changed → answered at once. Expired members (the Tick) are written the same way, nobody waiting.
- A classic JoinGroup to a consumer group with members → INCONSISTENT_GROUP_PROTOCOL
  (classic members inside a consumer group, Kafka's online migration, are not served); to
  an empty one → the group becomes classic again, its records tombstoned
  (maybeDeleteEmptyConsumerGroup).
- ConsumerGroupDescribe per group: unknown → GROUP_ID_NOT_FOUND "Group G not found.", a
  classic group → "Group G is not a consumer group."; else state, epochs, the assignor in
  use and every member with its assignment and target.
- Offsets (ConsumerGroup.validateOffsetCommit / validateOffsetFetch): a commit with epoch
  < 0 to a group without members is accepted; else the member must exist
  (UNKNOWN_MEMBER_ID), a non-transactional commit must be OffsetCommit v9+
  (UNSUPPORTED_VERSION) and carry the member's epoch (STALE_MEMBER_EPOCH). A fetch without
  member id and with epoch < 0 is accepted; else the same member and epoch checks.
"""

from __future__ import annotations

from dataclasses import replace

from coordinator import messages as m
from coordinator.consumer_group import ConsumerGroup, HeartbeatAnswer, check_request
from coordinator.consumer_records import group_records
from coordinator.error_codes import group_append_error
from coordinator.group import GroupMetadata
from coordinator.records import OffsetsRecord, group_metadata_record
from coordinator.states import GroupState
from replicas.errors import ErrorCode as E

G = GroupState
CONSUMER_GROUP_TYPE = "consumer"     # Kafka's Group.GroupType.CONSUMER (ListGroups v5)


class ConsumerGroupRequests:
    """The KIP-848 part of GroupCoordinator (uses its storage, clock, config and answers)."""

    def process_consumer_group_heartbeat(self, e: m.ConsumerGroupHeartbeat) -> None:
        r, now = e.request, self._now()
        refused = check_request(r, self.config.consumer.assignors)
        error = self._validate_group_status(r.group_id) if refused is None else None
        if refused is not None or error is not None:
            return self._respond(e.request_id, refused or HeartbeatAnswer(error))
        if e.version == 0 and r.member_epoch == 0 and r.member_id == "":
            r = replace(r, member_id=str(self._new_uuid()))
        group = self._storage.groups.get(r.group_id)
        joining = r.member_epoch == 0
        if group is None and not joining:
            return self._respond(e.request_id, HeartbeatAnswer(
                E.GROUP_ID_NOT_FOUND, f"Consumer group {r.group_id} not found."))
        if group is not None and group.consumer is None and not (joining and group.is_empty):
            return self._respond(e.request_id, HeartbeatAnswer(
                E.GROUP_ID_NOT_FOUND, f"Group {r.group_id} is not a consumer group."))
        config = self.config.consumer_for(self.group_configs.get(r.group_id, {}))
        if group is not None and group.consumer is not None:
            consumer = group.consumer
            consumer.config = config
        else:
            consumer = ConsumerGroup(r.group_id, config)
        answer = consumer.heartbeat(r, e.topics, now)
        if answer.error != E.NONE:
            return self._respond(e.request_id, answer)
        extra = []
        if group is None:
            group = self._storage.groups[r.group_id] = GroupMetadata(r.group_id, G.EMPTY, now)
        if group.consumer is None:          # Kafka's maybeDeleteEmptyClassicGroup
            if group.generation_id > 0:
                extra.append(group_metadata_record(group.group_id, None))
            group.protocol_type = group.protocol_name = group.leader_id = None
            group.generation_id, group.subscribed_topics = 0, None
            group.consumer = consumer
        rid = e.request_id

        def done(code: int) -> None:
            self._respond(rid, answer if code == E.NONE
                          else HeartbeatAnswer(group_append_error(code)))
        if not self._persist_consumer(group, extra, done,
                                      lambda: self._respond(rid, HeartbeatAnswer(
                                          E.NOT_COORDINATOR))):
            self._respond(rid, answer)

    def _persist_consumer(self, group: GroupMetadata, extra=(), on_done=None,
                          on_lost=None) -> bool:
        """Append what changed in the consumer group's records (tombstones for what went
        away); False when nothing did. A failed append puts back what the log held before
        it, so the next one writes those records again."""
        records = group_records(group.consumer) if group.consumer is not None else {}
        old, group.consumer_records = group.consumer_records, records
        out = list(extra) + [OffsetsRecord(k, v) for k, v in records.items() if old.get(k) != v]
        out += [OffsetsRecord(k, None) for k in old if k not in records]
        if not out:
            return False

        def done(code: int) -> None:
            if code != E.NONE:
                group.consumer_records = old
            if on_done is not None:
                on_done(code)
        self._storage.append(group.group_id, out, done, on_lost)
        return True

    def _convert_to_classic(self, group: GroupMetadata) -> None:
        """An empty consumer group taken by a classic JoinGroup (Kafka's
        maybeDeleteEmptyConsumerGroup): its records tombstoned, its offsets kept."""
        group.consumer = None
        self._persist_consumer(group)

    def process_group_configs(self, e: m.GroupConfigs) -> None:
        self.group_configs = {g: dict(items) for g, items in e.configs}

    def process_consumer_group_describe(self, e: m.ConsumerGroupDescribe) -> None:
        out = []
        for gid in e.group_ids:
            error = self._validate_group_status(gid, empty_id_ok=True)
            group = None if error is not None else self._storage.groups.get(gid)
            if error is not None:
                out.append(m.DescribedConsumerGroup(error, gid))
            elif group is None or group.consumer is None:
                message = (f"Group {gid} not found." if group is None
                           else f"Group {gid} is not a consumer group.")
                out.append(m.DescribedConsumerGroup(E.GROUP_ID_NOT_FOUND, gid, message))
            else:
                c = group.consumer
                out.append(m.DescribedConsumerGroup(
                    E.NONE, gid, None, c.state.value, c.group_epoch, c.target_epoch,
                    c.preferred_assignor(), tuple(m.DescribedConsumerMember(
                        x.member_id, x.instance_id, x.rack_id, x.assignment.member_epoch,
                        x.client_id, x.client_host, x.subscribed, dict(x.assignment.assigned),
                        dict(c.target.get(x.member_id, {})), x.subscribed_regex)
                        for x in c.members.values())))
        self._respond(e.request_id, m.ConsumerGroupDescribeResult(tuple(out)))

    @staticmethod
    def _validate_consumer_commit(group: GroupMetadata, member_epoch: int, member_id: str,
                                  transactional: bool, version: int) -> int | None:
        """Kafka's ConsumerGroup.validateOffsetCommit."""
        members = group.consumer.members
        if member_epoch < 0 and not members:
            return None
        member = members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if not transactional and version < 9:
            return E.UNSUPPORTED_VERSION
        if member_epoch != member.assignment.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return None
