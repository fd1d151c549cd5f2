"""The broker's side of the Kafka protocol: `KafkaBrokerApi` implements protocol.api.BrokerApi
over the broker's own replica manager, waiters and ZooKeeper store (actors/broker.py).

Rules:
- No second copy of the data path: produce is `Broker.produce_begin` and fetch is
  `Broker.fetch_begin`, the very methods behind the Ray calls; reads of the
  replica manager happen under the broker's lock; ZooKeeper calls (topic creation, configs,
  producer-id blocks) happen outside it.
- Broker configs with Kafka's names (`KafkaConfig`, popped from the broker's config before
  the rest become topic defaults): listeners, advertised.listeners,
  listener.security.protocol.map, auto.create.topics.enable (true), num.partitions (1),
  default.replication.factor (1), socket.request.max.bytes (100 MiB),
  connections.max.idle.ms (10 min); replication (followers fetch from their leader over
  this protocol, actors/fetcher.py): inter.broker.listener.name (default: the listener
  named after security.inter.broker.protocol, PLAINTEXT: Kafka's rule; it must be one of
  the broker's listeners; its SASL and TLS client settings are actors/security.py's),
  replica.fetch.wait.max.ms (500), replica.fetch.min.bytes (1),
  replica.fetch.max.bytes (1 MiB per partition), replica.fetch.response.max.bytes
  (10 MiB), replica.fetch.backoff.ms (100; Kafka's 1000: a follower that lost its leader
  tries again sooner), max.incremental.fetch.session.cache.slots (1000 fetch sessions,
  KIP-227, followers' outranking consumers'); broker.rack (registered in /brokers/ids,
  so every broker's metadata answers it) and replica.selector.class (none, or Kafka's
  RackAwareReplicaSelector: the leader names a consumer in another broker's rack that
  broker as its preferred read replica, KIP-392; the replica manager applies it). Dots or
  underscores alike.
- Metadata answers come from the broker's metadata cache (fed by UpdateMetadata), brokers
  listed with their endpoint for the listener the request came in on (Kafka's rule). The
  "controller" told to clients is the lowest live broker: rayka's controllers are not
  brokers, and every broker serves admin requests.
- ElectLeaders and Alter/ListPartitionReassignments go to the active controller (the one
  /controller names) as calls; an election's answer waits, up to its timeout, until this
  broker's metadata shows the new leader (REQUEST_TIMED_OUT after). DescribeLogDirs reports
  the broker's data dir as its one log dir.
- Admin writes (CreateTopics, DeleteTopics, CreatePartitions, (Incremental)AlterConfigs) are
  planned by controller/topic_admin.py and written to ZooKeeper as rayka's Admin does; the
  answer waits up to the request's timeout until this broker's metadata shows the change
  (REQUEST_TIMED_OUT after it, the change staying), or answers at once for timeout <= 0.
- Client quotas, SCRAM credentials and dynamic broker configs are Kafka's /config entities,
  read and written straight in ZooKeeper (actors/config_store.py, actors/security_store.py;
  IncrementalAlterConfigs on a BROKER changes only actors/dynamic_config.py's dynamic
  keys); `quota_tracker` is the quotas in force on this broker, fed from the change
  notifications by actors/dynamic_config.py and read by the listeners.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from dataclasses import dataclass, fields

from actors import broker_loggers
from coordinator import group_config
from actors import security_store as security
from actors.config_store import read_entity, read_quotas, rewrite_entity, set_or_delete
from actors.delete_records import delete_records
from actors.dynamic_config import DEFAULT_ENTITY, DYNAMIC_KEYS, STORED_ONLY
from actors.security import REAUTH
from actors.group_host import OFFSETS_TOPIC
from actors.txn_host import TXN_TOPIC
from actors.share_state_host import STATE_TOPIC
from share.records import ShareKey
from actors.purgatory import DelayedFetch
from controller.layout import Endpoint, parse_endpoints
from controller.topic_admin import plan_partitions, plan_topic
from controller.topic_config import CONFIG_DEFS, normalize_topic_config
from protocol.entity_config import entity_path
from protocol.fetch_session import DEFAULT_SLOTS, FetchSessionCache
from protocol.quotas import QuotaTracker
from protocol.api import (BrokerNode, ClusterMetadata, ConfigEntry,
                          ConfigsOutcome, Deferred, FetchOutcome, LogDir, LogDirPartition,
                          OffsetAnswer, OngoingReassignment,
                          PartitionMetadata, ProduceOutcome, TopicMetadata, TopicOutcome,
                          TopicSpec)
from controller.assignment import validate_topic_name
from replicas.config_keys import dotted_key
from replicas.legacy_offsets import offsets_before
from replicas.replica_selector import selector_for
from replicas.replica_types import topic_defaults_from_broker_config
from replicas.errors import ErrorCode as E
from replicas.errors import (InvalidConfig, InvalidRequest, KafkaError, LeaderNotAvailable,
                             NotController, RequestTimedOut, TopicAlreadyExists,
                             UnknownServerError,
                             UnknownTopicOrPartition)

log = logging.getLogger(__name__)
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TXN_TOPIC, STATE_TOPIC})   # Metadata's is_internal

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32     # Kafka's ConfigResource.Type
SOURCE_TOPIC, SOURCE_STATIC_BROKER, SOURCE_DEFAULT = 1, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LIST_CONFIGS = frozenset({"cleanup.policy"})      # the list-typed topic configs (APPEND/SUBTRACT)


@dataclass(frozen=True)
class KafkaConfig:
    listeners: str = "PLAINTEXT://127.0.0.1:0"
    advertised_listeners: str | None = None
    listener_security_protocol_map: str | None = None
    auto_create_topics_enable: bool = True
    num_partitions: int = 1
    default_replication_factor: int = 1
    socket_request_max_bytes: int = 100 * 1024 * 1024
    connections_max_idle_ms: int = 600_000
    inter_broker_listener_name: str | None = None
    security_inter_broker_protocol: str = "PLAINTEXT"
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1024 * 1024
    replica_fetch_response_max_bytes: int = 10 * 1024 * 1024
    replica_fetch_backoff_ms: int = 100
    max_incremental_fetch_session_cache_slots: int = DEFAULT_SLOTS
    broker_rack: str | None = None
    replica_selector_class: str | None = None

    @classmethod
    def pop_from(cls, config: dict) -> "KafkaConfig":
        """Take this config's keys (dotted or underscored) out of a broker's config dict."""
        kw = {}
        for f in fields(cls):
            for key in (f.name, dotted_key(f.name)):
                if key in config:
                    raw = config.pop(key)
                    kw[f.name] = _parse(f.name, raw, cls.__dataclass_fields__[f.name].default)
        out = cls(**kw)
        parse_endpoints(out.listeners, out.listener_security_protocol_map)   # InvalidConfig early
        out.inter_broker_listener()
        selector_for(out.replica_selector_class)
        return out

    def inter_broker_listener(self) -> str:
        """The listener other brokers fetch from (Kafka's inter.broker.listener.name, else
        the listener named after security.inter.broker.protocol); InvalidConfig when this
        broker has no such listener."""
        name = (self.inter_broker_listener_name or self.security_inter_broker_protocol).upper()
        names = [e.listener for e in self.bind_endpoints()]
        if name not in names:
            raise InvalidConfig(f"inter.broker.listener.name {name} must be one of the "
                                f"listeners ({', '.join(names)}): other brokers replicate "
                                "through it")
        return name

    def bind_endpoints(self) -> tuple[Endpoint, ...]:
        return parse_endpoints(self.listeners, self.listener_security_protocol_map)

    def advertised(self, bound: dict[str, int], node_host: str) -> tuple[Endpoint, ...]:
        """advertised.listeners, else the listeners: a wildcard or empty host becomes this
        node's address, port 0 the port actually bound."""
        eps = parse_endpoints(self.advertised_listeners or self.listeners,
                              self.listener_security_protocol_map)
        out = []
        for e in eps:
            host = node_host if e.host in ("", "0.0.0.0", "::") else e.host
            port = e.port or bound.get(e.listener, 0)
            out.append(Endpoint(e.listener, host, port, e.security_protocol))
        return tuple(out)


