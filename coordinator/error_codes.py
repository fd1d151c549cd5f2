"""Kafka error codes the group coordinator answers with, and how append errors map to them.

Rules:
- Codes are Kafka's numbers (Kafka's Errors.java); the ones replicas/errors.py
  already types are taken from there, the group-only ones are defined here as ints
  (replicas/errors.py stays as it is: these are answers, never raised).
- An append to `__consumer_offsets` that fails is reported to the client in coordinator terms
  (GroupMetadataManager.scala):
  - offset commits (`maybeConvertOffsetCommitError`): UNKNOWN_TOPIC_OR_PARTITION,
    NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND → COORDINATOR_NOT_AVAILABLE;
    NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR → NOT_COORDINATOR; MESSAGE_TOO_LARGE,
    RECORD_LIST_TOO_LARGE, INVALID_FETCH_SIZE → INVALID_COMMIT_OFFSET_SIZE; others unchanged.
  - group metadata (`storeGroup`): the same, except REQUEST_TIMED_OUT → REBALANCE_IN_PROGRESS
    and the too-large family → UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

from replicas import errors as _e

NONE = 0
UNKNOWN_SERVER_ERROR = _e.UnknownServerError.code          # -1
UNKNOWN_TOPIC_OR_PARTITION = _e.UnknownTopicOrPartition.code  # 3
INVALID_FETCH_SIZE = _e.InvalidFetchSize.code              # 4
NOT_LEADER_OR_FOLLOWER = _e.NotLeaderOrFollower.code       # 6
REQUEST_TIMED_OUT = _e.RequestTimedOut.code                # 7
MESSAGE_TOO_LARGE = _e.RecordTooLarge.code                 # 10
RECORD_LIST_TOO_LARGE = _e.RecordListTooLarge.code         # 18
NOT_ENOUGH_REPLICAS = _e.NotEnoughReplicas.code            # 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = _e.NotEnoughReplicasAfterAppend.code  # 20
KAFKA_STORAGE_ERROR = _e.KafkaStorageError.code            # 56
FENCED_INSTANCE_ID = _e.FencedInstanceId.code              # 82

OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
INVALID_COMMIT_OFFSET_SIZE = 28
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
UNSTABLE_OFFSET_COMMIT = 88

_UNAVAILABLE = {UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND}
_MOVED = {NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR}
_TOO_LARGE = {MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_FETCH_SIZE}


def commit_append_error(code: int) -> int:
    """The OffsetCommit answer for an append that ended with `code`."""
    if code in _UNAVAILABLE:
        return COORDINATOR_NOT_AVAILABLE
    if code in _MOVED:
        return NOT_COORDINATOR
    if code in _TOO_LARGE:
        return INVALID_COMMIT_OFFSET_SIZE
    return code


def group_append_error(code: int) -> int:
    """The SyncGroup/JoinGroup answer for a group-metadata append that ended with `code`."""
    if code in _UNAVAILABLE:
        return COORDINATOR_NOT_AVAILABLE
    if code in _MOVED:
        return NOT_COORDINATOR
    if code == REQUEST_TIMED_OUT:
        return REBALANCE_IN_PROGRESS
    if code in _TOO_LARGE:
        return UNKNOWN_SERVER_ERROR
    return code
