"""The request and response versions kio has no schema for: Kafka 3.8 serves them, kio 0.6.5
starts at Kafka 4's minimums.

Rules (the schemas are Kafka 3.8's clients/src/main/resources/common/message/*.json at
these versions, every one of them non-flexible):
- `SCHEMAS` maps (api_key, version) to the request and response structures, written as
  the JSON has them, under kio's names (kio drops the `_ms` of durations and timestamps:
  `timeout`, `max_wait`, `throttle_time`, `log_append_time`), so a handler reads a legacy
  request as it reads kio's entity of a newer version, and builds its answer the same way.
- `decode_request(frame)` reads the request header v1 (api key, version, correlation id,
  nullable client id) and the body: namedtuples named as kio's classes. A field a newer
  version has and this one lacks, which the handlers read, comes as Kafka's default for it
  (`Const`: an ACL filter's pattern type is LITERAL (3) before v1, a leader epoch -1, ...).
  Bytes after the body are accepted (as codec.py does for kio); anything unreadable (a
  length past the end, an array longer than the bytes left, bad UTF-8) raises ValueError or
  struct.error: the caller closes the connection.
- `response(api_key, version, class_name, **fields)` builds a response structure as
  build.py builds kio's: fields the version lacks are dropped (`throttle_time_ms` is
  `throttle_time`), missing ones take Kafka's default (0, "", False, (), None for nullable
  fields; -1 where the JSON says so). `encode_response` writes the whole frame: size,
  response header v0, body. Values are converted as they are written: error codes may be
  ints or kio's ErrorCode, durations ints or timedeltas, timestamps ints (negative: -1),
  datetimes or None; None in a field that cannot be null is written as its default.
- Pure: struct and the stdlib only.
"""

from __future__ import annotations

import datetime
import struct
from collections import namedtuple

__all__ = ["SCHEMAS", "has_request", "has_response", "decode_request", "response",
           "encode_response", "S", "A", "Arr", "Const", "I8", "I16", "I32", "I64", "MS", "TS",
           "BOOL", "STR", "NSTR", "RECORDS"]

_I8, _I16, _I32, _I64 = (struct.Struct(f) for f in (">b", ">h", ">i", ">q"))
_HEADER = struct.Struct(">hhi")


# -- types --------------------------------------------------------------------------------------
class _Int:
    def __init__(self, packer: struct.Struct, default: int = 0):
        self.packer, self.default = packer, default

    def read(self, buf, pos):
        return self.packer.unpack_from(buf, pos)[0], pos + self.packer.size

    def write(self, out: list, value) -> None:
        if value is None:
            value = self.default
        elif isinstance(value, datetime.timedelta):
            value = int(value.total_seconds() * 1000)
        elif isinstance(value, datetime.datetime):
            value = int(round(value.timestamp() * 1000))
        out.append(self.packer.pack(int(getattr(value, "value", value))))


class _Bool:
    default = False

    def read(self, buf, pos):
        if pos >= len(buf):
            _short()
        return buf[pos] != 0, pos + 1

    def write(self, out: list, value) -> None:
        out.append(b"\x01" if value else b"\x00")


def _short():
    raise ValueError("field runs past the frame")


class _Bytes:
    """A string (text) or bytes/records field; `nullable`: length -1 is None."""

    def __init__(self, text: bool, nullable: bool):
        self.text, self.nullable = text, nullable
        self.default = None if nullable else ("" if text else b"")
        self.length = _I16 if text else _I32

    def read(self, buf, pos):
        (n,) = self.length.unpack_from(buf, pos)
        pos += self.length.size
        if n < 0:
            if not self.nullable:
                raise ValueError("null in a field that cannot be null")
            return None, pos
        if pos + n > len(buf):
            _short()
        raw = bytes(buf[pos:pos + n])
        return (raw.decode("utf-8") if self.text else raw), pos + n

    def write(self, out: list, value) -> None:
        if value is None:
            value = self.default
        if value is None:
            out.append(self.length.pack(-1))
            return
        raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        out += [self.length.pack(len(raw)), raw]


