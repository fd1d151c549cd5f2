"""Kafka's error vocabulary, shared by every layer of rayka: the code table and the typed errors.

Rules:
- `ErrorCode` is Kafka 3.8's table of error codes (Errors.java), one row per code: its
  name, its number and whether Kafka calls it retriable (its exception extends
  RetriableException). Every layer names codes from this table; no module declares a Kafka
  error number of its own. tests/test_errors.py checks the table against kio's.
- Codes are ints (an IntEnum), so they compare, hash and encode as the numbers they are.
  `RETRIABLE` holds the retriable ones as plain ints for per-request membership tests; a
  per-request path binds the codes it answers with to module-level names once.
- One class per Kafka error a user (or a peer) can cause, carrying its row's `code` (a
  plain int), name and `retriable` flag, so a client of rayka sees the same vocabulary as a
  Kafka client. `error_for_code` answers UnknownServerError for a code without a class.
- This module lives in `replicas/` because that is the lowest layer: every other room
  imports it from here; `rayka.errors` re-exports it for users.
- Errors must pickle (they cross Ray actor boundaries), so every class keeps its
  constructor signature `(message)`.
"""

from __future__ import annotations

import enum

__all__ = [
    "ErrorCode", "RETRIABLE",
    "KafkaError", "RecordValidationError", "ERRORS_BY_CODE", "error_for_code",
    "UnknownServerError",
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
    "IneligibleReplica", "ReassignmentInProgress", "NoReassignmentInProgress", "TopicDeletionDisabled", "InvalidRecord",
    "PolicyViolation", "OffsetMetadataTooLarge", "CoordinatorLoadInProgress",
    "CoordinatorNotAvailable", "NotCoordinator", "IllegalGeneration",
    "InconsistentGroupProtocol", "InvalidGroupId", "UnknownMemberId", "InvalidSessionTimeout",
    "RebalanceInProgress", "InvalidCommitOffsetSize", "NonEmptyGroup", "GroupIdNotFound",
    "MemberIdRequired", "GroupMaxSizeReached", "InvalidTxnState", "InvalidProducerIdMapping",
    "TransactionCoordinatorFenced", "InvalidTransactionTimeout", "ConcurrentTransactions",
    "TransactionalIdAuthorizationFailed", "ClusterAuthorizationFailed",
    "TopicAuthorizationFailed", "GroupAuthorizationFailed", "ProducerFenced", "TransactionalIdNotFound",
    "TransactionAbortable", "UnstableOffsetCommit", "InvalidRecordState", "ShareSessionNotFound",
    "InvalidShareSessionEpoch", "FencedStateEpoch", "ShareSessionLimitReached",
]