def _mtime_ms(path) -> int:
    try:
        return os.stat(path).st_mtime_ns // 1_000_000
    except OSError:
        return 0


def _parse(name: str, raw, default):
    try:
        if isinstance(default, bool):
            value = str(raw).strip().lower()
            if value not in ("true", "false"):
                raise ValueError
            return value == "true"
        if isinstance(default, int):
            return int(str(raw).strip())
        return None if raw is None else str(raw)
    except ValueError:
        raise InvalidConfig(f"Invalid value {raw!r} for configuration {dotted_key(name)}") from None


def _set_or_delete(config: dict, ops) -> None:
    """IncrementalAlterConfigs' SET and DELETE on an entity config with no list keys (a
    broker's dynamic configs, a group's): APPEND/SUBTRACT are INVALID_CONFIG, as Kafka says."""
    for name, op, value in ops:
        if op == SET:
            config[name] = value
        elif op == DELETE:
            config.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            raise InvalidConfig(f"Config value append/subtract is not allowed for "
                                f"config key {name}: it is not a list")
        else:
            raise InvalidRequest(f"Unknown config operation {op}")


class KafkaBrokerApi:
    def __init__(self, broker, config: KafkaConfig, cluster_id: str):
        self.broker = broker
        self.broker_id = broker.id
        self.config = config
        self.cluster_id = cluster_id
        self._pid_lock = threading.Lock()
        self._pid_block = (0, -1)                      # [next, end] of this broker's block
        self.fetch_sessions = FetchSessionCache(
            config.max_incremental_fetch_session_cache_slots,
            clock_ms=lambda: int(time.monotonic() * 1000),
            full_read_interval_ms=max(broker.rm.config.replica_lag_time_max_ms // 4, 1),
            on_close=broker.parked.session_closed)
        # client quotas in force on this broker (kept current by actors/dynamic_config.py)
        self.quota_tracker = QuotaTracker(lambda: int(time.monotonic() * 1000))

    @property
    def auto_create_topics_enable(self) -> bool:
        return self.config.auto_create_topics_enable

    def finalized_features(self):
        return self.broker.finalized_features

    def update_features(self, updates, validate_only: bool):
        return self.broker.store.update_features(updates, validate_only)

    # -- metadata -------------------------------------------------------------------------------
    def metadata(self, topics, allow_auto_create: bool, listener: str) -> ClusterMetadata:
        b = self.broker
        with b.lock:
            md = b.rm.metadata
            live = dict(md.live_brokers)
            known = set(md.topics())
            names = sorted(known) if topics is None else list(dict.fromkeys(topics))
            found = {t: self._topic(md, t, live) for t in names if t in known}
            # Kafka clients send admin requests to the "controller" and expect a broker id:
            # rayka's controllers are separate actors, and ANY broker serves admin requests
            # (they write ZooKeeper), so the lowest live broker stands in (as KRaft does).
            controller_id = min(live) if live else -1
        out = []
        for t in names:
            if t in found:
                out.append(found[t])
                continue
            try:
                validate_topic_name(t)
            except KafkaError as exc:
                out.append(TopicMetadata(t, exc.code))
                continue
            if allow_auto_create and self.config.auto_create_topics_enable:
                out.append(TopicMetadata(t, self._auto_create(t, live)))
            else:
                out.append(TopicMetadata(t, UnknownTopicOrPartition.code))
        nodes = []
        for bid, lb in sorted(live.items()):
            ep = next((e for e in getattr(lb, "endpoints", ()) if e.listener == listener), None)
            if ep is not None:
                nodes.append(BrokerNode(bid, ep.host, ep.port, lb.rack))
        return ClusterMetadata(self.cluster_id, controller_id, tuple(nodes), tuple(out))

    @staticmethod
    def _topic(md, topic: str, live) -> TopicMetadata:
        parts = []
        for p in md.partitions_of(topic):
            s = md.partitions[(topic, p)]
            replicas, isr = tuple(s.replicas), tuple(s.isr)
            leader = s.leader if s.leader in live else -1
            parts.append(PartitionMetadata(p, E.NONE if leader >= 0 else LeaderNotAvailable.code,
                                           leader, s.leader_epoch, replicas, isr,
                                           tuple(r for r in replicas if r not in live)))
        return TopicMetadata(topic, E.NONE, tuple(parts), topic_id=md.topic_id(topic),
                             internal=topic in INTERNAL_TOPICS)

    def topic_ids(self) -> dict[str, str]:
        with self.broker.lock:
            return self.broker.rm.metadata.topic_ids()

    def topic_partition_counts(self) -> dict[str, tuple[str, int]]:
        with self.broker.lock:
            md = self.broker.rm.metadata
            counts: dict[str, int] = {}
            for tp in md.partitions:
                counts[tp.topic] = counts.get(tp.topic, 0) + 1
            return {t: (i, counts[t]) for t, i in md.topic_ids().items() if t in counts}

    def _internal_hosts(self) -> dict:
        """The coordinators' topics, by name (__consumer_offsets, __transaction_state,
        __share_group_state)."""
        return {h.topic: h for h in (getattr(self.broker, "groups", None),
                                     getattr(self.broker, "txns", None),
                                     getattr(self.broker, "share_states", None))
                if h is not None}

    def _auto_create(self, topic: str, live) -> int:
        """Kafka's auto.create.topics.enable: create with the broker defaults and answer
        LEADER_NOT_AVAILABLE until the topic has leaders (the client asks again). An internal
        topic is created as its coordinator creates it (AutoTopicCreationManager: its
        partitions, replication and configs), whoever asks first: a lag checker reading
        __consumer_offsets before any group exists must not make it a plain topic."""
        internal = self._internal_hosts().get(topic)
        if internal is not None:
            internal.ensure_topic()
            return LeaderNotAvailable.code
        try:
            plan = plan_topic(topic, -1, -1, list(live),
                              default_partitions=self.config.num_partitions,
                              default_replication_factor=min(self.config.default_replication_factor,
                                                             max(len(live), 1)))
            self.broker.store.create_topic(topic, plan.assignment, plan.config)
            log.info("broker %s: auto-created topic %s (%d partitions, RF %d)", self.broker_id,
                     topic, plan.partitions, plan.replication_factor)
        except KafkaError as exc:
            if exc.code != E.TOPIC_ALREADY_EXISTS:       # someone won the race
                return exc.code
        return LeaderNotAvailable.code

    # -- data -----------------------------------------------------------------------------------------
    def produce(self, acks: int, timeout_ms: int, partitions,
                transactional_id: str | None = None, add_partitions: bool = False
                ) -> "Deferred":
        """Appends now (a transactional buffer after its verification, actors/produce.py);
        the acknowledgements come from the returned Deferred's result()."""
        requests = [(tuple(tp), data) for tp, data in partitions]
        pending = self.broker.produce_begin(requests, acks, timeout_ms,
                                            transactional_id=transactional_id,
                                            add_partitions=add_partitions)

        def outcomes() -> dict:
            answers = pending.result()
            results = {tp: answers[i] for i, (tp, _) in enumerate(requests)}
            with self.broker.lock:
                starts = {tp: self._log_start(tp) for tp in results}
            return {tp: ProduceOutcome(r["error"], r["base_offset"] if not r["error"] else -1,
                                       starts[tp], r.get("message") or None,
                                       tuple(r.get("record_errors", ())))
                    for tp, r in results.items()}
        return Deferred(outcomes, pending.when_ready)

    def _log_start(self, tp) -> int:
        try:
            return self.broker.rm.log(tp).log_start_offset
        except (KeyError, KafkaError):
            return -1

    @property
    def fetch_changes(self):
        """What the fetch sessions ask before reading (protocol/fetch_session.py)."""
        return self.broker.parked.journal

    def fetch(self, replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, asks,
              reads=None, client=None, session=None):
        raw = self.broker.fetch_begin(      # a FetchAsk is the broker's ask tuple
            replica_id, asks, max_wait_ms, min_bytes, max_bytes, reads,
            isolation_level if replica_id < 0 else 0, client, session)
        if isinstance(raw, DelayedFetch):      # parked: answered when the purgatory says
            return Deferred(raw.result, raw.when_ready).then(lambda r: self._fetch_outcomes(r, replica_id))
        return self._fetch_outcomes(raw, replica_id)

    def _fetch_outcomes(self, raw: dict, replica_id: int = 0) -> dict:
        if replica_id < 0:                     # a consumer's: its bytes counted per topic
            self.broker.topic_io.count_out((tp, r.records) for tp, r in raw.items())
        with self.broker.lock:
            md = self.broker.rm.metadata
            leaders = {tp: (md.partitions[tp].leader, md.partitions[tp].leader_epoch)
                       for tp, r in raw.items() if r.error and tp in md.partitions}
        return {tp: FetchOutcome(r.error, r.records, r.high_watermark,
                                 r.last_stable_offset if r.last_stable_offset >= 0
                                 else r.high_watermark,
                                 r.log_start_offset, r.diverging_epoch,
                                 leaders.get(tp, (-1, -1)), r.aborted_transactions,
                                 r.preferred_read_replica)
                for tp, r in raw.items()}

    def list_offsets(self, isolation_level, asks) -> dict:
        with self.broker.lock:
            return {tuple(tp): OffsetAnswer(*self.broker.rm.list_offset(tp, ts, epoch,
                                                                        isolation_level))
                    for tp, ts, epoch in asks}

    def legacy_offsets(self, replica_id: int, asks) -> dict:
        """ListOffsets v0 (replicas/legacy_offsets.py): segment start offsets before a time,
        read from the leader (any replica for the debugging replica id -2); one answer per
        ask, in order."""
        out = []
        now_ms = int(time.time() * 1000)
        with self.broker.lock:
            rm = self.broker.rm
            for tp, timestamp, max_num in asks:
                tp = tuple(tp)
                error = rm.list_offset(tp, -1).error if replica_id != -2 else E.NONE
                if not error and max_num < 0:
                    error = E.UNKNOWN_SERVER_ERROR       # Kafka: NegativeArraySizeException
                if error:
                    out.append((error, ()))
                    continue
                try:
                    log, hw = rm.log(tp), rm.partition_info(tp)["high_watermark"]
                except KafkaError as exc:
                    out.append((exc.code, ()))
                    continue
                segments = [(seg.base_offset, _mtime_ms(seg.log_path)) for seg in log.segments]
                out.append((E.NONE, offsets_before(
                    segments, log.segments[-1].size if log.segments else 0,
                    log.log_start_offset, log.log_end_offset, hw, now_ms, timestamp, max_num,
                    from_consumer=replica_id == -1)))
        return out

    def known_partitions(self, tps) -> set:
        with self.broker.lock:
            parts = self.broker.rm.metadata.partitions
            return {tuple(tp) for tp in tps if tuple(tp) in parts}

    def zk_commit_offsets(self, group_id: str, asks) -> dict:
        """OffsetCommit v0: offsets kept in ZooKeeper (KafkaApis.commitOffsetsToZookeeper):
        partitions this broker's metadata does not know are UNKNOWN_TOPIC_OR_PARTITION,
        metadata over offset.metadata.max.bytes OFFSET_METADATA_TOO_LARGE."""
        known = self.known_partitions([tp for tp, _, _ in asks])
        max_metadata = self.broker.groups.config.offset_metadata_max_bytes
        out = {}
        for tp, offset, metadata in asks:
            tp = tuple(tp)
            if tp not in known:
                out[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif metadata is not None and len(metadata) > max_metadata:
                out[tp] = E.OFFSET_METADATA_TOO_LARGE
            else:
                try:
                    self.broker.store.set_consumer_offset(group_id, tp[0], tp[1], offset)
                    out[tp] = E.NONE
                except Exception:                     # Kafka: Errors.forException
                    log.warning("OffsetCommit v0 of %s to ZooKeeper failed", group_id,
                                exc_info=True)
                    out[tp] = E.UNKNOWN_SERVER_ERROR
        return out

    def zk_fetch_offsets(self, group_id: str, tps) -> dict:
        """OffsetFetch v0: (error, offset) from ZooKeeper; an unknown partition or one with no
        offset is UNKNOWN_TOPIC_OR_PARTITION with offset -1 (Kafka's UNKNOWN_PARTITION)."""
        known = self.known_partitions(tps)
        out = {}
        for tp in tps:
            tp = tuple(tp)
            try:
                got = self.broker.store.get_consumer_offset(group_id, tp[0], tp[1]) \
                    if tp in known else None
            except Exception:
                log.warning("OffsetFetch v0 of %s from ZooKeeper failed", group_id,
                            exc_info=True)
                out[tp] = (E.UNKNOWN_SERVER_ERROR, -1)
                continue
            out[tp] = (E.UNKNOWN_TOPIC_OR_PARTITION, -1) if got is None else (E.NONE, got)
        return out

    def delete_records(self, asks, timeout_ms: int = 0):
        """DeleteRecords: {tp: (error, low watermark)}, or a Deferred of it while followers'
        log starts catch up (actors/delete_records.py)."""
        return delete_records(self.broker, asks, timeout_ms)

    def offsets_for_leader_epoch(self, asks) -> dict:
        out = {}
        with self.broker.lock:
            for tp, current, epoch in asks:
                error, got_epoch, end = self.broker.rm.offsets_for_leader_epoch(tp, current, epoch)
                out[tuple(tp)] = OffsetAnswer(error, -1, end, got_epoch)
        return out

    def new_producer_id(self) -> int:
        """A fresh id from this broker's block of /latest_producer_id_block (Kafka's
        ProducerIdManager); a new block when it runs out. Idempotent producers and the
        transaction coordinator draw from it."""
        with self._pid_lock:
            start, end = self._pid_block
            if start > end:
                start, end = self.broker.store.allocate_producer_id_block(owner_id=self.broker_id)
            self._pid_block = (start + 1, end)
        return start

    def init_producer_id(self, transactional_id, producer_id, producer_epoch):
        """An idempotent producer's id: fresh, at epoch 0 (a transactional id goes to the
        transaction coordinator through `txn_call`)."""
        return E.NONE, self.new_producer_id(), 0

    # -- transactions -----------------------------------------------------------------------------------
    def txn_call(self, make_event) -> Deferred:
        return self.broker.txns.call(make_event)

    def write_txn_markers(self, markers, timeout_ms: int) -> Deferred:
        """WriteTxnMarkers: [(producer id, epoch, committed, coordinator epoch, [tp])] →
        Deferred of [{tp: error}] per marker, once each marker is replicated."""
        pending = self.broker.write_txn_markers_begin(markers, timeout_ms)
        return Deferred(lambda: (pending.result(), pending.markers_result())[1],
                        pending.when_ready)

    def describe_producers(self, tps) -> dict:
        """DescribeProducers (KIP-664): {tp: (error, [ProducerState])} of the partitions this
        broker hosts (leader or follower, as Kafka answers)."""
        out = {}
        with self.broker.lock:
            for tp in tps:
                out[tuple(tp)] = self.broker.rm.describe_producers(tuple(tp))
        return out

    # -- ACLs (ZooKeeper writes; every broker's authorizer reloads from the notification) ---------
    def create_acls(self, bindings) -> list:
        try:
            return security.create_acls(self.broker.store, bindings)
        finally:
            self.broker.security.acls_written()

    def delete_acls(self, filters) -> list:
        try:
            return security.delete_acls(self.broker.store, filters)
        finally:
            self.broker.security.acls_written()

    # -- client quotas and SCRAM credentials (ZooKeeper; protocol/handlers/quotas.py) ----------
    def client_quotas(self) -> dict:
        return read_quotas(self.broker.store)

    def alter_client_quotas(self, asks, validate_only: bool) -> list:
        out = []
        for entity, ops in asks:
            try:
                if not validate_only:
                    rewrite_entity(self.broker.store, entity_path(entity), set_or_delete(ops))
                out.append((E.NONE, None))
            except Exception as exc:                 # a ZooKeeper failure: per entity
                log.warning("alter client quotas %s: %s", entity, exc)
                out.append((UnknownServerError.code, str(exc)))
        return out

    def describe_scram(self, users) -> list:
        return security.describe_scram(self.broker.store, users)

    def alter_scram(self, upsertions, deletions) -> list:
        return security.alter_scram(self.broker.store, upsertions, deletions)

    def coordinator_of(self, key: str, key_type: int = 0) -> tuple[int, int]:
        """(error, broker id): the leader of the group's `__consumer_offsets` partition (key
        type 0), the transactional id's `__transaction_state` partition (1) or a
        share-partition's `__share_group_state` partition (2, key "<group>:<topic id>:
        <partition>"); COORDINATOR_NOT_AVAILABLE while the topic is created or the partition
        has no leader."""
        host = {0: self.broker.groups, 1: self.broker.txns, 2: self.broker.share_states}[key_type]
        with self.broker.lock:
            known = host.topic in self.broker.rm.metadata.topics()
        if not known and not host.ensure_topic():
            return E.COORDINATOR_NOT_AVAILABLE, -1
        partition = host.partition_for(ShareKey.parse(key) if key_type == 2 else key)
        with self.broker.lock:
            leader = self.broker.rm.metadata.leader((host.topic, partition))
        return (E.NONE, leader) if leader is not None else (E.COORDINATOR_NOT_AVAILABLE, -1)

    def find_coordinator(self, keys, listener: str, key_type: int = 0) -> dict:
        out = {}
        for k in keys:
            error, node = self.coordinator_of(k, key_type)
            with self.broker.lock:
                lb = self.broker.rm.metadata.live_brokers.get(node)
            ep = next((e for e in getattr(lb, "endpoints", ()) if e.listener == listener), None)
            if error or ep is None:
                out[k] = (error or E.COORDINATOR_NOT_AVAILABLE, -1, "", -1)
            else:
                out[k] = (E.NONE, node, ep.host, ep.port)
        return out

    def group_call(self, make_event) -> Deferred:
        return self.broker.groups.call(make_event)

    # -- share groups (actors/share_host.py) ----------------------------------------------------
    def share_heartbeat(self, request, topics):
        return self.broker.shares.heartbeat(request, topics)

    def share_describe(self, group_ids) -> list:
        return self.broker.shares.describe(group_ids)

    def share_fetch(self, group_id, member_id, epoch, asked, forgotten, max_wait_ms, min_bytes,
                    max_bytes, max_records, renew_only) -> Deferred:
        return self.broker.shares.fetch(group_id, member_id, epoch, asked, forgotten,
                                        max_wait_ms, min_bytes, max_bytes, max_records,
                                        renew_only)

    def share_acknowledge(self, group_id, member_id, epoch, acks):
        return self.broker.shares.acknowledge(group_id, member_id, epoch, acks)

    def share_offsets(self, request) -> Deferred:
        return self.broker.shares.offsets.call(request)

    # -- topics ---------------------------------------------------------------------------------------
    def _live(self) -> list[int]:
        with self.broker.lock:
            return sorted(self.broker.rm.metadata.live_brokers)

    def _wait(self, ready, timeout_ms: int) -> bool:
        """Wait (on the broker's `changed`) until ready() holds under the lock."""
        deadline = time.monotonic() + timeout_ms / 1000
        with self.broker.lock:
            while not ready():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.broker.changed.wait(remaining)
        return True

    def _has_leaders(self, topic: str, count: int) -> bool:
        md = self.broker.rm.metadata
        parts = md.partitions_of(topic)
        return len(parts) >= count and all(md.leader((topic, p)) is not None for p in parts)

    def create_topics(self, specs: list[TopicSpec], timeout_ms: int, validate_only: bool):
        live, out, created = self._live(), {}, []
        for spec in specs:
            try:
                with self.broker.lock:      # Kafka's ZkAdminManager asks its metadata cache
                    exists = spec.name in self.broker.rm.metadata.topics()
                if exists:
                    raise TopicAlreadyExists(f"Topic '{spec.name}' already exists.")
                plan = plan_topic(spec.name, spec.partitions, spec.replication_factor, live,
                                  config={k: v for k, v in spec.configs.items() if v is not None},
                                  assignment=spec.assignments or None,
                                  default_partitions=self.config.num_partitions,
                                  default_replication_factor=self.config.default_replication_factor,
                                  rng=random.Random())
                topic_id = None
                if not validate_only:
                    topic_id = self.broker.store.create_topic(spec.name, plan.assignment,
                                                              plan.config).topic_id
                    created.append((spec.name, plan.partitions))
                out[spec.name] = TopicOutcome(E.NONE, None, plan.partitions,
                                              plan.replication_factor,
                                              self._topic_entries(plan.config, None),
                                              topic_id=topic_id)
            except KafkaError as exc:
                out[spec.name] = TopicOutcome(exc.code, exc.message)
        if created and timeout_ms > 0:
            self._wait(lambda: all(self._has_leaders(t, n) for t, n in created), timeout_ms)
            with self.broker.lock:
                late = [t for t, n in created if not self._has_leaders(t, n)]
            for t in late:
                out[t] = TopicOutcome(RequestTimedOut.code, f"Topic {t} was created but its "
                                      f"leaders were not known within {timeout_ms} ms")
        return out

    def delete_topics(self, names, timeout_ms: int):
        out, asked = {}, []
        for name in names:
            try:
                self.broker.store.request_topic_deletion(name)
                asked.append(name)
                out[name] = TopicOutcome(E.NONE)
            except KafkaError as exc:
                out[name] = TopicOutcome(exc.code, exc.message)
        if asked and timeout_ms > 0:
            # gone from this broker's metadata AND from ZooKeeper (the controller deletes the
            # znodes after the replicas): a client may re-create the name at once
            deadline = time.monotonic() + timeout_ms / 1000
            store = self.broker.store
            gone = lambda: not set(asked) & set(self.broker.rm.metadata.topics())  # noqa: E731
            left = set(asked)
            if self._wait(gone, timeout_ms):
                while left and time.monotonic() < deadline:
                    left &= store.get_topics() | store.get_topic_deletions()
                    if left:
                        self.broker.stopped.wait(0.05)   # poll interval of a deadline loop
            for name in left:
                out[name] = TopicOutcome(RequestTimedOut.code, f"Topic {name} is still being "
                                         f"deleted after {timeout_ms} ms")
        return out

    def create_partitions(self, asks, timeout_ms: int, validate_only: bool):
        live, out, grown = self._live(), {}, []
        reassigning = {tp[0] for tp in self.broker.store.get_reassignment()}
        for name, count, assignment in asks:
            try:
                current = self.broker.store.get_topic_assignment(name)
                if current is None:
                    raise UnknownTopicOrPartition(f"The topic '{name}' does not exist.")
                new = plan_partitions(name, current.partitions, count, live,
                                      assignment=assignment,
                                      reassigning=name in reassigning or bool(
                                          current.adding_replicas or current.removing_replicas))
                if not validate_only:
                    self.broker.store.add_partitions(name, new, current)
                    grown.append((name, count))
                out[name] = TopicOutcome(E.NONE)
            except KafkaError as exc:
                out[name] = TopicOutcome(exc.code, exc.message)
        if grown and timeout_ms > 0 and not self._wait(
                lambda: all(self._has_leaders(t, n) for t, n in grown), timeout_ms):
            for t, n in grown:
                with self.broker.lock:
                    if not self._has_leaders(t, n):
                        out[t] = TopicOutcome(RequestTimedOut.code,
                                              f"Partitions of {t} not known within {timeout_ms} ms")
        return out

    # -- configs --------------------------------------------------------------------------------------
    def _topic_entries(self, overrides, keys) -> tuple[ConfigEntry, ...]:
        """Kafka's ConfigHelper.createTopicConfigEntry: the value in force (the override,
        else the broker's live default, else Kafka's); the synonyms the override and the
        broker keys behind it (actors/dynamic_config.py topic_synonyms); the source the
        first synonym's, DEFAULT_CONFIG without any."""
        defaults = self.broker.topic_defaults
        dynamic = self.broker.dynamic_broker_config
        out = []
        for name in sorted(CONFIG_DEFS):
            if keys is not None and name not in keys:
                continue
            d = CONFIG_DEFS[name]
            synonyms = dynamic.topic_synonyms(name)
            if name in overrides:
                value = overrides[name]
                synonyms = ((name, value, SOURCE_TOPIC), *synonyms)
            elif name in defaults:
                value = str(defaults[name])
            else:
                value = normalize_topic_config({name: d.default})[name]
            source = synonyms[0][2] if synonyms else SOURCE_DEFAULT
            out.append(ConfigEntry(name, value, False, source != SOURCE_TOPIC, source, False,
                                   d.doc, synonyms))
        return tuple(out)

    def _broker_entries(self, keys) -> tuple[ConfigEntry, ...]:
        """This broker's read-only (static) configs, as Kafka describes them: the value in
        force, its synonyms STATIC_BROKER_CONFIG (when it differs from the default) then
        DEFAULT_CONFIG (rayka's default, when there is one); the listeners with the ports
        actually bound and advertised."""
        def text(value) -> str | None:
            return None if value is None else str(value).lower() if isinstance(value, bool) \
                else str(value)

        values = {"broker.id": (str(self.broker_id), None),
                  "log.dirs": (",".join(str(d.path) for d in self.broker.rm.dirs.all), None),
                  **{dotted_key(f.name): (text(getattr(self.config, f.name)), text(f.default))
                     for f in fields(self.config)}}
        values[REAUTH] = (str(self.broker.security.config.reauth_ms()), "0")
        advertised = getattr(self.broker, "advertised", ())
        if advertised:
            ports = {e.listener: e.port for e in advertised}
            bound = ",".join(f"{e.listener}://{e.host}:{e.port or ports.get(e.listener, 0)}"
                             for e in self.config.bind_endpoints())
            values["listeners"] = (bound, values["listeners"][1])
            values["advertised.listeners"] = (",".join(e.url() for e in advertised), None)
        out = []
        for k, (value, default) in sorted(values.items()):
            if keys is not None and k not in keys:
                continue
            synonyms = ([(k, value, SOURCE_STATIC_BROKER)] if value is not None
                        and value != default else []) + \
                ([(k, default, SOURCE_DEFAULT)] if default is not None else [])
            source = synonyms[0][2] if synonyms else SOURCE_STATIC_BROKER
            out.append(ConfigEntry(k, "" if value is None else value, True,
                                   source == SOURCE_DEFAULT, source, False, None,
                                   tuple(synonyms)))
        return tuple(out)

    def _check_broker_resource(self, res) -> None:
        if res.name not in ("", str(self.broker_id)):
            raise InvalidRequest(f"Unexpected broker id, expected {self.broker_id} "
                                 f"or empty string, but received {res.name}")

    def _alter_broker(self, res, ops, validate_only: bool) -> None:
        """Kafka's ZkAdminManager.alterBrokerConfigs: /config/brokers/<id> or <default>;
        only actors/dynamic_config.py's DYNAMIC_KEYS may change."""
        self._check_broker_resource(res)
        entity = f"brokers/{res.name or DEFAULT_ENTITY}"
        fixed = sorted({name for name, _op, _v in ops
                        if name not in DYNAMIC_KEYS and name not in STORED_ONLY})
        if fixed:
            raise InvalidConfig("Cannot update these configs dynamically: "
                                f"Set({', '.join(fixed)})")

        def change(config):
            _set_or_delete(config, ops)
            # Kafka's values, checked as the topic defaults they become
            normalize_topic_config(topic_defaults_from_broker_config(
                {k: v for k, v in config.items() if k in DYNAMIC_KEYS}))
            return None if validate_only else config
        rewrite_entity(self.broker.store, entity, change)

    def _alter_group(self, res, ops, validate_only: bool) -> None:
        """A group's own configs at /config/groups/<group> (Kafka 4 keeps them in its
        metadata log; ZooKeeper mode had none): checked whole, as GroupConfig.validate."""
        if not res.name:
            raise InvalidRequest("Group name must not be empty")

        def change(config):
            _set_or_delete(config, ops)
            try:
                checked = group_config.validate(config, self.broker.groups.config.bounds)
            except ValueError as exc:
                raise InvalidConfig(str(exc)) from None
            return None if validate_only else checked
        rewrite_entity(self.broker.store, f"groups/{res.name}", change, delete_when_empty=True)

    def describe_configs(self, resources):
        out = {}
        for res, keys in resources:
            try:
                if res.kind == TOPIC:
                    overrides = self.broker.store.get_topic_config(res.name)
                    if overrides is None and res.name not in self.broker.store.get_topics():
                        raise UnknownTopicOrPartition(f"Topic '{res.name}' does not exist.")
                    entries = self._topic_entries(overrides or {}, keys)
                elif res.kind == BROKER:
                    self._check_broker_resource(res)
                    dynamic = self.broker.dynamic_broker_config
                    if res.name == "":              # the cluster-wide default entity alone
                        entries = tuple(dynamic.entries(False, keys))
                    else:
                        extra = dynamic.entries(True, keys)
                        entries = tuple(sorted((*self._broker_entries(keys), *extra),
                                               key=lambda e: e.name))
                elif res.kind == BROKER_LOGGER:
                    broker_loggers.check_resource(res.name, self.broker_id)
                    entries = broker_loggers.describe(keys)
                elif res.kind == GROUP:
                    entries = tuple(
                        ConfigEntry(k, v, False, src == group_config.SOURCE_DEFAULT, src, False)
                        for k, v, src in group_config.describe(
                            read_entity(self.broker.store, f"groups/{res.name}"),
                            self.broker.groups.config.bounds, keys))
                else:
                    raise InvalidRequest(f"Unsupported resource type {res.kind}")
                out[res] = ConfigsOutcome(E.NONE, None, entries)
            except KafkaError as exc:
                out[res] = ConfigsOutcome(exc.code, exc.message)
        return out

    def replace_configs(self, resources, validate_only: bool):
        """AlterConfigs (legacy, ZkAdminManager.alterConfigs): a topic's overrides, or a
        broker entity's dynamic keys (alterBrokerConfigs), become exactly the ones sent:
        IncrementalAlterConfigs' SET of each, DELETE of every other key stored."""
        as_ops = []
        for res, entries in resources:
            given = dict(entries)
            stored: dict = {}
            try:
                if res.kind == TOPIC:
                    stored = self.broker.store.get_topic_config(res.name) or {}
                elif res.kind == BROKER:
                    stored = {k: v for k, v in read_entity(
                        self.broker.store, f"brokers/{res.name or DEFAULT_ENTITY}").items()
                        if k in DYNAMIC_KEYS or k in STORED_ONLY}
            except Exception:             # ZooKeeper away: alter_configs answers per resource
                pass
            as_ops.append((res, [(k, SET, v) for k, v in entries]
                           + [(k, DELETE, None) for k in stored if k not in given]))
        return self.alter_configs(as_ops, validate_only)

    # -- log dirs, elections, reassignments ----------------------------------------------------
    def describe_log_dirs(self, tps) -> list:
        """Every log directory of the broker with the replicas asked that it holds; an
        offline one answers KAFKA_STORAGE_ERROR and no replicas (Kafka's
        ReplicaManager.describeLogDirs)."""
        wanted = None if tps is None else {tuple(tp) for tp in tps}
        out = []
        with self.broker.lock:
            dirs = self.broker.rm.log_dirs()
            parts = {}
            for d in dirs:
                for tp in d["partitions"]:
                    if wanted is not None and tuple(tp) not in wanted:
                        continue
                    info = self.broker.rm.partition_info(tp)
                    parts.setdefault(d["path"], []).append(LogDirPartition(
                        tuple(tp), info["size_bytes"],
                        max(info["high_watermark"] - info["log_end_offset"], 0)))
        for d in dirs:
            if not d["online"]:
                out.append(LogDir(d["path"], E.KAFKA_STORAGE_ERROR, (), -1, -1))
                continue
            try:
                st = os.statvfs(d["path"])
                total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
            except OSError:
                total = usable = -1
            out.append(LogDir(d["path"], E.NONE,
                              tuple(sorted(parts.get(d["path"], ()), key=lambda p: p.tp)),
                              total, usable))
        return out

    def _controller(self, method: str, *args):
        """The active controller's answer, or a KafkaError (NOT_CONTROLLER when none)."""
        try:
            answer = self.broker._ask_controller(method, *args)
        except (RuntimeError, ValueError) as exc:
            raise NotController(str(exc)) from None
        if isinstance(answer, KafkaError):
            raise answer
        return answer

    def elect_leaders(self, election_type: int, tps, timeout_ms: int) -> dict:
        """Through the controller; then wait (up to the timeout) until this broker's metadata
        shows each elected leader (Kafka's DelayedElectLeader)."""
        if tps is None:
            with self.broker.lock:
                tps = sorted(self.broker.rm.metadata.partitions)
        tps = [tuple(tp) for tp in tps]
        if not tps:
            return {}
        answers = self._controller("elect_leaders", tps, election_type)
        out, expected = {}, {}
        for tp in tps:
            r = answers.get(tp)
            if isinstance(r, KafkaError):
                code = r.code if r.code > 0 else (E.PREFERRED_LEADER_NOT_AVAILABLE if
                                                 election_type == 0 else
                                                 E.ELIGIBLE_LEADERS_NOT_AVAILABLE)
                out[tp] = (code, r.message)
            elif r is None:
                out[tp] = (E.UNKNOWN_TOPIC_OR_PARTITION, f"{tp[0]}-{tp[1]} was not elected")
            else:
                expected[tp] = r.leader

        def shown():
            md = self.broker.rm.metadata
            return all(md.leader(tp) == leader for tp, leader in expected.items())
        if expected:
            self._wait(shown, max(timeout_ms, 0))
            with self.broker.lock:
                md = self.broker.rm.metadata
                for tp, leader in expected.items():
                    out[tp] = (E.NONE, None) if md.leader(tp) == leader else \
                        (E.REQUEST_TIMED_OUT, f"{tp[0]}-{tp[1]}: the new leader was not "
                                              f"known within {timeout_ms} ms")
        return out

    def alter_partition_reassignments(self, targets: dict, timeout_ms: int) -> dict:
        answers = self._controller("alter_partition_reassignments", dict(targets))
        out = {}
        for tp in targets:
            r = answers.get(tuple(tp))
            out[tuple(tp)] = (E.NONE, None) if r is None else (r.code, r.message)
        return out

    def list_partition_reassignments(self, tps) -> list:
        answers = self._controller("list_partition_reassignments",
                                   None if tps is None else [tuple(tp) for tp in tps])
        return [OngoingReassignment(tuple(tp), tuple(r), tuple(a), tuple(d))
                for tp, (r, a, d) in sorted(answers.items())]

    def alter_configs(self, resources, validate_only: bool):
        out = {}
        for res, ops in resources:
            try:
                if res.kind == BROKER:
                    self._alter_broker(res, ops, validate_only)
                    out[res] = ConfigsOutcome(E.NONE)
                    continue
                if res.kind == BROKER_LOGGER:
                    broker_loggers.check_resource(res.name, self.broker_id)
                    broker_loggers.alter(ops, validate_only)
                    out[res] = ConfigsOutcome(E.NONE)
                    continue
                if res.kind == GROUP:
                    self._alter_group(res, ops, validate_only)
                    out[res] = ConfigsOutcome(E.NONE)
                    continue
                if res.kind != TOPIC:
                    raise InvalidRequest(f"Unsupported resource type {res.kind}")
                current = self.broker.store.get_topic_config(res.name)
                if current is None and res.name not in self.broker.store.get_topics():
                    raise UnknownTopicOrPartition(f"Topic '{res.name}' does not exist.")
                new = dict(current or {})
                for name, op, value in ops:
                    if name not in CONFIG_DEFS:
                        raise InvalidConfig(f"Unknown topic config name: {name}")
                    if op == SET:
                        new[name] = value
                    elif op == DELETE:
                        new.pop(name, None)
                    elif op in (APPEND, SUBTRACT) and name in LIST_CONFIGS:
                        # ConfigAdminManager.prepareIncrementalConfigs: on the value, else the
                        # default; distinct items in order
                        old = str(new.get(name, CONFIG_DEFS[name].default)).split(",")
                        given = [x for x in (value or "").split(",") if x]
                        items = old + given if op == APPEND else \
                            [x for x in old if x not in given]
                        new[name] = ",".join(dict.fromkeys(x for x in items if x))
                    elif op in (APPEND, SUBTRACT):
                        raise InvalidConfig(f"Config value append/subtract is not allowed for "
                                            f"config key {name}: it is not a list")
                    else:
                        raise InvalidRequest(f"Unknown config operation {op}")
                new = normalize_topic_config(new)
                if not validate_only:
                    self.broker.store.set_topic_config(res.name, new)
                out[res] = ConfigsOutcome(E.NONE)
            except KafkaError as exc:
                out[res] = ConfigsOutcome(exc.code, exc.message)
            except Exception as exc:                     # a ZooKeeper failure: per resource
                log.warning("alter configs %s: %s", res, exc)
                out[res] = ConfigsOutcome(UnknownServerError.code, str(exc))
        return out
