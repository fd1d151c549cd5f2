"""The API-version table: what ApiVersions advertises, as data, beside Kafka 3.8's.

Rules:
- `SUPPORTED` maps api_key -> (min, max), exactly the ranges ApiVersions advertises, and every
  advertised version is served: `REJECTED_VERSIONS` (advertised, answered
  UNSUPPORTED_VERSION) is empty, as Kafka 3.8 rejects nothing it advertises.
- `KAFKA_38` is what a Kafka 3.8 ZooKeeper-mode broker advertises: every API whose schema
  lists the zkBroker listener, over its whole validVersions (clients/src/main/resources/
  common/message/*Request.json; 3.8 marks no latest version unstable). For each API rayka
  serves, the range is Kafka 3.8's, except Kafka 4's (`KAFKA_40`): KIP-848's two, which
  Kafka 3.8 had as an early-access v0 and Kafka 4.0 made GA at v0-1 (v1: the client makes
  its member id, KIP-1082; librdkafka asks for v1), and KIP-932's share-group APIs (76-79, 90-92)
  at Kafka 4.2's ranges (their v0 was 4.0's early access, removed in 4.1), and
  FindCoordinator v6 (key type 2, a share-partition's state coordinator), and KIP-890
  part 2's versions (transaction.version 2: Produce v12 adds its partition to the
  transaction, EndTxn v5 bumps the epoch and answers it, TxnOffsetCommit v5 adds the
  offsets partition). `api_table()` is README's table, checked by a test.
- `SUPPORTED_FEATURES`: the feature ranges ApiVersions v3 advertises (name → (min, max),
  controller/features.py's); the finalized levels are the cluster's (ZooKeeper's /feature),
  changed by UpdateFeatures.
- The versions kio has no schema for (below Kafka 4's minimums) are protocol/legacy.py's;
  Produce v0-2 and Fetch v0-3 carry message formats v0/v1, converted to and from
  RecordBatch v2 (replicas/legacy_records.py). SaslHandshake v0 is followed by raw SASL
  tokens (protocol/connection.py).
- To serve a new API, add one line here (and its handler); nothing else reads a list of
  APIs. The group APIs (FindCoordinator 10, JoinGroup 11, Heartbeat 12, LeaveGroup 13,
  SyncGroup 14, OffsetCommit 8, OffsetFetch 9, OffsetDelete 47), the admin APIs (topics,
  configs, log dirs, leader elections, reassignments), the transaction APIs (22, 24-28,
  61, 65, 66), the security APIs and the quota / SCRAM APIs (48-51) are served too.
"""

from __future__ import annotations

from enum import IntEnum

from controller.features import SUPPORTED as FEATURES

__all__ = ["ApiKey", "SUPPORTED", "SUPPORTED_FEATURES", "REJECTED_VERSIONS", "KAFKA_38", "KAFKA_40", "api_table", "is_served",
           "is_advertised"]


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    UPDATE_FEATURES = 57
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


SUPPORTED: dict[int, tuple[int, int]] = {
    ApiKey.API_VERSIONS: (0, 3),               # v4 requests get the KIP-511 v0 answer
    ApiKey.METADATA: (0, 12),
    ApiKey.PRODUCE: (0, 12),                   # v0-2: message formats v0/v1, up-converted
    ApiKey.FETCH: (0, 16),                     # v0-3 down-converted; v13+ address topics by id
    ApiKey.LIST_OFFSETS: (0, 8),               # v0: Kafka's offsets before a time (Burrow)
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),     # v4+: partition leaders verify (KIP-890)
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 5),                    # v5: transaction.version 2 (KIP-890)
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_CONFIGS: (0, 2),              # replace-all; topics only, brokers static
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),          # v0: protocol/legacy.py
    ApiKey.ELECT_LEADERS: (0, 2),              # v1+: unclean elections too
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.UPDATE_FEATURES: (0, 1),            # the cluster's finalized features (/feature)
    ApiKey.FIND_COORDINATOR: (0, 6),           # v4+ batch keys; v6 key type 2 (share)
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.OFFSET_COMMIT: (0, 9),              # v0: stored in ZooKeeper, as Kafka 3.8
    ApiKey.OFFSET_FETCH: (0, 9),               # v0: read from ZooKeeper; v8+ batch groups
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),   # KIP-848, Kafka 4.0's range
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),      # KIP-932, Kafka 4.2's ranges
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.SASL_HANDSHAKE: (0, 1),             # v0: raw SASL tokens follow
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
}

REJECTED_VERSIONS: dict[int, range] = {}

SUPPORTED_FEATURES: dict[str, tuple[int, int]] = FEATURES

