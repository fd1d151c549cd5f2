"""Kafka's ZooKeeper data layout (Kafka's ZkData.scala): paths, stored records, JSON codecs.

Pure data, no I/O, no kazoo: ``controller/zookeeper/store.py`` does the talking to ZooKeeper.

Rules:
- Every path here is RELATIVE to the cluster chroot ``/rayka/<cluster>``; the store
  prefixes it. The names and JSON field names are Kafka's, byte for byte where it matters
  (compact JSON, ``"timestamp"`` as a string of epoch milliseconds, partition numbers as
  string keys, ``/controller_epoch`` as plain integer text). Consumer offsets live in the
  `__consumer_offsets` topic (coordinator/), as in Kafka since 0.9, except those of
  OffsetCommit v0, which Kafka 3.8 still keeps in ``/consumers/<group>/offsets/<topic>/
  <partition>`` as decimal text (KafkaZkClient.setOrCreateConsumerOffset).
- Values filled from the znode's Stat (broker epoch = czxid, partition epoch = zkVersion)
  are never written into the JSON; ``from_json`` takes them as arguments.
- Names that become path segments (topics, groups, cluster) are validated: non-empty, no
  ``/``, not ``.``/``..``, printable. A bad topic raises ``InvalidTopic``.
- Notices to the controller are persistent sequential children (``isr_change_<10 digits>``,
  ``log_dir_event_<10 digits>``); the log dir event decoder accepts only version 1 with
  event 1 (LogDirFailure) and raises ValueError naming what it found otherwise.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from replicas.errors import InvalidConfig, InvalidTopic

__all__ = [
    "ROOT_PREFIX", "CONTROLLER", "CONTROLLER_EPOCH", "BROKERS", "BROKER_IDS", "BROKER_TOPICS",
    "ADMIN", "DELETE_TOPICS", "REASSIGN_PARTITIONS", "PREFERRED_REPLICA_ELECTION",
    "ISR_CHANGE_NOTIFICATION", "ISR_CHANGE_PREFIX", "LOG_DIR_EVENT_NOTIFICATION",
    "LOG_DIR_EVENT_PREFIX", "LOG_DIR_FAILURE_EVENT", "CONFIG", "CONFIG_TOPICS",
    "PERSISTENT_PATHS", "LATEST_PRODUCER_ID_BLOCK", "PRODUCER_ID_BLOCK_SIZE", "cluster_root", "broker_path", "topic_path", "partitions_path",
    "partition_path", "partition_state_path", "delete_topic_path", "config_topic_path",
    "isr_change_path", "log_dir_event_path", "encode_log_dir_event", "decode_log_dir_event",
    "CONSUMERS", "consumer_offset_path",
    "check_name", "check_topic", "dumps", "new_topic_id", "TopicPartition",
    "BrokerRegistration", "LeaderIsrAndControllerEpoch", "TopicAssignment",
    "encode_controller", "decode_controller_id", "encode_epoch", "decode_epoch",
    "encode_reassignment", "decode_reassignment", "encode_partition_list",
    "decode_partition_list", "encode_topic_config", "decode_topic_config",
    "CLUSTER_ID", "encode_cluster_id", "decode_cluster_id",
    "FEATURE", "DEFAULT_FEATURES", "encode_features", "decode_features",
    "Endpoint", "parse_endpoints", "SECURITY_PROTOCOLS",
]

TopicPartition = tuple[str, int]

ROOT_PREFIX = "/rayka"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
# Kafka's LogDirEventNotificationZNode (KIP-112): a broker whose log directory failed adds a
# sequential child; the controller asks that broker about every replica it holds.
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1          # Kafka's LogDirEventNotificationHandler.LogDirFailureEvent
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_USERS = "/config/users"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CLUSTER_ID = "/cluster/id"
# Kafka's FeatureZNode: the cluster's finalized feature levels; its zkVersion is the
# finalized-features epoch ApiVersions answers. A new cluster finalizes Kafka 4's default:
# transaction.version 2 (KIP-890 part 2).
FEATURE = "/feature"
DEFAULT_FEATURES = {"transaction.version": 2}
CONSUMERS = "/consumers"
PRODUCER_ID_BLOCK_SIZE = 1000

# Created (persistent, empty) when the store starts, like Kafka's ZkData.PersistentZkPaths,
# so that children watches always have a node to sit on.
PERSISTENT_PATHS = (BROKER_IDS, BROKER_TOPICS, DELETE_TOPICS, ISR_CHANGE_NOTIFICATION,
                    LOG_DIR_EVENT_NOTIFICATION, CONFIG_TOPICS)


# -- names and paths ---------------------------------------------------------------------
def check_name(name: str, what: str = "name") -> str:
    """A name usable as ONE path segment; ValueError otherwise."""
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name \
            or any(ord(c) < 0x20 or ord(c) == 0x7f for c in name):
        raise ValueError(f"invalid {what} {name!r}: must be a non-empty path segment "
                         "without '/' or control characters, not '.' or '..'")
    return name


def check_topic(topic: str) -> str:
    try:
        return check_name(topic, "topic")
    except ValueError as e:
        raise InvalidTopic(str(e)) from None


def cluster_root(cluster: str) -> str:
    return f"{ROOT_PREFIX}/{check_name(cluster, 'cluster name')}"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{int(broker_id)}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{check_topic(topic)}"


def partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{partitions_path(topic)}/{int(partition)}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{check_topic(topic)}"


def config_topic_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{check_topic(topic)}"


def consumer_offset_path(group: str, topic: str, partition: int) -> str:
    group = check_name(group, "group")
    return f"{CONSUMERS}/{group}/offsets/{check_topic(topic)}/{int(partition)}"


def isr_change_path(name: str) -> str:
    if not name.startswith(ISR_CHANGE_PREFIX):
        raise ValueError(f"not an ISR change notification name: {name!r}")
    return f"{ISR_CHANGE_NOTIFICATION}/{check_name(name)}"


def log_dir_event_path(name: str) -> str:
    if not name.startswith(LOG_DIR_EVENT_PREFIX):
        raise ValueError(f"not a log dir event notification name: {name!r}")
    return f"{LOG_DIR_EVENT_NOTIFICATION}/{check_name(name)}"


# -- JSON helpers --------------------------------------------------------------------------
def dumps(obj) -> bytes:
    """Compact JSON like Kafka's Jackson encoder (no spaces)."""
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def _loads(data: bytes | str):
    return json.loads(data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data)