class Arr:
    """An array of a type or of a structure (Kafka's `[]Type`); `nullable`: count -1 is None."""

    def __init__(self, item, nullable: bool = False):
        self.item, self.nullable = item, nullable
        self.default = None if nullable else ()

    def read(self, buf, pos):
        (n,) = _I32.unpack_from(buf, pos)
        pos += 4
        if n < 0:
            if not self.nullable:
                raise ValueError("null array in a field that cannot be null")
            return None, pos
        if n > len(buf) - pos:             # every item takes at least one byte
            raise ValueError(f"array of {n} items in {len(buf) - pos} bytes")
        items = []
        for _ in range(n):
            value, pos = self.item.read(buf, pos)
            items.append(value)
        return tuple(items), pos

    def write(self, out: list, value) -> None:
        if value is None:
            value = self.default
        if value is None:
            out.append(_I32.pack(-1))
            return
        out.append(_I32.pack(len(value)))
        for item in value:
            self.item.write(out, item)


class Const:
    """A field this version does not carry: decoded as `value`, never written."""

    def __init__(self, value):
        self.value = value


class S:
    """A structure: fields (name, type[, default]) in wire order, read into a namedtuple
    named as kio's class."""

    def __init__(self, name: str, *fields):
        self.name = name
        self.fields = tuple((f[0], f[1], f[2] if len(f) > 2 else getattr(f[1], "default", None))
                            for f in fields)
        self.wire = tuple(f for f in self.fields if not isinstance(f[1], Const))
        self.cls = namedtuple(name, [f[0] for f in self.fields])
        self.defaults = {n: (t.value if isinstance(t, Const) else d) for n, t, d in self.fields}

    def read(self, buf, pos):
        values = []
        for _, kind, _ in self.fields:
            if isinstance(kind, Const):
                values.append(kind.value)
            else:
                value, pos = kind.read(buf, pos)
                values.append(value)
        return self.cls(*values), pos

    def write(self, out: list, value) -> None:
        for name, kind, default in self.wire:
            kind.write(out, getattr(value, name, default))

    def structs(self):
        yield self
        for _, kind, _ in self.fields:
            inner = getattr(kind, "item", None)
            if isinstance(inner, S):
                yield from inner.structs()


I8, I16, I32, I64 = _Int(_I8), _Int(_I16), _Int(_I32), _Int(_I64)
MS = _Int(_I32)                          # a duration in ms (kio: timedelta)
TS = _Int(_I64, -1)                      # epoch ms, -1 none (kio: datetime | None)
BOOL = _Bool()
STR, NSTR = _Bytes(True, False), _Bytes(True, True)
RECORDS = _Bytes(False, True)


# -- the schemas --------------------------------------------------------------------------------
def A(name: str, *fields) -> Arr:
    """An array of the structure `name`."""
    return Arr(S(name, *fields))


def _produce(v):
    request = S("ProduceRequest", ("transactional_id", Const(None)), ("acks", I16),
                ("timeout", MS), ("topic_data", A(
                    "TopicProduceData", ("name", STR), ("partition_data", A(
                        "PartitionProduceData", ("index", I32), ("records", RECORDS))))))
    partition = [("index", I32), ("error_code", I16), ("base_offset", I64)]
    partition += [("log_append_time", TS)] if v >= 2 else []
    response = S("ProduceResponse", ("responses", A(
        "TopicProduceResponse", ("name", STR),
        ("partition_responses", A("PartitionProduceResponse", *partition)))),
        *([("throttle_time", MS)] if v >= 1 else []))
    return request, response