# Kafka 3.8, ZooKeeper mode: api_key -> (name, min, max) as its ApiVersions advertises them
KAFKA_38: dict[int, tuple[str, int, int]] = {
    0: ("Produce", 0, 11), 1: ("Fetch", 0, 16), 2: ("ListOffsets", 0, 8),
    3: ("Metadata", 0, 12), 4: ("LeaderAndIsr", 0, 7), 5: ("StopReplica", 0, 4),
    6: ("UpdateMetadata", 0, 8), 7: ("ControlledShutdown", 0, 3), 8: ("OffsetCommit", 0, 9),
    9: ("OffsetFetch", 0, 9), 10: ("FindCoordinator", 0, 5), 11: ("JoinGroup", 0, 9),
    12: ("Heartbeat", 0, 4), 13: ("LeaveGroup", 0, 5), 14: ("SyncGroup", 0, 5),
    15: ("DescribeGroups", 0, 5), 16: ("ListGroups", 0, 5), 17: ("SaslHandshake", 0, 1),
    18: ("ApiVersions", 0, 3), 19: ("CreateTopics", 0, 7), 20: ("DeleteTopics", 0, 6),
    21: ("DeleteRecords", 0, 2), 22: ("InitProducerId", 0, 5),
    23: ("OffsetForLeaderEpoch", 0, 4), 24: ("AddPartitionsToTxn", 0, 5),
    25: ("AddOffsetsToTxn", 0, 4), 26: ("EndTxn", 0, 4), 27: ("WriteTxnMarkers", 0, 1),
    28: ("TxnOffsetCommit", 0, 4), 29: ("DescribeAcls", 0, 3), 30: ("CreateAcls", 0, 3),
    31: ("DeleteAcls", 0, 3), 32: ("DescribeConfigs", 0, 4), 33: ("AlterConfigs", 0, 2),
    34: ("AlterReplicaLogDirs", 0, 2), 35: ("DescribeLogDirs", 0, 4),
    36: ("SaslAuthenticate", 0, 2), 37: ("CreatePartitions", 0, 3),
    38: ("CreateDelegationToken", 0, 3), 39: ("RenewDelegationToken", 0, 2),
    40: ("ExpireDelegationToken", 0, 2), 41: ("DescribeDelegationToken", 0, 3),
    42: ("DeleteGroups", 0, 2), 43: ("ElectLeaders", 0, 2),
    44: ("IncrementalAlterConfigs", 0, 1), 45: ("AlterPartitionReassignments", 0, 0),
    46: ("ListPartitionReassignments", 0, 0), 47: ("OffsetDelete", 0, 0),
    48: ("DescribeClientQuotas", 0, 1), 49: ("AlterClientQuotas", 0, 1),
    50: ("DescribeUserScramCredentials", 0, 0), 51: ("AlterUserScramCredentials", 0, 0),
    56: ("AlterPartition", 0, 3), 57: ("UpdateFeatures", 0, 1), 58: ("Envelope", 0, 0),
    60: ("DescribeCluster", 0, 1), 61: ("DescribeProducers", 0, 0),
    65: ("DescribeTransactions", 0, 0), 66: ("ListTransactions", 0, 1),
    67: ("AllocateProducerIds", 0, 0), 68: ("ConsumerGroupHeartbeat", 0, 0),
    69: ("ConsumerGroupDescribe", 0, 0),
}

# Kafka 4.0's ranges where rayka serves them instead of 3.8's (see the rules above)
KAFKA_40: dict[int, tuple[str, int, int]] = {
    0: ("Produce", 0, 12), 26: ("EndTxn", 0, 5), 28: ("TxnOffsetCommit", 0, 5),
    10: ("FindCoordinator", 0, 6),
    68: ("ConsumerGroupHeartbeat", 0, 1), 69: ("ConsumerGroupDescribe", 0, 1),
    76: ("ShareGroupHeartbeat", 1, 1), 77: ("ShareGroupDescribe", 1, 1),
    78: ("ShareFetch", 1, 2), 79: ("ShareAcknowledge", 1, 2),
    90: ("DescribeShareGroupOffsets", 0, 1), 91: ("AlterShareGroupOffsets", 0, 0),
    92: ("DeleteShareGroupOffsets", 0, 0),
}


def _span(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}"


def api_table(supported=SUPPORTED) -> str:
    """README's table (markdown): every API of Kafka 3.8, the versions rayka serves, the
    versions Kafka 3.8 serves."""
    rows = ["| key | API | rayka serves | Kafka 3.8 serves |", "|---:|---|---|---|"]
    for key, (name, lo, hi) in sorted(KAFKA_38.items()):
        ours = supported.get(key)
        rows.append(f"| {key} | {name} | {_span(*ours) if ours else '—'} | {_span(lo, hi)} |")
    for key, (name, _lo, _hi) in sorted(KAFKA_40.items()):
        if key not in KAFKA_38 and key in supported:     # Kafka 4's own APIs
            rows.append(f"| {key} | {name} | {_span(*supported[key])} | — |")
    return "\n".join(rows)


def is_advertised(api_key: int, version: int, supported=SUPPORTED) -> bool:
    """In the range ApiVersions announces (rejected versions included)."""
    bounds = supported.get(api_key)
    return bounds is not None and bounds[0] <= version <= bounds[1]


def is_served(api_key: int, version: int, supported=SUPPORTED) -> bool:
    """Advertised and actually handled: a request for which a handler gives a real answer."""
    bounds = supported.get(api_key)
    if bounds is None or not bounds[0] <= version <= bounds[1]:
        return False
    rejected = REJECTED_VERSIONS.get(api_key)
    return rejected is None or version not in rejected