def new_topic_id() -> str:
    """A topic id in Kafka's Uuid text form: url-safe base64 of 16 random bytes, no padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def _replica_map(m: Mapping[int, Iterable[int]] | None) -> dict[str, list[int]]:
    return {str(int(p)): [int(r) for r in rs] for p, rs in sorted((m or {}).items(),
                                                                    key=lambda kv: int(kv[0]))}


def _parse_replica_map(m: Mapping[str, list] | None) -> dict[int, tuple[int, ...]]:
    return {int(p): tuple(int(r) for r in rs) for p, rs in (m or {}).items()}


# -- stored records -----------------------------------------------------------------------
@dataclass(frozen=True)
class Endpoint:
    """One Kafka listener: `NAME://host:port` with its security protocol (KIP-103)."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def url(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def parse_endpoints(spec: str, protocol_map: Mapping[str, str] | str | None = None
                    ) -> tuple[Endpoint, ...]:
    """Kafka's `listeners` / `advertised.listeners` value, e.g. "PLAINTEXT://127.0.0.1:0,
    INTERNAL://0.0.0.0:9093", with `listener.security.protocol.map` ("INTERNAL:SSL,..." or a
    dict; a listener named after a security protocol maps to it by default). Raises
    InvalidConfig naming the bad entry."""
    if isinstance(protocol_map, str):
        pairs = [p.split(":", 1) for p in protocol_map.split(",") if p.strip()]
        if any(len(p) != 2 for p in pairs):
            raise InvalidConfig(f"listener.security.protocol.map {protocol_map!r}: want NAME:PROTOCOL,...")
        protocol_map = {k.strip().upper(): v.strip().upper() for k, v in pairs}
    protocol_map = dict(protocol_map or {})
    out, names = [], set()
    for item in (x.strip() for x in spec.split(",") if x.strip()):
        name, sep, hostport = item.partition("://")
        host, colon, port = hostport.rpartition(":")
        if not sep or not colon or not name or not port.isdigit() or int(port) > 65535:
            raise InvalidConfig(f"listener {item!r}: want NAME://host:port")
        name = name.upper()
        proto = protocol_map.get(name, name if name in SECURITY_PROTOCOLS else "")
        if proto not in SECURITY_PROTOCOLS:
            raise InvalidConfig(f"listener {name}: no security protocol (known: "
                                f"{', '.join(SECURITY_PROTOCOLS)}; see listener.security.protocol.map)")
        if name in names:
            raise InvalidConfig(f"listener {name} given twice")
        names.add(name)
        out.append(Endpoint(name, host.strip("[]"), int(port), proto))
    if not out:
        raise InvalidConfig(f"no listener in {spec!r}")
    return tuple(out)


