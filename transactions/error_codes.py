"""How an append to `__transaction_state` that failed is answered, and which error an old
client understands.

Rules (the codes are replicas/errors.py's table):
- A failed append (TransactionStateManager.appendTransactionToLog): UNKNOWN_TOPIC_OR_PARTITION,
  NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT →
  COORDINATOR_NOT_AVAILABLE (the client retries); NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR
  → NOT_COORDINATOR (the client looks the coordinator up again); MESSAGE_TOO_LARGE,
  RECORD_LIST_TOO_LARGE → UNKNOWN_SERVER_ERROR; any other code unchanged.
- PRODUCER_FENCED is new in InitProducerId v4, EndTxn v2, AddPartitionsToTxn v2 and
  AddOffsetsToTxn v2; an older request gets INVALID_PRODUCER_EPOCH instead (KafkaApis.scala
  handleInitProducerIdRequest, handleEndTxnRequest, handleAddPartitionsToTxnRequest,
  handleAddOffsetsToTxnRequest). The verification answer (AddPartitionsToTxn v4+,
  verify_only) is never converted.
"""

from __future__ import annotations

from replicas.errors import ErrorCode as E

_UNAVAILABLE = frozenset({E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS,
                          E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT})
_MOVED = frozenset({E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR})
_TOO_LARGE = frozenset({E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE})

# the first version of each request that understands PRODUCER_FENCED
FIRST_VERSION_WITH_PRODUCER_FENCED = {
    "InitProducerId": 4, "EndTxn": 2, "AddPartitionsToTxn": 2, "AddOffsetsToTxn": 2,
}


def append_error(code: int) -> int:
    """The coordinator's answer for an append to `__transaction_state` that ended with `code`."""
    if code in _UNAVAILABLE:
        return E.COORDINATOR_NOT_AVAILABLE
    if code in _MOVED:
        return E.NOT_COORDINATOR
    if code in _TOO_LARGE:
        return E.UNKNOWN_SERVER_ERROR
    return code


def for_version(request: str, version: int, code: int) -> int:
    """`code` as a `request` of `version` may be answered (PRODUCER_FENCED for old clients)."""
    if code == E.PRODUCER_FENCED and version < FIRST_VERSION_WITH_PRODUCER_FENCED[request]:
        return E.INVALID_PRODUCER_EPOCH
    return code