def _fetch(v):
    request = S("FetchRequest", ("replica_id", I32), ("max_wait", MS), ("min_bytes", I32),
                *([("max_bytes", I32)] if v >= 3 else []),
                ("topics", A("FetchTopic", ("topic", STR), ("partitions", A(
                    "FetchPartition", ("partition", I32), ("fetch_offset", I64),
                    ("partition_max_bytes", I32))))))
    response = S("FetchResponse", *([("throttle_time", MS)] if v >= 1 else []),
                 ("responses", A("FetchableTopicResponse", ("topic", STR), ("partitions", A(
                     "PartitionData", ("partition_index", I32), ("error_code", I16),
                     ("high_watermark", I64), ("records", RECORDS))))))
    return request, response


def _list_offsets(_v):
    request = S("ListOffsetsRequest", ("replica_id", I32), ("topics", A(
        "ListOffsetsTopic", ("name", STR), ("partitions", A(
            "ListOffsetsPartition", ("partition_index", I32), ("timestamp", I64),
            ("max_num_offsets", I32, 1), ("current_leader_epoch", Const(-1)))))))
    response = S("ListOffsetsResponse", ("topics", A(
        "ListOffsetsTopicResponse", ("name", STR), ("partitions", A(
            "ListOffsetsPartitionResponse", ("partition_index", I32), ("error_code", I16),
            ("old_style_offsets", Arr(I64)))))))
    return request, response


def _offset_commit(v):
    partition = [("partition_index", I32), ("committed_offset", I64)]
    partition += [("commit_timestamp", I64, -1)] if v >= 1 else []
    partition += [("committed_metadata", NSTR), ("committed_leader_epoch", Const(-1))]
    member = [("generation_id_or_member_epoch", I32, -1), ("member_id", STR)] if v >= 1 else \
        [("generation_id_or_member_epoch", Const(-1)), ("member_id", Const(""))]
    request = S("OffsetCommitRequest", ("group_id", STR), *member,
                ("group_instance_id", Const(None)), ("retention_time", Const(-1)),
                ("topics", A("OffsetCommitRequestTopic", ("name", STR),
                             ("partitions", A("OffsetCommitRequestPartition", *partition)))))
    response = S("OffsetCommitResponse", ("topics", A(
        "OffsetCommitResponseTopic", ("name", STR), ("partitions", A(
            "OffsetCommitResponsePartition", ("partition_index", I32), ("error_code", I16))))))
    return request, response


def _offset_fetch(_v):
    request = S("OffsetFetchRequest", ("group_id", STR), ("topics", A(
        "OffsetFetchRequestTopic", ("name", STR), ("partition_indexes", Arr(I32)))),
        ("require_stable", Const(False)))
    response = S("OffsetFetchResponse", ("topics", A(
        "OffsetFetchResponseTopic", ("name", STR), ("partitions", A(
            "OffsetFetchResponsePartition", ("partition_index", I32),
            ("committed_offset", I64, -1), ("metadata", NSTR), ("error_code", I16))))))
    return request, response


def _leader_epoch(v):
    request = S("OffsetForLeaderEpochRequest", ("replica_id", Const(-2)), ("topics", A(
        "OffsetForLeaderTopic", ("topic", STR), ("partitions", A(
            "OffsetForLeaderPartition", ("partition", I32), ("current_leader_epoch", Const(-1)),
            ("leader_epoch", I32))))))
    partition = [("error_code", I16), ("partition", I32)]
    partition += [("leader_epoch", I32, -1)] if v >= 1 else []
    response = S("OffsetForLeaderEpochResponse", ("topics", A(
        "OffsetForLeaderTopicResult", ("topic", STR),
        ("partitions", A("EpochEndOffset", *partition, ("end_offset", I64, -1))))))
    return request, response