@dataclass(frozen=True)
class BrokerRegistration:
    """``/brokers/ids/<id>`` (ephemeral). ``epoch`` is the znode's czxid, filled on read.
    ``endpoints`` are the advertised Kafka listeners; ``host``/``port`` those of the first
    PLAINTEXT one (Kafka's rule), or of the Ray node when the broker has no listener."""

    id: int
    host: str
    port: int
    rack: str | None = None
    node_id: str = ""
    actor_name: str = ""
    timestamp_ms: int = 0
    epoch: int = -1
    endpoints: tuple[Endpoint, ...] = ()

    VERSION = 5

    @property
    def endpoint(self) -> str:
        return self.endpoints[0].url() if self.endpoints else f"PLAINTEXT://{self.host}:{self.port}"

    def to_json(self) -> bytes:
        # Kafka's BrokerIdZNode v5 fields (jmx_port -1, no features), plus rayka's node_id
        # and actor_name.
        d = {"version": self.VERSION, "host": self.host, "port": int(self.port),
             "endpoints": [e.url() for e in self.endpoints] or [self.endpoint],
             "jmx_port": -1, "rack": self.rack, "timestamp": str(int(self.timestamp_ms)),
             "node_id": self.node_id, "actor_name": self.actor_name}
        if self.endpoints:     # without it a reader takes the endpoint as a plain PLAINTEXT one
            d["listener_security_protocol_map"] = {e.listener: e.security_protocol
                                                   for e in self.endpoints}
        return dumps(d)

    @classmethod
    def from_json(cls, broker_id: int, data: bytes, czxid: int = -1) -> "BrokerRegistration":
        d = _loads(data)
        host, port = d.get("host"), d.get("port", -1)
        eps = parse_endpoints(",".join(d["endpoints"]), d.get("listener_security_protocol_map")) \
            if d.get("endpoints") else ()
        if (not host or port in (None, -1)) and eps:
            host, port = eps[0].host, eps[0].port
        return cls(id=int(broker_id), host=host or "", port=int(port), rack=d.get("rack"),
                   node_id=d.get("node_id", ""), actor_name=d.get("actor_name", ""),
                   timestamp_ms=int(d.get("timestamp", 0)), epoch=czxid,
                   endpoints=eps if d.get("listener_security_protocol_map") else ())

    @classmethod
    def for_listeners(cls, broker_id: int, node_host: str, endpoints: Iterable[Endpoint],
                      **kw) -> "BrokerRegistration":
        """host/port from the first PLAINTEXT endpoint (Kafka), else the Ray node's host."""
        eps = tuple(endpoints)
        plain = next((e for e in eps if e.security_protocol == "PLAINTEXT"), None)
        host, port = (plain.host, plain.port) if plain else (node_host, -1)
        return cls(broker_id, host, port, endpoints=eps, **kw)


@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    """``/brokers/topics/<t>/partitions/<p>/state``. ``zk_version`` = the znode's version =
    the partition epoch, filled on read (-1 = unknown / not yet written)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1

    def __post_init__(self):
        object.__setattr__(self, "isr", tuple(int(r) for r in self.isr))

    def to_json(self) -> bytes:
        return dumps({"version": 1, "leader": int(self.leader),
                      "leader_epoch": int(self.leader_epoch),
                      "controller_epoch": int(self.controller_epoch), "isr": list(self.isr)})

    @classmethod
    def from_json(cls, data: bytes, zk_version: int = -1) -> "LeaderIsrAndControllerEpoch":
        d = _loads(data)
        return cls(leader=int(d["leader"]), leader_epoch=int(d["leader_epoch"]),
                   isr=tuple(d["isr"]), controller_epoch=int(d["controller_epoch"]),
                   zk_version=zk_version)

    def with_version(self, zk_version: int) -> "LeaderIsrAndControllerEpoch":
        return LeaderIsrAndControllerEpoch(self.leader, self.leader_epoch, self.isr,
                                           self.controller_epoch, zk_version)


@dataclass(frozen=True)
class TopicAssignment:
    """``/brokers/topics/<t>`` (version 3): replica assignment, reassignment state, topic id."""

    topic: str
    partitions: Mapping[int, tuple[int, ...]]
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    topic_id: str | None = None

    def __post_init__(self):
        check_topic(self.topic)
        for name in ("partitions", "adding_replicas", "removing_replicas"):
            m = getattr(self, name) or {}
            items = sorted(m.items(), key=lambda kv: int(kv[0]))
            object.__setattr__(self, name, {int(p): tuple(int(r) for r in rs) for p, rs in items})

    def to_json(self) -> bytes:
        return dumps({"version": 3, "partitions": _replica_map(self.partitions),
                      "adding_replicas": _replica_map(self.adding_replicas),
                      "removing_replicas": _replica_map(self.removing_replicas),
                      "topic_id": self.topic_id})

    @classmethod
    def from_json(cls, topic: str, data: bytes) -> "TopicAssignment":
        d = _loads(data)
        return cls(topic=topic, partitions=_parse_replica_map(d.get("partitions")),
                   adding_replicas=_parse_replica_map(d.get("adding_replicas")),
                   removing_replicas=_parse_replica_map(d.get("removing_replicas")),
                   topic_id=d.get("topic_id"))


# -- small znodes -------------------------------------------------------------------------
def encode_cluster_id(cluster_id: str) -> bytes:
    """``/cluster/id``: Kafka's ClusterIdZNode, ``{"version":"1","id":"<uuid base64>"}``."""
    return dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_loads(data)["id"])


