"""How an append to `__consumer_offsets` that failed is answered in coordinator terms.

Rules (GroupMetadataManager.scala; the codes are replicas/errors.py's table):
- offset commits, plain and transactional (`maybeConvertOffsetCommitError`):
  NETWORK_EXCEPTION (a failed KIP-890 transaction verification) → COORDINATOR_LOAD_IN_PROGRESS
  (retried without a coordinator lookup); UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS,
  NOT_ENOUGH_REPLICAS_AFTER_APPEND → COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER,
  KAFKA_STORAGE_ERROR → NOT_COORDINATOR; MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE,
  INVALID_FETCH_SIZE → INVALID_COMMIT_OFFSET_SIZE; others (INVALID_TXN_STATE,
  INVALID_PRODUCER_EPOCH, PRODUCER_FENCED, ...) unchanged.
- TxnOffsetCommit v0/v1 answers (KafkaApis.scala handleTxnOffsetCommitRequest): those
  clients do not know COORDINATOR_LOAD_IN_PROGRESS (KAFKA-7296) → COORDINATOR_NOT_AVAILABLE.
- group metadata (`storeGroup`): the same, except REQUEST_TIMED_OUT → REBALANCE_IN_PROGRESS
  and the too-large family → UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

from replicas.errors import ErrorCode as E

_UNAVAILABLE = {E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS,
                E.NOT_ENOUGH_REPLICAS_AFTER_APPEND}
_MOVED = {E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR}
_TOO_LARGE = {E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE}


def commit_append_error(code: int) -> int:
    """The OffsetCommit (and TxnOffsetCommit) answer for an append that ended with `code`."""
    if code == E.NETWORK_EXCEPTION:
        return E.COORDINATOR_LOAD_IN_PROGRESS
    if code in _UNAVAILABLE:
        return E.COORDINATOR_NOT_AVAILABLE
    if code in _MOVED:
        return E.NOT_COORDINATOR
    if code in _TOO_LARGE:
        return E.INVALID_COMMIT_OFFSET_SIZE
    return code


def group_append_error(code: int) -> int:
    """The SyncGroup/JoinGroup answer for a group-metadata append that ended with `code`."""
    if code in _UNAVAILABLE:
        return E.COORDINATOR_NOT_AVAILABLE
    if code in _MOVED:
        return E.NOT_COORDINATOR
    if code == E.REQUEST_TIMED_OUT:
        return E.REBALANCE_IN_PROGRESS
    if code in _TOO_LARGE:
        return E.UNKNOWN_SERVER_ERROR
    return code


def txn_commit_answer(code: int, version: int) -> int:
    """A TxnOffsetCommit partition's answer `code` as a client of `version` may read it."""
    if version < 2 and code == E.COORDINATOR_LOAD_IN_PROGRESS:
        return E.COORDINATOR_NOT_AVAILABLE
    return code