def _create_topics(v):
    request = S("CreateTopicsRequest", ("topics", A(
        "CreatableTopic", ("name", STR), ("num_partitions", I32), ("replication_factor", I16),
        ("assignments", A("CreatableReplicaAssignment", ("partition_index", I32),
                          ("broker_ids", Arr(I32)))),
        ("configs", A("CreatableTopicConfig", ("name", STR), ("value", NSTR))))),
        ("timeout", MS, 60000),
        ("validate_only", BOOL if v >= 1 else Const(False)))
    result = [("name", STR), ("error_code", I16)] + ([("error_message", NSTR)] if v >= 1 else [])
    return request, S("CreateTopicsResponse", ("topics", A("CreatableTopicResult", *result)))


def _delete_topics(_v):
    return (S("DeleteTopicsRequest", ("topic_names", Arr(STR)), ("timeout", MS)),
            S("DeleteTopicsResponse", ("responses", A(
                "DeletableTopicResult", ("name", STR), ("error_code", I16)))))


def _describe_configs(_v):
    request = S("DescribeConfigsRequest", ("resources", A(
        "DescribeConfigsResource", ("resource_type", I8), ("resource_name", STR),
        ("configuration_keys", Arr(STR, nullable=True)))),
        ("include_synonyms", Const(False)), ("include_documentation", Const(False)))
    response = S("DescribeConfigsResponse", ("throttle_time", MS), ("results", A(
        "DescribeConfigsResult", ("error_code", I16), ("error_message", NSTR),
        ("resource_type", I8), ("resource_name", STR), ("configs", A(
            "DescribeConfigsResourceResult", ("name", STR), ("value", NSTR),
            ("read_only", BOOL), ("is_default", BOOL), ("is_sensitive", BOOL))))))
    return request, response


def _describe_log_dirs(_v):
    request = S("DescribeLogDirsRequest", ("topics", Arr(S(
        "DescribableLogDirTopic", ("topic", STR), ("partitions", Arr(I32))), nullable=True)))
    response = S("DescribeLogDirsResponse", ("throttle_time", MS), ("results", A(
        "DescribeLogDirsResult", ("error_code", I16), ("log_dir", STR), ("topics", A(
            "DescribeLogDirsTopic", ("name", STR), ("partitions", A(
                "DescribeLogDirsPartition", ("partition_index", I32), ("partition_size", I64),
                ("offset_lag", I64), ("is_future_key", BOOL))))))))
    return request, response


# ACL requests before v1 name no pattern type: LITERAL (3), Kafka's default
_ACL = (("principal", STR), ("host", STR), ("operation", I8), ("permission_type", I8))
_ACL_FILTER = (("resource_type_filter", I8), ("resource_name_filter", NSTR),
               ("pattern_type_filter", Const(3)), ("principal_filter", NSTR),
               ("host_filter", NSTR), ("operation", I8), ("permission_type", I8))


def _describe_acls(_v):
    return (S("DescribeAclsRequest", *_ACL_FILTER),
            S("DescribeAclsResponse", ("throttle_time", MS), ("error_code", I16),
              ("error_message", NSTR), ("resources", A(
                  "DescribeAclsResource", ("resource_type", I8), ("resource_name", STR),
                  ("acls", A("AclDescription", *_ACL))))))


def _create_acls(_v):
    return (S("CreateAclsRequest", ("creations", A(
        "AclCreation", ("resource_type", I8), ("resource_name", STR),
        ("resource_pattern_type", Const(3)), *_ACL))),
            S("CreateAclsResponse", ("throttle_time", MS), ("results", A(
                "AclCreationResult", ("error_code", I16), ("error_message", NSTR)))))


def _delete_acls(_v):
    return (S("DeleteAclsRequest", ("filters", A("DeleteAclsFilter", *_ACL_FILTER))),
            S("DeleteAclsResponse", ("throttle_time", MS), ("filter_results", A(
                "DeleteAclsFilterResult", ("error_code", I16), ("error_message", NSTR),
                ("matching_acls", A(
                    "DeleteAclsMatchingAcl", ("error_code", I16), ("error_message", NSTR),
                    ("resource_type", I8), ("resource_name", STR),
                    ("pattern_type", Const(3)), *_ACL))))))