class ErrorCode(enum.IntEnum):
    """Kafka's error codes: `NAME = number, retriable`."""

    retriable: bool

    def __new__(cls, value: int, retriable: bool):
        member = int.__new__(cls, value)
        member._value_ = value
        member.retriable = retriable
        return member

    UNKNOWN_SERVER_ERROR = -1, False
    NONE = 0, False
    OFFSET_OUT_OF_RANGE = 1, False
    CORRUPT_MESSAGE = 2, True
    UNKNOWN_TOPIC_OR_PARTITION = 3, True
    INVALID_FETCH_SIZE = 4, False
    LEADER_NOT_AVAILABLE = 5, True
    NOT_LEADER_OR_FOLLOWER = 6, True
    REQUEST_TIMED_OUT = 7, True
    BROKER_NOT_AVAILABLE = 8, False
    REPLICA_NOT_AVAILABLE = 9, True
    MESSAGE_TOO_LARGE = 10, False
    STALE_CONTROLLER_EPOCH = 11, False
    OFFSET_METADATA_TOO_LARGE = 12, False
    NETWORK_EXCEPTION = 13, True
    COORDINATOR_LOAD_IN_PROGRESS = 14, True
    COORDINATOR_NOT_AVAILABLE = 15, True
    NOT_COORDINATOR = 16, True
    INVALID_TOPIC_EXCEPTION = 17, False
    RECORD_LIST_TOO_LARGE = 18, False
    NOT_ENOUGH_REPLICAS = 19, True
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20, True
    INVALID_REQUIRED_ACKS = 21, False
    ILLEGAL_GENERATION = 22, False
    INCONSISTENT_GROUP_PROTOCOL = 23, False
    INVALID_GROUP_ID = 24, False
    UNKNOWN_MEMBER_ID = 25, False
    INVALID_SESSION_TIMEOUT = 26, False
    REBALANCE_IN_PROGRESS = 27, False
    INVALID_COMMIT_OFFSET_SIZE = 28, False
    TOPIC_AUTHORIZATION_FAILED = 29, False
    GROUP_AUTHORIZATION_FAILED = 30, False
    CLUSTER_AUTHORIZATION_FAILED = 31, False
    INVALID_TIMESTAMP = 32, False
    UNSUPPORTED_SASL_MECHANISM = 33, False
    ILLEGAL_SASL_STATE = 34, False
    UNSUPPORTED_VERSION = 35, False
    TOPIC_ALREADY_EXISTS = 36, False
    INVALID_PARTITIONS = 37, False
    INVALID_REPLICATION_FACTOR = 38, False
    INVALID_REPLICA_ASSIGNMENT = 39, False
    INVALID_CONFIG = 40, False
    NOT_CONTROLLER = 41, True
    INVALID_REQUEST = 42, False
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43, False
    POLICY_VIOLATION = 44, False
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45, False
    DUPLICATE_SEQUENCE_NUMBER = 46, False
    INVALID_PRODUCER_EPOCH = 47, False
    INVALID_TXN_STATE = 48, False
    INVALID_PRODUCER_ID_MAPPING = 49, False
    INVALID_TRANSACTION_TIMEOUT = 50, False
    CONCURRENT_TRANSACTIONS = 51, True
    TRANSACTION_COORDINATOR_FENCED = 52, False
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53, False
    SECURITY_DISABLED = 54, False
    OPERATION_NOT_ATTEMPTED = 55, False
    KAFKA_STORAGE_ERROR = 56, True
    LOG_DIR_NOT_FOUND = 57, False
    SASL_AUTHENTICATION_FAILED = 58, False
    UNKNOWN_PRODUCER_ID = 59, False
    REASSIGNMENT_IN_PROGRESS = 60, False
    DELEGATION_TOKEN_AUTH_DISABLED = 61, False
    DELEGATION_TOKEN_NOT_FOUND = 62, False
    DELEGATION_TOKEN_OWNER_MISMATCH = 63, False
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64, False
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65, False
    DELEGATION_TOKEN_EXPIRED = 66, False
    INVALID_PRINCIPAL_TYPE = 67, False
    NON_EMPTY_GROUP = 68, False
    GROUP_ID_NOT_FOUND = 69, False
    FETCH_SESSION_ID_NOT_FOUND = 70, True
    INVALID_FETCH_SESSION_EPOCH = 71, True
    LISTENER_NOT_FOUND = 72, True
    TOPIC_DELETION_DISABLED = 73, False
    FENCED_LEADER_EPOCH = 74, True
    UNKNOWN_LEADER_EPOCH = 75, True
    UNSUPPORTED_COMPRESSION_TYPE = 76, False
    STALE_BROKER_EPOCH = 77, False
    OFFSET_NOT_AVAILABLE = 78, True
    MEMBER_ID_REQUIRED = 79, False
    PREFERRED_LEADER_NOT_AVAILABLE = 80, True
    GROUP_MAX_SIZE_REACHED = 81, False
    FENCED_INSTANCE_ID = 82, False
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83, True
    ELECTION_NOT_NEEDED = 84, True
    NO_REASSIGNMENT_IN_PROGRESS = 85, False
    GROUP_SUBSCRIBED_TO_TOPIC = 86, False
    INVALID_RECORD = 87, False
    UNSTABLE_OFFSET_COMMIT = 88, True
    THROTTLING_QUOTA_EXCEEDED = 89, True
    PRODUCER_FENCED = 90, False
    RESOURCE_NOT_FOUND = 91, False
    DUPLICATE_RESOURCE = 92, False
    UNACCEPTABLE_CREDENTIAL = 93, False
    INCONSISTENT_VOTER_SET = 94, False
    INVALID_UPDATE_VERSION = 95, False
    FEATURE_UPDATE_FAILED = 96, False
    PRINCIPAL_DESERIALIZATION_FAILURE = 97, False
    SNAPSHOT_NOT_FOUND = 98, False
    POSITION_OUT_OF_RANGE = 99, False
    UNKNOWN_TOPIC_ID = 100, True
    DUPLICATE_BROKER_REGISTRATION = 101, False
    BROKER_ID_NOT_REGISTERED = 102, False
    INCONSISTENT_TOPIC_ID = 103, True
    INCONSISTENT_CLUSTER_ID = 104, False
    TRANSACTIONAL_ID_NOT_FOUND = 105, False
    FETCH_SESSION_TOPIC_ID_ERROR = 106, True
    INELIGIBLE_REPLICA = 107, False
    NEW_LEADER_ELECTED = 108, False
    OFFSET_MOVED_TO_TIERED_STORAGE = 109, False
    FENCED_MEMBER_EPOCH = 110, False
    UNRELEASED_INSTANCE_ID = 111, False
    UNSUPPORTED_ASSIGNOR = 112, False
    STALE_MEMBER_EPOCH = 113, False
    MISMATCHED_ENDPOINT_TYPE = 114, False
    UNSUPPORTED_ENDPOINT_TYPE = 115, False
    UNKNOWN_CONTROLLER_ID = 116, False
    UNKNOWN_SUBSCRIPTION_ID = 117, False
    TELEMETRY_TOO_LARGE = 118, False
    INVALID_REGISTRATION = 119, False
    TRANSACTION_ABORTABLE = 120, False
    INVALID_RECORD_STATE = 121, False            # Kafka 4 (KIP-932 share groups)
    SHARE_SESSION_NOT_FOUND = 122, True
    INVALID_SHARE_SESSION_EPOCH = 123, True
    FENCED_STATE_EPOCH = 124, False
    INVALID_REGULAR_EXPRESSION = 128, False      # Kafka 4.0 (KIP-848 subscriptions)
    SHARE_SESSION_LIMIT_REACHED = 133, True      # Kafka 4.1 (KIP-932)


