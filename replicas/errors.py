"""Kafka's error names and codes, shared by every layer of rayka.

Rules:
- One class per Kafka error a user (or a peer) can cause, carrying Kafka's numeric
  `code` and name, so a client of rayka sees the same vocabulary as a Kafka client.
- This module lives in `replicas/` because that is the lowest layer: `controller/`,
  `actors/` and `rayka/` import it from here; `rayka.errors` re-exports it for users.
- Errors must pickle (they cross Ray actor boundaries), so every class keeps its
  constructor signature `(message)`.
"""

from __future__ import annotations

__all__ = [
    "KafkaError", "ERRORS_BY_CODE", "error_for_code", "UnknownServerError",
    "OffsetOutOfRange", "CorruptRecord", "UnknownTopicOrPartition", "InvalidFetchSize",
    "LeaderNotAvailable", "NotLeaderOrFollower", "RequestTimedOut", "BrokerNotAvailable",
    "ReplicaNotAvailable", "RecordTooLarge", "StaleControllerEpoch", "InvalidTopic",
    "RecordListTooLarge", "NotEnoughReplicas", "NotEnoughReplicasAfterAppend",
    "InvalidRequiredAcks", "InvalidTimestamp", "TopicAlreadyExists", "InvalidPartitions",
    "InvalidReplicationFactor", "InvalidReplicaAssignment", "InvalidConfig",
    "NotController", "InvalidRequest", "OutOfOrderSequenceNumber",
    "DuplicateSequenceNumber", "InvalidProducerEpoch", "KafkaStorageError",
    "UnknownProducerId", "FencedLeaderEpoch", "UnknownLeaderEpoch", "StaleBrokerEpoch",
    "ElectionNotNeeded", "PreferredLeaderNotAvailable", "EligibleLeadersNotAvailable",
    "FencedInstanceId", "InvalidUpdateVersion", "InconsistentTopicId", "NewLeaderElected",
    "IneligibleReplica", "ReassignmentInProgress", "TopicDeletionDisabled", "InvalidRecord",
    "PolicyViolation",
]


class KafkaError(Exception):
    """Base of every typed rayka error. `code` is Kafka's error code."""

    code: int = -1
    retriable: bool = False

    def __init__(self, message: str = ""):
        super().__init__(message or self.__class__.__name__)
        self.message = message or self.__class__.__name__

    @property
    def name(self) -> str:
        return _NAMES.get(type(self), type(self).__name__)

    def __str__(self) -> str:
        return f"{self.name} ({self.code}): {self.message}"

    def __reduce__(self):
        return (type(self), (self.message,))


def _error(name: str, code: int, kafka_name: str, retriable: bool = False, doc: str = ""):
    cls = type(name, (KafkaError,), {"code": code, "retriable": retriable, "__doc__": doc})
    _NAMES[cls] = kafka_name
    return cls


_NAMES: dict[type, str] = {}

UnknownServerError = _error("UnknownServerError", -1, "UNKNOWN_SERVER_ERROR")
OffsetOutOfRange = _error("OffsetOutOfRange", 1, "OFFSET_OUT_OF_RANGE",
                          doc="Requested offset is outside the log's [start, end] range.")
CorruptRecord = _error("CorruptRecord", 2, "CORRUPT_MESSAGE", retriable=True,
                       doc="A record batch failed its magic, length or CRC-32C check.")
UnknownTopicOrPartition = _error("UnknownTopicOrPartition", 3, "UNKNOWN_TOPIC_OR_PARTITION",
                                 retriable=True)
InvalidFetchSize = _error("InvalidFetchSize", 4, "INVALID_FETCH_SIZE")
LeaderNotAvailable = _error("LeaderNotAvailable", 5, "LEADER_NOT_AVAILABLE", retriable=True)
NotLeaderOrFollower = _error("NotLeaderOrFollower", 6, "NOT_LEADER_OR_FOLLOWER", retriable=True)
RequestTimedOut = _error("RequestTimedOut", 7, "REQUEST_TIMED_OUT", retriable=True)
BrokerNotAvailable = _error("BrokerNotAvailable", 8, "BROKER_NOT_AVAILABLE")
ReplicaNotAvailable = _error("ReplicaNotAvailable", 9, "REPLICA_NOT_AVAILABLE", retriable=True)
RecordTooLarge = _error("RecordTooLarge", 10, "MESSAGE_TOO_LARGE",
                        doc="A batch is larger than max.message.bytes.")
StaleControllerEpoch = _error("StaleControllerEpoch", 11, "STALE_CONTROLLER_EPOCH")
InvalidTopic = _error("InvalidTopic", 17, "INVALID_TOPIC_EXCEPTION")
RecordListTooLarge = _error("RecordListTooLarge", 18, "RECORD_LIST_TOO_LARGE")
NotEnoughReplicas = _error("NotEnoughReplicas", 19, "NOT_ENOUGH_REPLICAS", retriable=True)
NotEnoughReplicasAfterAppend = _error("NotEnoughReplicasAfterAppend", 20,
                                      "NOT_ENOUGH_REPLICAS_AFTER_APPEND", retriable=True)