def encode_features(features: Mapping[str, int]) -> bytes:
    """FeatureZNode v2, status enabled (1): {"features": {name: {"max_version_level": n}}}."""
    return dumps({"version": 2, "status": 1, "features": {
        name: {"max_version_level": int(level)} for name, level in sorted(features.items())}})


def decode_features(data: bytes) -> dict[str, int]:
    """name → finalized level; a disabled znode (status 0) finalizes nothing."""
    doc = _loads(data)
    if int(doc.get("status", 1)) != 1:
        return {}
    return {str(name): int(v["max_version_level"])
            for name, v in (doc.get("features") or {}).items()}


def encode_controller(controller_id: int, timestamp_ms: int) -> bytes:
    return dumps({"version": 1, "brokerid": int(controller_id),
                  "timestamp": str(int(timestamp_ms))})


def decode_controller_id(data: bytes | None) -> int | None:
    if not data:
        return None
    try:
        return int(_loads(data)["brokerid"])
    except (ValueError, KeyError, TypeError):
        return None


def encode_epoch(epoch: int) -> bytes:
    return str(int(epoch)).encode("ascii")


def decode_epoch(data: bytes) -> int:
    return int(data.decode("ascii").strip())


def encode_reassignment(partitions: Mapping[TopicPartition, Iterable[int]]) -> bytes:
    return dumps({"version": 1, "partitions": [
        {"topic": t, "partition": int(p), "replicas": [int(r) for r in rs]}
        for (t, p), rs in sorted(partitions.items())]})


def decode_reassignment(data: bytes | None) -> dict[TopicPartition, tuple[int, ...]]:
    if not data:
        return {}
    return {(e["topic"], int(e["partition"])): tuple(int(r) for r in e["replicas"])
            for e in _loads(data).get("partitions", [])}


def encode_partition_list(partitions: Iterable[TopicPartition]) -> bytes:
    """``{"version":1,"partitions":[{"topic":..,"partition":..}]}``: preferred election and
    ISR change notifications."""
    return dumps({"version": 1, "partitions": [{"topic": t, "partition": int(p)}
                                               for t, p in sorted(set(partitions))]})


def decode_partition_list(data: bytes | None) -> set[TopicPartition]:
    if not data:
        return set()
    return {(e["topic"], int(e["partition"])) for e in _loads(data).get("partitions", [])}


def encode_log_dir_event(broker_id: int) -> bytes:
    """A log dir event notice: ``{"version":1,"broker":<id>,"event":1}`` (event 1 =
    LogDirFailure, the only event Kafka defines)."""
    return dumps({"version": 1, "broker": int(broker_id), "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int:
    """The broker id of a log dir event notice; ValueError for any other version or event,
    or a notice without a broker."""
    try:
        d = _loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"log dir event notice is not JSON: {e}") from None
    if not isinstance(d, dict) or d.get("version") != 1:
        version = d.get("version") if isinstance(d, dict) else None
        raise ValueError(f"log dir event notice version {version!r} is not supported (only 1)")
    if d.get("event") != LOG_DIR_FAILURE_EVENT:
        raise ValueError(f"log dir event {d.get('event')!r} is unknown "
                         f"(only {LOG_DIR_FAILURE_EVENT}, LogDirFailure)")
    broker = d.get("broker")
    if not isinstance(broker, int) or isinstance(broker, bool):
        raise ValueError(f"log dir event notice names no broker id: {broker!r}")
    return broker


def _config_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def encode_topic_config(config: Mapping[str, object] | None) -> bytes:
    return dumps({"version": 1, "config": {str(k): _config_value(v)
                                           for k, v in sorted((config or {}).items())}})


def decode_topic_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    return dict(_loads(data).get("config", {}))


def encode_producer_id_block(broker_id: int, block_start: int, block_end: int) -> bytes:
    """Kafka's /latest_producer_id_block: {"version":1,"broker":..,"block_start":..,"block_end":..}
    (block_start/block_end as strings, as Kafka writes them)."""
    return dumps({"version": 1, "broker": broker_id, "block_start": str(block_start),
                  "block_end": str(block_end)})


def decode_producer_id_block(data: bytes | None) -> tuple[int, int] | None:
    if not data:
        return None
    d = _loads(data)
    return int(d["block_start"]), int(d["block_end"])