RETRIABLE: frozenset[int] = frozenset(code.value for code in ErrorCode if code.retriable)


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


def _error(name: str, code: ErrorCode, doc: str = ""):
    cls = type(name, (KafkaError,), {"code": code.value, "retriable": code.retriable,
                                     "__doc__": doc})
    _NAMES[cls] = code.name
    return cls


_NAMES: dict[type, str] = {}
C = ErrorCode

UnknownServerError = _error("UnknownServerError", C.UNKNOWN_SERVER_ERROR)
OffsetOutOfRange = _error("OffsetOutOfRange", C.OFFSET_OUT_OF_RANGE,
                          doc="Requested offset is outside the log's [start, end] range.")
CorruptRecord = _error("CorruptRecord", C.CORRUPT_MESSAGE,
                       doc="A record batch failed its magic, length or CRC-32C check.")
UnknownTopicOrPartition = _error("UnknownTopicOrPartition", C.UNKNOWN_TOPIC_OR_PARTITION)
InvalidFetchSize = _error("InvalidFetchSize", C.INVALID_FETCH_SIZE)
LeaderNotAvailable = _error("LeaderNotAvailable", C.LEADER_NOT_AVAILABLE)
NotLeaderOrFollower = _error("NotLeaderOrFollower", C.NOT_LEADER_OR_FOLLOWER)
RequestTimedOut = _error("RequestTimedOut", C.REQUEST_TIMED_OUT)
BrokerNotAvailable = _error("BrokerNotAvailable", C.BROKER_NOT_AVAILABLE)
ReplicaNotAvailable = _error("ReplicaNotAvailable", C.REPLICA_NOT_AVAILABLE)
RecordTooLarge = _error("RecordTooLarge", C.MESSAGE_TOO_LARGE,
                        doc="A batch is larger than max.message.bytes.")
