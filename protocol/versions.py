"""The API-version table: what ApiVersions advertises, as data.

Rules:
- `SUPPORTED` maps api_key -> (min, max), exactly the ranges ApiVersions advertises; what is
  advertised is served, except the versions in `REJECTED_VERSIONS`, which are advertised only
  so that old clients keep working and are answered UNSUPPORTED_VERSION (35).
- Produce v0-2: Kafka 4 advertises Produce from v0 and rejects v0-2 (KAFKA-18659), because
  librdkafka < 2.11.1 turns compression off unless the Produce range reaches v0; kio has no
  schema for them, so they are answered by a hand-encoded error (codec.py).
- Minimums follow Kafka 4 (and kio's schemas): old librdkafka enables a feature only when the
  broker's range reaches down to specific versions (what the real clients send), so a minimum is
  raised only with that table in hand.
- To serve a new API, add one line here (and its handler); nothing else reads a list of
  APIs. The group APIs (FindCoordinator 10, JoinGroup 11, Heartbeat 12, LeaveGroup 13,
  SyncGroup 14, OffsetCommit 8, OffsetFetch 9), the transaction APIs (22, 24-28, 61, 65,
  66) and the security APIs are served too.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ApiKey", "SUPPORTED", "REJECTED_VERSIONS", "is_served", "is_advertised"]


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
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66


SUPPORTED: dict[int, tuple[int, int]] = {
    ApiKey.API_VERSIONS: (0, 3),               # v4 requests get the KIP-511 v0 answer
    ApiKey.METADATA: (0, 12),
    ApiKey.PRODUCE: (0, 9),                    # v0-2 rejected, see REJECTED_VERSIONS
    ApiKey.FETCH: (4, 12),                     # v13+ addresses topics by id
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    # transactions (Kafka 3.8's ranges; WriteTxnMarkers v0 has no kio schema: brokers here
    # send v1 to each other)
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 4),     # v4: partition leaders verify (KIP-890)
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.WRITE_TXN_MARKERS: (1, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    # consumer groups: old librdkafka (kcat 2.0.2) turns groups on only if these start at 0,
    # OffsetCommit at <= 2 and OffsetFetch at <= 1 (what kafka-python and aiokafka send)
    ApiKey.FIND_COORDINATOR: (0, 4),           # v4 batches keys
    ApiKey.JOIN_GROUP: (0, 7),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 4),
    ApiKey.OFFSET_COMMIT: (2, 8),
    ApiKey.OFFSET_FETCH: (1, 7),               # v8 batches groups
    ApiKey.LIST_GROUPS: (0, 4),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    # security: SaslHandshake v0 (raw SASL tokens after it) is not served, but advertised:
    # librdkafka < 2.11 turns SASL on only when the range reaches v0 (kcat's 2.0.2:
    # "SASL Handshake not supported by broker"), and then sends v1 + SaslAuthenticate.
    # The ACL APIs start at v1 as in Kafka 4.
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
}

REJECTED_VERSIONS: dict[int, range] = {
    ApiKey.PRODUCE: range(0, 3),
    ApiKey.SASL_HANDSHAKE: range(0, 1),
}


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
