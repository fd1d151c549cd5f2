"""Requests in, responses out: Kafka frames <-> kio entities (and protocol/legacy.py's).

Rules:
- `decode_request(frame)` reads api_key, api_version and correlation_id with struct, then
  header and body with kio when kio has that (api_key, version), else with protocol/legacy.py
  when Kafka 3.8 serves a version kio lacks (Produce v0-2, Fetch v0-3, ListOffsets v0, ...).
  Trailing unconsumed bytes are accepted (librdkafka's all-topics Metadata v9+ ends with
  extra bytes, as seen on the wire), and so is a null client_id. A frame shorter than 8
  bytes, or a body that cannot be read, is `MalformedRequest` (close the connection). An
  (api_key, version) with no schema at all is returned with `body=None` so the caller can
  still answer where an answer can be encoded (ApiVersions at any version, KIP-511); it
  decides, not the codec. After a SaslHandshake v0 the client sends bare SASL tokens:
  `sasl_token_request` makes each a SaslAuthenticate v0 request whose answer is the bare
  token (`raw_sasl`).
- `encode_response(request, body)` returns the whole frame: size, response header, body.
  The header is v1 (flexible) or v0 as the body class's `__header_schema__` says, except
  ApiVersions, always v0 (KIP-511), and the legacy versions (all v0). The body's own class
  picks the writer, so a v0 body may answer a v4 request (KIP-511).
- `error_response(request, code)` answers an error for any API there is a response for: top-
  level `error_code` fields get the code and, for APIs that list topics/partitions, every
  requested topic/partition is echoed with the code (Kafka's `getErrorResponse`): a client
  must always get a decodable answer for an API the broker advertises. The group APIs echo
  what they name the same way: OffsetCommit/OffsetFetch topics and partitions (OffsetFetch
  with offset -1; v8+ each group asked), LeaveGroup v3+ members, DescribeGroups/DeleteGroups
  groups and FindCoordinator v4+ keys (no node: -1, "", -1, as v0-3's top level); JoinGroup
  keeps its schema defaults (generation -1, no leader, no protocol).
- Cost: kio encodes in pure Python (15-50 µs a response): nothing here adds a pass over the
  data; readers and writers are looked up once per (api_key, version) / class. The two
  answers on every record's path (Fetch v12-18, Produce v9-12) are written by
  protocol/hot_writers.py instead: the same bytes, a fraction of the time.
- Pure: no sockets, no clock.
"""

from __future__ import annotations

import io
import struct
from collections import namedtuple
from dataclasses import dataclass
from typing import Mapping

from kio.index import load_request_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from replicas.errors import ErrorCode as E

from . import hot_writers, legacy
from .build import build, error_code as _error_code
from .errors import MalformedRequest, NoResponseSchema
from .versions import SUPPORTED, SUPPORTED_FEATURES, ApiKey, is_served

__all__ = ["Request", "decode_request", "sasl_token_request", "encode_response",
           "error_response", "encode_error_frame", "api_versions_response",
           "has_request_schema"]

_PREFIX = struct.Struct(">hhi")
_HEADER_V0 = struct.Struct(">ii")        # size, correlation id
_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")
_PLACEHOLDER_V0, _PLACEHOLDER_V1 = bytes(8), bytes(9)   # v1 ends with 0 tagged fields