InvalidRequiredAcks = _error("InvalidRequiredAcks", 21, "INVALID_REQUIRED_ACKS")
InvalidTimestamp = _error("InvalidTimestamp", 32, "INVALID_TIMESTAMP")
TopicAlreadyExists = _error("TopicAlreadyExists", 36, "TOPIC_ALREADY_EXISTS")
InvalidPartitions = _error("InvalidPartitions", 37, "INVALID_PARTITIONS")
InvalidReplicationFactor = _error("InvalidReplicationFactor", 38, "INVALID_REPLICATION_FACTOR")
InvalidReplicaAssignment = _error("InvalidReplicaAssignment", 39, "INVALID_REPLICA_ASSIGNMENT")
InvalidConfig = _error("InvalidConfig", 40, "INVALID_CONFIG")
NotController = _error("NotController", 41, "NOT_CONTROLLER", retriable=True)
InvalidRequest = _error("InvalidRequest", 42, "INVALID_REQUEST")
OutOfOrderSequenceNumber = _error("OutOfOrderSequenceNumber", 45, "OUT_OF_ORDER_SEQUENCE_NUMBER")
DuplicateSequenceNumber = _error("DuplicateSequenceNumber", 46, "DUPLICATE_SEQUENCE_NUMBER")
InvalidProducerEpoch = _error("InvalidProducerEpoch", 47, "INVALID_PRODUCER_EPOCH")
KafkaStorageError = _error("KafkaStorageError", 56, "KAFKA_STORAGE_ERROR", retriable=True,
                           doc="A log or checkpoint file is unreadable or inconsistent.")
UnknownProducerId = _error("UnknownProducerId", 59, "UNKNOWN_PRODUCER_ID")
FencedLeaderEpoch = _error("FencedLeaderEpoch", 74, "FENCED_LEADER_EPOCH", retriable=True)
UnknownLeaderEpoch = _error("UnknownLeaderEpoch", 75, "UNKNOWN_LEADER_EPOCH", retriable=True)
StaleBrokerEpoch = _error("StaleBrokerEpoch", 77, "STALE_BROKER_EPOCH")
ElectionNotNeeded = _error("ElectionNotNeeded", 84, "ELECTION_NOT_NEEDED")
PreferredLeaderNotAvailable = _error("PreferredLeaderNotAvailable", 80,
                                     "PREFERRED_LEADER_NOT_AVAILABLE", retriable=True)
EligibleLeadersNotAvailable = _error("EligibleLeadersNotAvailable", 83,
                                     "ELIGIBLE_LEADERS_NOT_AVAILABLE", retriable=True)
FencedInstanceId = _error("FencedInstanceId", 82, "FENCED_INSTANCE_ID")
InvalidUpdateVersion = _error("InvalidUpdateVersion", 95, "INVALID_UPDATE_VERSION")
InconsistentTopicId = _error("InconsistentTopicId", 103, "INCONSISTENT_TOPIC_ID")
NewLeaderElected = _error("NewLeaderElected", 112, "NEW_LEADER_ELECTED")
IneligibleReplica = _error("IneligibleReplica", 107, "INELIGIBLE_REPLICA")
ReassignmentInProgress = _error("ReassignmentInProgress", 60, "REASSIGNMENT_IN_PROGRESS")
TopicDeletionDisabled = _error("TopicDeletionDisabled", 73, "TOPIC_DELETION_DISABLED")
InvalidRecord = _error("InvalidRecord", 87, "INVALID_RECORD")
PolicyViolation = _error("PolicyViolation", 44, "POLICY_VIOLATION")
# consumer groups (the group coordinator, coordinator/)
OffsetMetadataTooLarge = _error("OffsetMetadataTooLarge", 12, "OFFSET_METADATA_TOO_LARGE")
CoordinatorLoadInProgress = _error("CoordinatorLoadInProgress", 14, "COORDINATOR_LOAD_IN_PROGRESS",
                                   retriable=True)
CoordinatorNotAvailable = _error("CoordinatorNotAvailable", 15, "COORDINATOR_NOT_AVAILABLE",
                                 retriable=True)
NotCoordinator = _error("NotCoordinator", 16, "NOT_COORDINATOR", retriable=True)
IllegalGeneration = _error("IllegalGeneration", 22, "ILLEGAL_GENERATION")
InconsistentGroupProtocol = _error("InconsistentGroupProtocol", 23, "INCONSISTENT_GROUP_PROTOCOL")
InvalidGroupId = _error("InvalidGroupId", 24, "INVALID_GROUP_ID")
UnknownMemberId = _error("UnknownMemberId", 25, "UNKNOWN_MEMBER_ID")
InvalidSessionTimeout = _error("InvalidSessionTimeout", 26, "INVALID_SESSION_TIMEOUT")
RebalanceInProgress = _error("RebalanceInProgress", 27, "REBALANCE_IN_PROGRESS")
InvalidCommitOffsetSize = _error("InvalidCommitOffsetSize", 28, "INVALID_COMMIT_OFFSET_SIZE")
NonEmptyGroup = _error("NonEmptyGroup", 68, "NON_EMPTY_GROUP")
GroupIdNotFound = _error("GroupIdNotFound", 69, "GROUP_ID_NOT_FOUND")
MemberIdRequired = _error("MemberIdRequired", 79, "MEMBER_ID_REQUIRED")
GroupMaxSizeReached = _error("GroupMaxSizeReached", 81, "GROUP_MAX_SIZE_REACHED")

ERRORS_BY_CODE: dict[int, type[KafkaError]] = {cls.code: cls for cls in _NAMES}


def error_for_code(code: int, message: str = "") -> KafkaError:
    """The typed error for a Kafka code (UnknownServerError for codes we don't model)."""
    return ERRORS_BY_CODE.get(code, UnknownServerError)(message)