StaleControllerEpoch = _error("StaleControllerEpoch", C.STALE_CONTROLLER_EPOCH)
InvalidTopic = _error("InvalidTopic", C.INVALID_TOPIC_EXCEPTION)
RecordListTooLarge = _error("RecordListTooLarge", C.RECORD_LIST_TOO_LARGE)
NotEnoughReplicas = _error("NotEnoughReplicas", C.NOT_ENOUGH_REPLICAS)
NotEnoughReplicasAfterAppend = _error("NotEnoughReplicasAfterAppend",
                                      C.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
InvalidRequiredAcks = _error("InvalidRequiredAcks", C.INVALID_REQUIRED_ACKS)
InvalidTimestamp = _error("InvalidTimestamp", C.INVALID_TIMESTAMP)
TopicAlreadyExists = _error("TopicAlreadyExists", C.TOPIC_ALREADY_EXISTS)
InvalidPartitions = _error("InvalidPartitions", C.INVALID_PARTITIONS)
InvalidReplicationFactor = _error("InvalidReplicationFactor", C.INVALID_REPLICATION_FACTOR)
InvalidReplicaAssignment = _error("InvalidReplicaAssignment", C.INVALID_REPLICA_ASSIGNMENT)
InvalidConfig = _error("InvalidConfig", C.INVALID_CONFIG)
NotController = _error("NotController", C.NOT_CONTROLLER)
InvalidRequest = _error("InvalidRequest", C.INVALID_REQUEST)
OutOfOrderSequenceNumber = _error("OutOfOrderSequenceNumber", C.OUT_OF_ORDER_SEQUENCE_NUMBER)
DuplicateSequenceNumber = _error("DuplicateSequenceNumber", C.DUPLICATE_SEQUENCE_NUMBER)
InvalidProducerEpoch = _error("InvalidProducerEpoch", C.INVALID_PRODUCER_EPOCH)
KafkaStorageError = _error("KafkaStorageError", C.KAFKA_STORAGE_ERROR,
                           doc="A log or checkpoint file is unreadable or inconsistent.")
UnknownProducerId = _error("UnknownProducerId", C.UNKNOWN_PRODUCER_ID)
FencedLeaderEpoch = _error("FencedLeaderEpoch", C.FENCED_LEADER_EPOCH)
UnknownLeaderEpoch = _error("UnknownLeaderEpoch", C.UNKNOWN_LEADER_EPOCH)
StaleBrokerEpoch = _error("StaleBrokerEpoch", C.STALE_BROKER_EPOCH)
ElectionNotNeeded = _error("ElectionNotNeeded", C.ELECTION_NOT_NEEDED)
PreferredLeaderNotAvailable = _error("PreferredLeaderNotAvailable",
                                     C.PREFERRED_LEADER_NOT_AVAILABLE)
EligibleLeadersNotAvailable = _error("EligibleLeadersNotAvailable",
                                     C.ELIGIBLE_LEADERS_NOT_AVAILABLE)
FencedInstanceId = _error("FencedInstanceId", C.FENCED_INSTANCE_ID)
InvalidUpdateVersion = _error("InvalidUpdateVersion", C.INVALID_UPDATE_VERSION)
InconsistentTopicId = _error("InconsistentTopicId", C.INCONSISTENT_TOPIC_ID)
NewLeaderElected = _error("NewLeaderElected", C.NEW_LEADER_ELECTED)
IneligibleReplica = _error("IneligibleReplica", C.INELIGIBLE_REPLICA)
ReassignmentInProgress = _error("ReassignmentInProgress", C.REASSIGNMENT_IN_PROGRESS)
NoReassignmentInProgress = _error("NoReassignmentInProgress", C.NO_REASSIGNMENT_IN_PROGRESS)
TopicDeletionDisabled = _error("TopicDeletionDisabled", C.TOPIC_DELETION_DISABLED)
InvalidRecord = _error("InvalidRecord", C.INVALID_RECORD)
PolicyViolation = _error("PolicyViolation", C.POLICY_VIOLATION)
# consumer groups (the group coordinator, coordinator/)
OffsetMetadataTooLarge = _error("OffsetMetadataTooLarge", C.OFFSET_METADATA_TOO_LARGE)
CoordinatorLoadInProgress = _error("CoordinatorLoadInProgress", C.COORDINATOR_LOAD_IN_PROGRESS)
CoordinatorNotAvailable = _error("CoordinatorNotAvailable", C.COORDINATOR_NOT_AVAILABLE)
NotCoordinator = _error("NotCoordinator", C.NOT_COORDINATOR)
IllegalGeneration = _error("IllegalGeneration", C.ILLEGAL_GENERATION)
InconsistentGroupProtocol = _error("InconsistentGroupProtocol", C.INCONSISTENT_GROUP_PROTOCOL)
InvalidGroupId = _error("InvalidGroupId", C.INVALID_GROUP_ID)
UnknownMemberId = _error("UnknownMemberId", C.UNKNOWN_MEMBER_ID)
InvalidSessionTimeout = _error("InvalidSessionTimeout", C.INVALID_SESSION_TIMEOUT)
RebalanceInProgress = _error("RebalanceInProgress", C.REBALANCE_IN_PROGRESS)
InvalidCommitOffsetSize = _error("InvalidCommitOffsetSize", C.INVALID_COMMIT_OFFSET_SIZE)
NonEmptyGroup = _error("NonEmptyGroup", C.NON_EMPTY_GROUP)
GroupIdNotFound = _error("GroupIdNotFound", C.GROUP_ID_NOT_FOUND)
MemberIdRequired = _error("MemberIdRequired", C.MEMBER_ID_REQUIRED)
GroupMaxSizeReached = _error("GroupMaxSizeReached", C.GROUP_MAX_SIZE_REACHED)
# transactions (the log side: replicas/producer_state.py, replicas/producer_log.py)
InvalidTxnState = _error("InvalidTxnState", C.INVALID_TXN_STATE)
InvalidProducerIdMapping = _error("InvalidProducerIdMapping", C.INVALID_PRODUCER_ID_MAPPING)
TransactionCoordinatorFenced = _error("TransactionCoordinatorFenced",
                                      C.TRANSACTION_COORDINATOR_FENCED)
# transactions (the coordinator, transactions/; the clients)
InvalidTransactionTimeout = _error("InvalidTransactionTimeout", C.INVALID_TRANSACTION_TIMEOUT)
ConcurrentTransactions = _error("ConcurrentTransactions", C.CONCURRENT_TRANSACTIONS)
TransactionalIdAuthorizationFailed = _error("TransactionalIdAuthorizationFailed",
                                            C.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
ClusterAuthorizationFailed = _error("ClusterAuthorizationFailed", C.CLUSTER_AUTHORIZATION_FAILED)
TopicAuthorizationFailed = _error("TopicAuthorizationFailed", C.TOPIC_AUTHORIZATION_FAILED)
GroupAuthorizationFailed = _error("GroupAuthorizationFailed", C.GROUP_AUTHORIZATION_FAILED)
ProducerFenced = _error("ProducerFenced", C.PRODUCER_FENCED,
                        doc="Another producer with the same transactional id has a newer epoch.")
TransactionalIdNotFound = _error("TransactionalIdNotFound", C.TRANSACTIONAL_ID_NOT_FOUND)
TransactionAbortable = _error("TransactionAbortable", C.TRANSACTION_ABORTABLE)
UnstableOffsetCommit = _error("UnstableOffsetCommit", C.UNSTABLE_OFFSET_COMMIT)
InvalidRecordState = _error("InvalidRecordState", C.INVALID_RECORD_STATE)
ShareSessionNotFound = _error("ShareSessionNotFound", C.SHARE_SESSION_NOT_FOUND)
InvalidShareSessionEpoch = _error("InvalidShareSessionEpoch", C.INVALID_SHARE_SESSION_EPOCH)
FencedStateEpoch = _error("FencedStateEpoch", C.FENCED_STATE_EPOCH)
ShareSessionLimitReached = _error("ShareSessionLimitReached", C.SHARE_SESSION_LIMIT_REACHED)
del C

ERRORS_BY_CODE: dict[int, type[KafkaError]] = {cls.code: cls for cls in _NAMES}


class RecordValidationError(KafkaError):
    """Kafka's RecordValidationException (KIP-467): a batch refused for its records; `code`
    is the batch's error (INVALID_RECORD or INVALID_TIMESTAMP), `record_errors` the
    (index in the batch, message) of every bad record (replicas/record_validation.py)."""

    def __init__(self, code: int, message: str, record_errors=()):
        super().__init__(message)
        self.code = int(code)
        self.retriable = int(code) in RETRIABLE
        self.record_errors = tuple(record_errors)

    @property
    def name(self) -> str:
        return ErrorCode(self.code).name

    def __reduce__(self):
        return (type(self), (self.code, self.message, self.record_errors))


def error_for_code(code: int, message: str = "") -> KafkaError:
    """The typed error for a Kafka code (UnknownServerError for codes without a class)."""
    return ERRORS_BY_CODE.get(code, UnknownServerError)(message)