def _write_txn_markers(_v):
    request = S("WriteTxnMarkersRequest", ("markers", A(
        "WritableTxnMarker", ("producer_id", I64), ("producer_epoch", I16),
        ("transaction_result", BOOL), ("topics", A(
            "WritableTxnMarkerTopic", ("name", STR), ("partition_indexes", Arr(I32)))),
        ("coordinator_epoch", I32))))
    response = S("WriteTxnMarkersResponse", ("markers", A(
        "WritableTxnMarkerResult", ("producer_id", I64), ("topics", A(
            "WritableTxnMarkerTopicResult", ("name", STR), ("partitions", A(
                "WritableTxnMarkerPartitionResult", ("partition_index", I32),
                ("error_code", I16))))))))
    return request, response


# (api_key, versions) -> the schema of each version
_LEGACY = ((0, range(3), _produce), (1, range(4), _fetch), (2, range(1), _list_offsets),
           (8, range(2), _offset_commit), (9, range(1), _offset_fetch),
           (23, range(2), _leader_epoch), (19, range(2), _create_topics),
           (20, range(1), _delete_topics), (32, range(1), _describe_configs),
           (29, range(1), _describe_acls), (30, range(1), _create_acls),
           (31, range(1), _delete_acls), (27, range(1), _write_txn_markers),
           (35, range(1), _describe_log_dirs))
SCHEMAS: dict[tuple[int, int], tuple[S, S]] = {
    (key, v): schema(v) for key, versions, schema in _LEGACY for v in versions}

# response structures by (api_key, version, class name): the top level under None too
_RESPONSE_STRUCTS: dict[tuple[int, int, str | None], S] = {}
for (_key, _version), (_, _top) in SCHEMAS.items():
    _RESPONSE_STRUCTS[(_key, _version, None)] = _top
    for _s in _top.structs():
        _RESPONSE_STRUCTS[(_key, _version, _s.name)] = _s
    _top.cls.__api_key__, _top.cls.__version__ = _key, _version


def has_request(api_key: int, version: int) -> bool:
    return (api_key, version) in SCHEMAS


def has_response(api_key: int, version: int) -> bool:
    return (api_key, version) in SCHEMAS


# -- requests -----------------------------------------------------------------------------------
RequestHeader = namedtuple("RequestHeader", "request_api_key request_api_version "
                                            "correlation_id client_id")


def decode_request(frame: bytes):
    """(header, body) of a legacy request frame (without its size prefix)."""
    api_key, version, correlation_id = _HEADER.unpack_from(frame, 0)
    client_id, pos = NSTR.read(frame, _HEADER.size)
    body, _ = SCHEMAS[(api_key, version)][0].read(frame, pos)
    return RequestHeader(api_key, version, correlation_id, client_id), body


# -- responses ----------------------------------------------------------------------------------
def response(api_key: int, version: int, class_name: str | None = None, /, **fields):
    """A response structure (top level or nested) of a legacy version; KeyError if that
    version has no such structure."""
    s = _RESPONSE_STRUCTS.get((api_key, version, class_name))
    if s is None:
        raise KeyError(f"no {class_name!r} in {api_key} v{version}'s response")
    if "throttle_time_ms" in fields:
        fields.setdefault("throttle_time", fields.pop("throttle_time_ms"))
    defaults = s.defaults
    return s.cls(**{name: fields[name] if name in fields else default
                    for name, default in defaults.items()})


def encode_response(api_key: int, version: int, correlation_id: int, body) -> bytes:
    """The whole frame: size, response header v0 (the correlation id), the body."""
    out: list = [b"", _I32.pack(correlation_id)]
    SCHEMAS[(api_key, version)][1].write(out, body)
    size = sum(len(chunk) for chunk in out)
    out[0] = _I32.pack(size)
    return b"".join(out)