@dataclass(frozen=True, slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header: object | None          # kio RequestHeader v1/v2 (legacy: its namedtuple), or None
    body: object | None            # kio request entity (legacy: namedtuple), or None
    size: int                      # frame bytes, without the 4-byte size prefix
    raw_sasl: bool = False         # a raw SASL token after SaslHandshake v0, no header

    @property
    def served(self) -> bool:
        """Decoded and in the served table: a handler answers it. False: answer
        `respond_error(request, UNSUPPORTED_VERSION)`."""
        return self.body is not None and is_served(self.api_key, self.api_version)

    @property
    def expects_response(self) -> bool:
        """False for Produce with acks=0: Kafka sends nothing back (and on an error closes
        the connection, the only signal such a producer gets)."""
        return not (self.api_key == 0 and self.body is not None and self.body.acks == 0)

    @property
    def api_name(self) -> str:
        try:
            return ApiKey(self.api_key).name
        except ValueError:
            return api_key_map.get(self.api_key, f"api_key_{self.api_key}").upper()


# -- decoding --------------------------------------------------------------------------------
_READERS: dict[tuple[int, int], tuple] = {}


def has_request_schema(api_key: int, version: int) -> bool:
    name = api_key_map.get(api_key)
    return name is not None and EntityType.request in schema_name_map[name].get(version, ())


def _readers(api_key: int, version: int):
    # Only hits are cached: misses come from whatever the peer sends and must not grow memory.
    found = _READERS.get((api_key, version))
    if found is None and has_request_schema(api_key, version):
        cls = load_request_schema(api_key, version)
        found = _READERS[(api_key, version)] = (
            entity_reader(cls.__header_schema__), entity_reader(cls))
    return found


def decode_request(frame: bytes) -> Request:
    size = len(frame)
    if size < 8:
        raise MalformedRequest(f"{size}-byte frame is shorter than the request header")
    api_key, version, correlation_id = _PREFIX.unpack_from(frame, 0)
    readers = _readers(api_key, version)
    if readers is None and not legacy.has_request(api_key, version):
        return _undecodable(frame, api_key, version, correlation_id)
    try:
        if readers is None:
            header, body = legacy.decode_request(frame)
        else:
            header, offset = readers[0](frame, 0)
            body, _ = readers[1](frame, offset)
    except Exception as exc:   # kio raises BufferUnderflow, ValueError, KeyError, ...
        raise MalformedRequest(f"undecodable request: {type(exc).__name__}: {exc}",
                               api_key=api_key, api_version=version,
                               correlation_id=correlation_id) from exc
    return Request(api_key, version, correlation_id, header.client_id, header, body, size)


SaslToken = namedtuple("SaslToken", "auth_bytes")


def sasl_token_request(frame: bytes) -> Request:
    """A frame after SaslHandshake v0 is a bare SASL token, handled as SaslAuthenticate v0
    and answered bare (size, token): Kafka's SaslServerAuthenticator without headers."""
    return Request(ApiKey.SASL_AUTHENTICATE, 0, 0, None, None, SaslToken(bytes(frame)),
                   len(frame), raw_sasl=True)


def _nullable_string(frame: bytes, offset: int) -> tuple[str | None, int]:
    (length,) = _I16.unpack_from(frame, offset)
    offset += 2
    if length < 0:
        return None, offset
    if offset + length > len(frame):
        raise ValueError("string runs past the frame")
    return bytes(frame[offset:offset + length]).decode("utf-8", "replace"), offset + length


def _undecodable(frame: bytes, api_key: int, version: int, correlation_id: int) -> Request:
    try:
        client_id, _ = _nullable_string(frame, 8)
    except (struct.error, ValueError):
        client_id = None
    return Request(api_key, version, correlation_id, client_id, None, None, len(frame))


# -- encoding --------------------------------------------------------------------------------
_WRITERS: dict[type, object] = {}


def writer_for(cls):
    """The writer of a response class: its own `__writer__` (protocol/fetch_answer.py's
    FetchAnswer), protocol/hot_writers.py's for Fetch v12-18 and Produce v9-12 (kio's
    bytes, by hand), kio's own for every other."""
    return getattr(cls, "__writer__", None) or hot_writers.writer_for(cls) or \
        entity_writer(cls)


def encode_response(request: Request, body) -> bytes:
    if request.raw_sasl:
        token = bytes(body.auth_bytes)
        return _I32.pack(len(token)) + token
    cls = type(body)
    if cls.__api_key__ != request.api_key:
        raise ValueError(f"{cls.__name__} does not answer api_key {request.api_key}")
    if legacy.has_response(request.api_key, request.api_version):
        return legacy.encode_response(request.api_key, request.api_version,
                                      request.correlation_id, body)
    writer = _WRITERS.get(cls)
    if writer is None:
        writer = _WRITERS[cls] = writer_for(cls)
    flexible = cls.__header_schema__.__flexible__ and request.api_key != ApiKey.API_VERSIONS
    buf = io.BytesIO()
    buf.write(_PLACEHOLDER_V1 if flexible else _PLACEHOLDER_V0)
    writer(buf, body)
    with buf.getbuffer() as view:
        _HEADER_V0.pack_into(view, 0, len(view) - 4, request.correlation_id)
    return buf.getvalue()


# -- ApiVersions -------------------------------------------------------------------------------
def api_versions_response(request: Request, supported=SUPPORTED,
                          finalized: tuple[Mapping[str, int], int] = ({}, -1),
                          features=SUPPORTED_FEATURES):
    """The answer to ApiVersions: every range in `supported`; for a version above ours, the
    KIP-511 v0 answer (error 35, our ApiVersions range) so the client retries lower. v3
    adds the features this broker supports and the cluster's finalized levels with their
    epoch (`finalized`: (levels, epoch); epoch -1 = not known, no levels sent)."""
    lo, hi = supported[ApiKey.API_VERSIONS]
    version = request.api_version
    if not lo <= version <= hi or request.body is None:
        return _api_versions_error(E.UNSUPPORTED_VERSION, supported)
    api_keys = tuple(build(ApiKey.API_VERSIONS, version, "ApiVersion", api_key=key,
                           min_version=kmin, max_version=kmax)
                     for key, (kmin, kmax) in sorted(supported.items()))
    if version < 3:
        return build(ApiKey.API_VERSIONS, version, None, api_keys=api_keys)
    levels, epoch = finalized
    return build(ApiKey.API_VERSIONS, version, None, api_keys=api_keys,
                 supported_features=tuple(
                     build(ApiKey.API_VERSIONS, version, "SupportedFeatureKey", name=name,
                           min_version=fmin, max_version=fmax)
                     for name, (fmin, fmax) in sorted(features.items())),
                 finalized_features_epoch=epoch,
                 finalized_features=() if epoch < 0 else tuple(
                     build(ApiKey.API_VERSIONS, version, "FinalizedFeatureKey", name=name,
                           min_version_level=level, max_version_level=level)
                     for name, level in sorted(levels.items())))


def _api_versions_error(code: int, supported=SUPPORTED):
    # Kafka's ApiVersionsRequest.getErrorResponse: a v0 body naming only the ApiVersions
    # range, which is all a client needs to pick the version it retries with.
    lo, hi = supported[ApiKey.API_VERSIONS]
    entry = build(ApiKey.API_VERSIONS, 0, "ApiVersion", api_key=ApiKey.API_VERSIONS,
                  min_version=lo, max_version=hi)
    return build(ApiKey.API_VERSIONS, 0, None, error_code=code, api_keys=(entry,))


# -- error answers ---------------------------------------------------------------------------
# One level of "echo what was asked": (request list field, response list field, response
# item class, {response field: request field, None = the item itself}, constant fields,
# the next level down or None[, the field the error code goes in: error_code]). The first level whose request field exists is used, which
# is how DeleteTopics v1-5 (topic_names) and v6 (topics) share an entry.
_MIRRORS: dict[int, tuple] = {
    ApiKey.PRODUCE: (("topic_data", "responses", "TopicProduceResponse", {"name": "name"}, {},
                      ("partition_data", "partition_responses", "PartitionProduceResponse",
                       {"index": "index"}, {"base_offset": -1}, None)),),
    ApiKey.FETCH: (("topics", "responses", "FetchableTopicResponse",
                    {"topic": "topic", "topic_id": "topic_id"}, {},
                    ("partitions", "partitions", "PartitionData",
                     {"partition_index": "partition"},
                     {"high_watermark": -1, "last_stable_offset": -1,
                      "log_start_offset": -1}, None)),),
    ApiKey.LIST_OFFSETS: (("topics", "topics", "ListOffsetsTopicResponse", {"name": "name"},
                           {}, ("partitions", "partitions", "ListOffsetsPartitionResponse",
                                {"partition_index": "partition_index"}, {}, None)),),
    ApiKey.DELETE_RECORDS: (("topics", "topics", "DeleteRecordsTopicResult", {"name": "name"},
                             {}, ("partitions", "partitions", "DeleteRecordsPartitionResult",
                                  {"partition_index": "partition_index"},
                                  {"low_watermark": -1}, None)),),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (
        ("topics", "topics", "OffsetForLeaderTopicResult", {"topic": "topic"}, {},
         ("partitions", "partitions", "EpochEndOffset", {"partition": "partition"}, {},
          None)),),
    ApiKey.METADATA: (("topics", "topics", "MetadataResponseTopic",
                       {"name": "name", "topic_id": "topic_id"}, {}, None),),
    ApiKey.CREATE_TOPICS: (("topics", "topics", "CreatableTopicResult", {"name": "name"},
                            {}, None),),
    ApiKey.DELETE_TOPICS: (("topic_names", "responses", "DeletableTopicResult",
                            {"name": None}, {}, None),
                           ("topics", "responses", "DeletableTopicResult",
                            {"name": "name", "topic_id": "topic_id"}, {}, None)),
    ApiKey.CREATE_PARTITIONS: (("topics", "results", "CreatePartitionsTopicResult",
                                {"name": "name"}, {}, None),),
    ApiKey.DESCRIBE_CONFIGS: (("resources", "results", "DescribeConfigsResult",
                               {"resource_type": "resource_type",
                                "resource_name": "resource_name"}, {}, None),),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (("resources", "responses",
                                        "AlterConfigsResourceResponse",
                                        {"resource_type": "resource_type",
                                         "resource_name": "resource_name"}, {}, None),),
    ApiKey.ALTER_CONFIGS: (("resources", "responses", "AlterConfigsResourceResponse",
                            {"resource_type": "resource_type",
                             "resource_name": "resource_name"}, {}, None),),
    ApiKey.ELECT_LEADERS: (("topic_partitions", "replica_election_results",
                            "ReplicaElectionResult", {"topic": "topic"}, {},
                            ("partitions", "partition_result", "PartitionResult",
                             {"partition_id": None}, {}, None)),),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (("topics", "responses", "ReassignableTopicResponse",
                                            {"name": "name"}, {},
                                            ("partitions", "partitions",
                                             "ReassignablePartitionResponse",
                                             {"partition_index": "partition_index"}, {},
                                             None)),),
    # ACLs: a result per creation / filter asked
    ApiKey.CREATE_ACLS: (("creations", "results", "AclCreationResult", {}, {}, None),),
    ApiKey.DELETE_ACLS: (("filters", "filter_results", "DeleteAclsFilterResult", {}, {},
                          None),),
    # consumer groups: topics/partitions, members, groups and coordinator keys asked
    ApiKey.OFFSET_COMMIT: (("topics", "topics", "OffsetCommitResponseTopic", {"name": "name"},
                            {}, ("partitions", "partitions", "OffsetCommitResponsePartition",
                                 {"partition_index": "partition_index"}, {}, None)),),
    ApiKey.OFFSET_FETCH: (("groups", "groups", "OffsetFetchResponseGroup",
                           {"group_id": "group_id"}, {}, None),
                          ("topics", "topics", "OffsetFetchResponseTopic", {"name": "name"},
                           {}, ("partition_indexes", "partitions",
                                "OffsetFetchResponsePartition", {"partition_index": None},
                                {"committed_offset": -1, "committed_leader_epoch": -1,
                                 "metadata": ""}, None)),),
    ApiKey.FIND_COORDINATOR: (("coordinator_keys", "coordinators", "Coordinator",
                               {"key": None}, {"node_id": -1, "host": "", "port": -1},
                               None),),
    ApiKey.LEAVE_GROUP: (("members", "members", "MemberResponse",
                          {"member_id": "member_id", "group_instance_id": "group_instance_id"},
                          {}, None),),
    ApiKey.DESCRIBE_GROUPS: (("groups", "groups", "DescribedGroup", {"group_id": None},
                              {}, None),),
    ApiKey.DELETE_GROUPS: (("groups_names", "results", "DeletableGroupResult",
                            {"group_id": None}, {}, None),),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (("group_ids", "groups", "DescribedGroup",
                                      {"group_id": None}, {}, None),),
    ApiKey.SHARE_GROUP_DESCRIBE: (("group_ids", "groups", "DescribedGroup",
                                   {"group_id": None}, {}, None),),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (("groups", "groups",
                                           "DescribeShareGroupOffsetsResponseGroup",
                                           {"group_id": "group_id"}, {}, None),),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (("topics", "responses",
                                        "AlterShareGroupOffsetsResponseTopic",
                                        {"topic_name": "topic_name"}, {},
                                        ("partitions", "partitions",
                                         "AlterShareGroupOffsetsResponsePartition",
                                         {"partition_index": "partition_index"}, {}, None)),),
    # transactions: partitions, markers and transactional ids asked (AddPartitionsToTxn v4,
    # AddOffsetsToTxn, EndTxn and ListTransactions answer only their top-level error)
    ApiKey.ADD_PARTITIONS_TO_TXN: (
        ("v3_and_below_topics", "results_by_topic_v3_and_below",
         "AddPartitionsToTxnTopicResult", {"name": "name"}, {},
         ("partitions", "results_by_partition", "AddPartitionsToTxnPartitionResult",
          {"partition_index": None}, {}, None, "partition_error_code")),),
    ApiKey.TXN_OFFSET_COMMIT: (("topics", "topics", "TxnOffsetCommitResponseTopic",
                                {"name": "name"}, {},
                                ("partitions", "partitions", "TxnOffsetCommitResponsePartition",
                                 {"partition_index": "partition_index"}, {}, None)),),
    ApiKey.WRITE_TXN_MARKERS: (("markers", "markers", "WritableTxnMarkerResult",
                                {"producer_id": "producer_id"}, {},
                                ("topics", "topics", "WritableTxnMarkerTopicResult",
                                 {"name": "name"}, {},
                                 ("partition_indexes", "partitions",
                                  "WritableTxnMarkerPartitionResult", {"partition_index": None},
                                  {}, None))),),
    ApiKey.DESCRIBE_PRODUCERS: (("topics", "topics", "TopicResponse", {"name": "name"}, {},
                                 ("partition_indexes", "partitions", "PartitionResponse",
                                  {"partition_index": None}, {}, None)),),
    ApiKey.DESCRIBE_TRANSACTIONS: (("transactional_ids", "transaction_states",
                                    "TransactionState", {"transactional_id": None}, {},
                                    None),),
    # quotas and SCRAM: an entry per entity asked, a result per user asked (Kafka's
    # getErrorResponse; AlterUserScramCredentials names each user of both lists once)
    ApiKey.ALTER_CLIENT_QUOTAS: (("entries", "entries", "EntryData", {}, {},
                                  ("entity", "entity", "EntityData",
                                   {"entity_type": "entity_type", "entity_name": "entity_name"},
                                   {}, None)),),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (("users", "results",
                                              "DescribeUserScramCredentialsResult",
                                              {"user": "name"}, {}, None),),
}
# Top-level fields Kafka's getErrorResponse sets to something other than zero.
_ERROR_TOP_LEVEL: dict[int, dict] = {
    ApiKey.INIT_PRODUCER_ID: {"producer_id": -1, "producer_epoch": -1},
    ApiKey.FIND_COORDINATOR: {"node_id": -1, "port": -1},      # Node.noNode(), v0-3
}
_ABSENT = object()


def _mirror(api_key: int, version: int, level: tuple, items, code) -> tuple:
    _, _, class_name, keys, constants, child = level[:6]
    error_field = level[6] if len(level) > 6 else "error_code"   # where the code goes
    out = []
    for item in items or ():
        fields = dict(constants, **{error_field: code})
        for response_field, request_field in keys.items():
            value = item if request_field is None else getattr(item, request_field, _ABSENT)
            if value is not _ABSENT:
                fields[response_field] = value
        if child is not None:
            fields[child[1]] = _mirror(api_key, version, child, getattr(item, child[0], ()),
                                       code)
        out.append(build(api_key, version, class_name, **fields))
    return tuple(out)


def error_response(request: Request, error_code: int):
    """A kio response entity answering `error_code` for this request's api_key and version.

    Raises NoResponseSchema when there is no response for it (an unknown api_key)."""
    code = _error_code(error_code)
    api_key, version = request.api_key, request.api_version
    if api_key == ApiKey.API_VERSIONS:
        if code == E.UNSUPPORTED_VERSION or not has_request_schema(api_key, version) \
                or version > SUPPORTED[api_key][1]:
            return _api_versions_error(code)
        return build(api_key, version, None, error_code=code)
    fields = dict(_ERROR_TOP_LEVEL.get(api_key, ()), error_code=code)
    body = request.body
    if body is not None and api_key == ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
        users = sorted({x.name for x in (*body.deletions, *body.upsertions)})
        fields["results"] = tuple(build(api_key, version, "AlterUserScramCredentialsResult",
                                        user=u, error_code=code) for u in users)
    elif body is not None:
        for level in _MIRRORS.get(api_key, ()):
            items = getattr(body, level[0], _ABSENT)
            if items is not _ABSENT:
                fields[level[1]] = _mirror(api_key, version, level, items, code)
                break
    return build(api_key, version, None, **fields)


def encode_error_frame(request: Request, error_code: int) -> bytes | None:
    """The whole error answer frame, or None when nothing decodable can be sent."""
    try:
        body = error_response(request, error_code)
    except NoResponseSchema:
        return None
    return encode_response(request, body)
