"""The ZooKeeper store: Kafka's ZK-mode data layout, controller election and fenced writes.

``ZkStore`` is the facade; its parts live in ``controller/zookeeper/``, the only modules
that import kazoo (tests/test_import_boundaries.py):

- ``controller/layout.py``  the pure half: paths, records, JSON codecs (no kazoo);
- ``controller/zookeeper/client.py`` the kazoo session: lifecycle, state listeners, reads
  (incl. multiRead), watches (``ZkWatch``), the store's exceptions, ``zk_call``, and
  ``expire_session`` (a real server-side expiry of a session whose
  ``session_credentials()`` are known: fault injection);
- ``controller/zookeeper/multi.py``  the multi-op engine: per-item result checking, batching and
  re-commit of failed multis, epoch fencing of each multi;
- ``controller/zookeeper/fenced.py`` the controller election (``ControllerElection``) and the
  controller's fenced write API (``FencedWriter``);
- this module: ``ZkStore`` = session + engine + election, plus brokers, admin writes,
  reads, watches of the admin znodes, the consumer offsets OffsetCommit v0 keeps in
  ZooKeeper, and the security znodes (SCRAM users and ACLs). It re-exports the public names
  of the parts (see ``__all__``), so callers import everything from here.

Everything above the store speaks plain Python types and the store's own exceptions; no
kazoo type leaks out. The rules of each part are in its module docstring. Rules here:
- Synchronous and thin: each public method is a few ZooKeeper round trips; bulk writes
  are batched into multi-ops (``controller/zookeeper/multi.py``); bulk reads are pipelined or
  multiRead (``controller/zookeeper/client.py``).
- Every path a caller sees is relative to the chroot ``/rayka/<cluster>``.
- Admin writes by clients (create topic, request deletion/reassignment/preferred election,
  configs, consumer offsets) are not fenced; each is one multi so a failure leaves nothing
  half-written (consumer offsets: one multi per ``MAX_OPS_PER_MULTI`` ops).
- Notices to the controller (``create_isr_change_notification``, a broker's
  ``propagate_log_dir_event``) are persistent sequential znodes written unfenced; only the
  controller's fenced writer deletes them. A log dir event notice that does not decode is
  logged and skipped by the reader (the controller deletes it with the rest).
- ``MAX_OPS_PER_MULTI`` / ``MAX_BYTES_PER_MULTI`` of THIS module are the batching limits
  (read at call time by ``ZkStore._multi_limits``).
- Connection problems raise ``ZkUnavailable``; after one during a write, the write's
  outcome is unknown.
Security znodes, Kafka's layout relative to the chroot; the formats of their data are not
known here (protocol/security/ encodes them, the caller passes bytes and paths):
- ``/config/users/<user>``: the user's SCRAM credentials (sensitive: no world READ when the
  session is secured); a change is announced by a sequential
  ``/config/changes/config_change_<n>`` holding ``{"version":2,"entity_path":"users/<user>"}``.
- ACLs: one znode per resource pattern (``/kafka-acl/...``, ``/kafka-acl-extended/...``),
  announced in the caller's change directory (``/kafka-acl-changes`` ...).
- A write and its notification are ONE multi, conditional on the version the caller read
  (``BadVersion`` when someone else changed the znode meanwhile: read again and retry, as
  Kafka's AclAuthorizer does), so a watcher that sees the notification sees the write.
- Readers watch the notification directories (children) and reload what they hold; the
  writer purges notifications older than ``NOTICE_TTL_MS`` (Kafka's 15 minutes), so a broker
  that was away longer than that still reloads everything on its first watch callback.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace
from typing import Callable, Iterable, Mapping, Sequence

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from controller.zookeeper.client import (MAX_READS_PER_MULTI_READ, AdminOperationInProgress,
                                         BadVersion, BrokerIdInUse, ControllerMovedError,
                                         NodeExists, NoNode, NotEmpty, ZkStoreError,
                                         ZkUnavailable, ZkWatch, expire_session, zk_call,
                                         zk_read)
from controller.zookeeper.fenced import ControllerElection, FencedWriter, ZkElectionSession
from controller.zookeeper.multi import (MAX_BYTES_PER_MULTI, MAX_OPS_PER_MULTI, Op, all_ok,
                                        first_failure)
from controller.layout import (BROKER_IDS, BROKER_TOPICS, CLUSTER_ID, CONFIG_CHANGE_PREFIX,
                               CONFIG_CHANGES, CONFIG_USERS, DEFAULT_FEATURES, DELETE_TOPICS,
                               FEATURE,
                               ISR_CHANGE_NOTIFICATION, ISR_CHANGE_PREFIX,
                               LOG_DIR_EVENT_NOTIFICATION, LOG_DIR_EVENT_PREFIX,
                               LATEST_PRODUCER_ID_BLOCK, PREFERRED_REPLICA_ELECTION,
                               PRODUCER_ID_BLOCK_SIZE, REASSIGN_PARTITIONS, BrokerRegistration,
                               LeaderIsrAndControllerEpoch, TopicAssignment, TopicPartition,
                               broker_path, check_topic, config_topic_path,
                               consumer_offset_path,
                               decode_cluster_id, decode_features, decode_log_dir_event,
                               decode_partition_list, decode_producer_id_block,
                               decode_reassignment, decode_topic_config, delete_topic_path,
                               encode_cluster_id, encode_features, encode_log_dir_event,
                               encode_partition_list, encode_producer_id_block,
                               encode_reassignment, encode_topic_config, isr_change_path,
                               log_dir_event_path, new_topic_id, partition_state_path,
                               partitions_path, topic_path)
from controller.features import plan_update
from controller.topic_config import normalize_topic_config
from replicas.errors import (ErrorCode, InvalidPartitions, TopicAlreadyExists,
                             UnknownTopicOrPartition)

__all__ = [
    "ZkStore", "FencedWriter", "ControllerElection", "ZkWatch",
    "ZkStoreError", "ZkUnavailable", "ControllerMovedError", "NodeExists", "NoNode",
    "BadVersion", "NotEmpty", "BrokerIdInUse", "AdminOperationInProgress",
    "MAX_OPS_PER_MULTI", "MAX_BYTES_PER_MULTI", "MAX_READS_PER_MULTI_READ", "expire_session",
]

NOTICE_TTL_MS = 15 * 60 * 1000

log = logging.getLogger(__name__)


class ZkStore(ZkElectionSession):
    """Kafka's ZK layout under ``/rayka/<cluster>``; see the module docstring for the rules.

    ``ZkStore(hosts, cluster)`` owns its kazoo session; ``ZkStore(cluster=..., client=c)``
    borrows an already started KazooClient (``close()`` then leaves the client running).
    ``root`` overrides the chroot ``/rayka/<cluster>``. ``multi_read=False`` disables
    ZooKeeper's multiRead (needs a 3.6+ server) for bulk reads of small znodes; it is also
    switched off by itself if the server rejects it.
    """

    def _multi_limits(self) -> tuple[int, int]:
        # this module's globals, looked up now: they are the knobs (tests patch them here)
        return MAX_OPS_PER_MULTI, MAX_BYTES_PER_MULTI

    # -- brokers -------------------------------------------------------------------------------
    @zk_call
    def register_broker(self, reg: BrokerRegistration, wait_s: float = 30.0,
                        replace_dead_incarnation: bool = False) -> int:
        """Create the EPHEMERAL ``/brokers/ids/<id>``; return the broker epoch (its czxid).

        A node of the same id left by an OLD session is waited out (exists-watch + Event,
        deadline ``wait_s``, then ``BrokerIdInUse``); a node already owned by this session
        is accepted as is (its czxid is returned). With ``replace_dead_incarnation`` (the
        caller KNOWS its previous incarnation is dead: a Ray actor restart) a node of another
        session carrying the same actor name is deleted instead of waited out, so a restart
        does not cost a session timeout; the controller sees a bounce (czxid grows)."""
        if not reg.timestamp_ms:
            reg = replace(reg, timestamp_ms=int(time.time() * 1000))
        path, data = self._abs(broker_path(reg.id)), reg.to_json()
        deadline = time.monotonic() + wait_s
        while True:
            try:
                _, stat = self._client.create(path, data, ephemeral=True, include_data=True)
                return stat.czxid
            except NodeExistsError:
                pass
            gone = threading.Event()
            stat = self._client.exists(path, watch=lambda event: gone.set())
            if stat is None:
                continue
            if stat.ephemeralOwner == self.session_id:
                return stat.czxid
            if replace_dead_incarnation and self._is_same_actor(path, reg, stat):
                try:
                    self._client.delete(path, version=stat.version)
                except (NoNodeError, BadVersionError):
                    pass
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not gone.wait(remaining):
                raise BrokerIdInUse(
                    f"/brokers/ids/{reg.id} is still held by session 0x{stat.ephemeralOwner:x} "
                    f"(ours: 0x{self.session_id or 0:x}) after {wait_s:g} s")

    def _is_same_actor(self, path: str, reg: BrokerRegistration, stat) -> bool:
        try:
            data, now = self._client.get(path)
        except NoNodeError:
            return False
        old = BrokerRegistration.from_json(reg.id, data, now.czxid)
        return now.czxid == stat.czxid and bool(reg.actor_name) and old.actor_name == reg.actor_name

    @zk_read
    def get_broker(self, broker_id: int) -> BrokerRegistration | None:
        got = self._get(broker_path(broker_id))
        if got is None:
            return None
        return BrokerRegistration.from_json(broker_id, got[0], got[1].czxid)

    @zk_read
    def get_broker_ids(self) -> set[int]:
        return {int(c) for c in (self._children(BROKER_IDS) or []) if c.isdigit()}

    @zk_read
    def get_brokers(self) -> dict[int, BrokerRegistration]:
        ids = sorted(self.get_broker_ids())
        out = {}
        for bid, got in zip(ids, self._get_many([broker_path(b) for b in ids], small=True)):
            if got is not None:
                out[bid] = BrokerRegistration.from_json(bid, got[0], got[1].czxid)
        return out

    def watch_broker_ids(self, callback: Callable[[set[int]], None]) -> ZkWatch:
        return self._children_watch(BROKER_IDS, lambda cs: {int(c) for c in cs if c.isdigit()},
                                    callback)

    # -- topics (admin side: not fenced) --------------------------------------------------------
    @zk_call
    def create_topic(self, topic: str, assignment: Mapping[int, Sequence[int]] | TopicAssignment,
                     config: Mapping[str, object] | None = None,
                     topic_id: str | None = None) -> TopicAssignment:
        """ONE multi: create-or-set /config/topics/<t>, then create /brokers/topics/<t> (Kafka
        writes the config first). TopicAlreadyExists if the topic exists or is being
        deleted; on any failure nothing is left behind."""
        check_topic(topic)
        config = normalize_topic_config(config)
        if isinstance(assignment, TopicAssignment):
            ta = replace(assignment, topic_id=assignment.topic_id or topic_id or new_topic_id())
            if ta.topic != topic:
                raise ValueError(f"assignment is for {ta.topic!r}, not {topic!r}")
        else:
            ta = TopicAssignment(topic, dict(assignment), topic_id=topic_id or new_topic_id())
        cfg_path, cfg = config_topic_path(topic), encode_topic_config(config)
        for _ in range(10):
            if self._client.exists(self._abs(delete_topic_path(topic))) is not None:
                raise TopicAlreadyExists(f"Topic '{topic}' is marked for deletion.")
            cfg_op = self._config_op(cfg_path, cfg)
            results = self._txn_async([cfg_op, Op("create", topic_path(topic), ta.to_json())],
                                      None).get()
            if all_ok(results):
                return ta
            idx, exc = first_failure(results, 0)
            if idx == 1 and isinstance(exc, NodeExistsError):
                raise TopicAlreadyExists(f"Topic '{topic}' already exists.")
            if idx == 1 and isinstance(exc, NoNodeError):
                self._client.ensure_path(self._abs(BROKER_TOPICS))
            elif idx != 0 or not isinstance(exc, (NodeExistsError, NoNodeError, BadVersionError)):
                raise ZkStoreError(f"create_topic {topic}: {type(exc).__name__}")
            # the config znode changed under us (create/set race): re-read and retry
        raise ZkStoreError(f"create_topic {topic}: config znode kept changing")

    @zk_call
    def add_partitions(self, topic: str, new: Mapping[int, Sequence[int]],
                       expected: TopicAssignment) -> TopicAssignment:
        """Kafka's AdminZkClient.addPartitions: rewrite /brokers/topics/<t> with `new`
        partitions added to `expected`, conditional on the znode being unchanged (the
        controller's watch creates them). InvalidPartitions if it changed meanwhile (re-read
        and decide again) or a partition already exists."""
        got = self._get(topic_path(topic))
        if got is None:
            raise UnknownTopicOrPartition(f"Topic '{topic}' does not exist.")
        current = TopicAssignment.from_json(topic, got[0])
        if current != expected or set(new) & set(current.partitions):
            raise InvalidPartitions(f"Topic '{topic}' changed while adding partitions; retry.")
        ta = replace(current, partitions={**current.partitions, **new})
        try:
            self._client.set(self._abs(topic_path(topic)), ta.to_json(), version=got[1].version)
        except BadVersionError:
            raise InvalidPartitions(
                f"Topic '{topic}' changed while adding partitions; retry.") from None
        return ta

    @zk_call
    def request_topic_deletion(self, topic: str) -> bool:
        """Create /admin/delete_topics/<t> (atomically with an existence check of the topic).
        UnknownTopicOrPartition if the topic does not exist; False if already requested."""
        results = self._txn_async([Op("check", topic_path(topic), version=-1),
                                   Op("create", delete_topic_path(topic))], None).get()
        if all_ok(results):
            return True
        idx, exc = first_failure(results, 0)
        if idx == 0 and isinstance(exc, NoNodeError):
            raise UnknownTopicOrPartition(f"Topic '{topic}' does not exist.")
        if idx == 1 and isinstance(exc, NodeExistsError):
            return False
        raise ZkStoreError(f"request_topic_deletion {topic}: {type(exc).__name__}")

    @zk_call
    def set_topic_config(self, topic: str, config: Mapping[str, object]) -> None:
        """Create-or-set /config/topics/<t> for an EXISTING topic (UnknownTopicOrPartition).
        The whole config is replaced; InvalidConfig (nothing written) for a bad key/value."""
        cfg_path = config_topic_path(topic)
        cfg = encode_topic_config(normalize_topic_config(config))
        for _ in range(10):
            cfg_op = self._config_op(cfg_path, cfg)
            results = self._txn_async([Op("check", topic_path(topic), version=-1), cfg_op],
                                      None).get()
            if all_ok(results):
                return
            idx, exc = first_failure(results, 0)
            if idx == 0:
                raise UnknownTopicOrPartition(f"Topic '{topic}' does not exist.")
        raise ZkStoreError(f"set_topic_config {topic}: config znode kept changing")

    def _config_op(self, cfg_path: str, cfg: bytes) -> Op:
        """Create-or-set of a config znode, conditional on the version read now."""
        cstat = self._client.exists(self._abs(cfg_path))
        return (Op("set", cfg_path, cfg, version=cstat.version) if cstat is not None
                else Op("create", cfg_path, cfg))

    @zk_read
    def get_topic_config(self, topic: str) -> dict[str, str] | None:
        got = self._get(config_topic_path(topic))
        return None if got is None else decode_topic_config(got[0])

    @zk_read
    def get_topics(self) -> set[str]:
        return set(self._children(BROKER_TOPICS) or [])

    @zk_read
    def get_topic_assignment(self, topic: str) -> TopicAssignment | None:
        got = self._get(topic_path(topic))
        return None if got is None else TopicAssignment.from_json(topic, got[0])

    @zk_read
    def get_all_assignments(self, topics: Iterable[str] | None = None
                            ) -> dict[str, TopicAssignment]:
        names = sorted(self.get_topics() if topics is None else set(topics))
        return {t: TopicAssignment.from_json(t, got[0])
                for t, got in zip(names, self._get_many([topic_path(t) for t in names]))
                if got is not None}

    @zk_read
    def get_partition_state(self, topic: str, partition: int) -> LeaderIsrAndControllerEpoch | None:
        got = self._get(partition_state_path(topic, partition))
        if got is None:
            return None
        return LeaderIsrAndControllerEpoch.from_json(got[0], got[1].version)

    @zk_read
    def get_partition_states(self, topics: Iterable[str] | None = None
                             ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Every existing partition state of ``topics`` (all topics if None), pipelined:
        one round of get_children, one round of gets."""
        names = sorted(self.get_topics() if topics is None else set(topics))
        tps = []
        lists = self._children_many([partitions_path(t) for t in names], small=True)
        for t, children in zip(names, lists):
            tps += [(t, int(c)) for c in (children or []) if c.isdigit()]
        out = {}
        got_all = self._get_many([partition_state_path(t, p) for t, p in tps], small=True)
        for tp, got in zip(tps, got_all):
            if got is not None:
                out[tp] = LeaderIsrAndControllerEpoch.from_json(got[0], got[1].version)
        return out

    @zk_read
    def get_topic_deletions(self) -> set[str]:
        return set(self._children(DELETE_TOPICS) or [])

    # -- admin requests ------------------------------------------------------------------------
    @zk_call
    def request_reassignment(self, partitions: Mapping[TopicPartition, Sequence[int]]) -> None:
        """Create /admin/reassign_partitions; AdminOperationInProgress if one is pending."""
        try:
            self._client.create(self._abs(REASSIGN_PARTITIONS), encode_reassignment(partitions),
                                makepath=True)
        except NodeExistsError:
            raise AdminOperationInProgress(
                "a partition reassignment is already in progress") from None

    @zk_read
    def get_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        got = self._get(REASSIGN_PARTITIONS)
        return {} if got is None else decode_reassignment(got[0])

    @zk_call
    def request_preferred_election(self, partitions: Iterable[TopicPartition]) -> None:
        """Create /admin/preferred_replica_election; AdminOperationInProgress if pending."""
        try:
            self._client.create(self._abs(PREFERRED_REPLICA_ELECTION),
                                encode_partition_list(partitions), makepath=True)
        except NodeExistsError:
            raise AdminOperationInProgress(
                "a preferred replica election is already in progress") from None

    @zk_read
    def get_preferred_election(self) -> set[TopicPartition]:
        got = self._get(PREFERRED_REPLICA_ELECTION)
        return set() if got is None else decode_partition_list(got[0])

    @zk_call
    def create_isr_change_notification(self, partitions: Iterable[TopicPartition]) -> str:
        """Create /isr_change_notification/isr_change_<seq>; return its name."""
        path = self._client.create(self._abs(f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}"),
                                   encode_partition_list(partitions), sequence=True)
        return path.rsplit("/", 1)[1]

    @zk_read
    def get_isr_change_notifications(self) -> list[str]:
        return sorted(c for c in (self._children(ISR_CHANGE_NOTIFICATION) or [])
                      if c.startswith(ISR_CHANGE_PREFIX))

    @zk_read
    def read_isr_change_notifications(self, names: Iterable[str]) -> set[TopicPartition]:
        """Union of the partitions named by these notifications (missing ones skipped)."""
        out: set[TopicPartition] = set()
        for got in self._get_many([isr_change_path(n) for n in names], small=True):
            if got is not None:
                out |= decode_partition_list(got[0])
        return out

    @zk_call
    def propagate_log_dir_event(self, broker_id: int) -> str:
        """A broker's log directory failed (Kafka's propagateLogDirEvent): create the
        persistent /log_dir_event_notification/log_dir_event_<seq>; return its name."""
        path = self._client.create(
            self._abs(f"{LOG_DIR_EVENT_NOTIFICATION}/{LOG_DIR_EVENT_PREFIX}"),
            encode_log_dir_event(broker_id), sequence=True)
        return path.rsplit("/", 1)[1]

    @zk_read
    def get_log_dir_event_notifications(self) -> list[str]:
        return sorted(c for c in (self._children(LOG_DIR_EVENT_NOTIFICATION) or [])
                      if c.startswith(LOG_DIR_EVENT_PREFIX))

    @zk_read
    def read_log_dir_event_notifications(self, names: Iterable[str]) -> list[int]:
        """The broker ids these notices name, in the order given (missing ones skipped;
        one that does not decode is logged and skipped: the controller deletes it anyway)."""
        names = list(names)
        out: list[int] = []
        for name, got in zip(names, self._get_many([log_dir_event_path(n) for n in names],
                                                   small=True)):
            if got is None:
                continue
            try:
                out.append(decode_log_dir_event(got[0]))
            except ValueError as e:
                log.warning("ignoring %s/%s: %s", LOG_DIR_EVENT_NOTIFICATION, name, e)
        return out

    # -- watches ---------------------------------------------------------------------------------
    def watch_topics(self, callback: Callable[[set[str]], None]) -> ZkWatch:
        return self._children_watch(BROKER_TOPICS, set, callback)

    def watch_topic_deletions(self, callback: Callable[[set[str]], None]) -> ZkWatch:
        return self._children_watch(DELETE_TOPICS, set, callback)

    def watch_isr_change_notifications(self, callback: Callable[[list[str]], None]) -> ZkWatch:
        return self._children_watch(ISR_CHANGE_NOTIFICATION, lambda cs: sorted(
            c for c in cs if c.startswith(ISR_CHANGE_PREFIX)), callback)

    def watch_log_dir_event_notifications(self, callback: Callable[[list[str]], None]) -> ZkWatch:
        return self._children_watch(LOG_DIR_EVENT_NOTIFICATION, lambda cs: sorted(
            c for c in cs if c.startswith(LOG_DIR_EVENT_PREFIX)), callback)

    def watch_reassignment(self, callback: Callable[[dict | None], None]) -> ZkWatch:
        """callback({(t, p): replicas}) when /admin/reassign_partitions exists, else None."""
        return self._data_watch(REASSIGN_PARTITIONS, lambda data, stat:
                                None if stat is None else decode_reassignment(data), callback)

    def watch_preferred_election(self, callback: Callable[[set | None], None]) -> ZkWatch:
        """callback({(t, p)}) when /admin/preferred_replica_election exists, else None."""
        return self._data_watch(PREFERRED_REPLICA_ELECTION, lambda data, stat:
                                None if stat is None else decode_partition_list(data), callback)

    def watch_topic_config(self, topic: str,
                           callback: Callable[[dict[str, str] | None], None]) -> ZkWatch:
        """callback(config) when /config/topics/<t> exists or changes, else None."""
        return self._data_watch(config_topic_path(topic), lambda data, stat:
                                None if stat is None else decode_topic_config(data), callback)

    def watch_topic_assignment(self, topic: str,
                               callback: Callable[[TopicAssignment | None], None]) -> ZkWatch:
        return self._data_watch(topic_path(topic), lambda data, stat:
                                None if stat is None else TopicAssignment.from_json(topic, data),
                                callback)

    # -- cluster id --------------------------------------------------------------------------------
    @zk_call
    def get_or_create_cluster_id(self) -> str:
        """Kafka's KafkaZkClient.getOrCreateClusterId: read /cluster/id, or create it with a
        new id; a concurrent creator wins and its id is read back."""
        for _ in range(10):
            got = self._get(CLUSTER_ID)
            if got is not None:
                return decode_cluster_id(got[0])
            try:
                self._client.create(self._abs(CLUSTER_ID), encode_cluster_id(new_topic_id()),
                                    makepath=True)
            except NodeExistsError:
                continue
        raise ZkStoreError("get_or_create_cluster_id: /cluster/id kept changing")

    # -- finalized features ----------------------------------------------------------------------
    @zk_call
    def get_or_create_features(self, defaults: Mapping[str, int]) -> tuple[dict[str, int], int]:
        """(/feature's levels, its zkVersion = the finalized-features epoch), created with
        `defaults` when absent (a concurrent creator wins)."""
        for _ in range(10):
            got = self._get(FEATURE)
            if got is not None:
                return decode_features(got[0]), got[1].version
            try:
                self._client.create(self._abs(FEATURE), encode_features(defaults), makepath=True)
            except NodeExistsError:
                continue
        raise ZkStoreError("get_or_create_features: /feature kept changing")

    @zk_call
    def set_features(self, features: Mapping[str, int], version: int = -1) -> int | None:
        """Replace the finalized levels (only at zkVersion `version`, unless -1); the new
        epoch, or None when /feature changed meanwhile."""
        try:
            return self._client.set(self._abs(FEATURE), encode_features(features),
                                    version=version).version
        except BadVersionError:
            return None

    def update_features(self, updates, validate_only: bool = False,
                        defaults: Mapping[str, int] = DEFAULT_FEATURES) -> tuple[int, str | None]:
        """UpdateFeatures: [(name, level, upgrade type)] checked by controller/features.py's
        rules against /feature and written at the version read (a concurrent change: read
        again); (error, message)."""
        for _ in range(10):
            levels, epoch = self.get_or_create_features(defaults)
            error, message, new = plan_update(levels, updates)
            if error or validate_only:
                return error, message
            if new == levels or self.set_features(new, epoch) is not None:
                return 0, None
        return ErrorCode.FEATURE_UPDATE_FAILED, "/feature kept changing"

    @zk_call
    def watch_features(self, callback: Callable[[tuple[dict[str, int], int] | None], None]
                       ) -> ZkWatch:
        """callback((levels, epoch)) when /feature exists or changes, else None."""
        return self._data_watch(FEATURE, lambda data, stat:
                                None if stat is None else (decode_features(data), stat.version),
                                callback)

    # -- producer ids ------------------------------------------------------------------------------
    @zk_call
    def allocate_producer_id_block(self, owner_id: int = -1,
                                   size: int = PRODUCER_ID_BLOCK_SIZE) -> tuple[int, int]:
        """Kafka's ProducerIdManager (ZK mode): claim the next block [start, end] of producer
        ids by a conditional set of /latest_producer_id_block; retried on races."""
        for _ in range(50):
            got = self._get(LATEST_PRODUCER_ID_BLOCK)
            last = decode_producer_id_block(got[0]) if got else None
            start = 0 if last is None else last[1] + 1
            data = encode_producer_id_block(owner_id, start, start + size - 1)
            try:
                if got is None:
                    self._client.create(self._abs(LATEST_PRODUCER_ID_BLOCK), data, makepath=True)
                else:
                    self._client.set(self._abs(LATEST_PRODUCER_ID_BLOCK), data,
                                     version=got[1].version)
                return start, start + size - 1
            except (NodeExistsError, BadVersionError):
                continue
        raise ZkStoreError("allocate_producer_id_block: too many concurrent allocations")

    # -- consumer offsets of OffsetCommit / OffsetFetch v0 ---------------------------------------
    @zk_call
    def set_consumer_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        """KafkaZkClient.setOrCreateConsumerOffset: the offset as decimal text."""
        path = self._abs(consumer_offset_path(group, topic, partition))
        data = str(int(offset)).encode()
        try:
            self._client.set(path, data)
        except NoNodeError:
            try:
                self._client.create(path, data, makepath=True)
            except NodeExistsError:               # created meanwhile: last writer wins
                self._client.set(path, data)

    @zk_read
    def get_consumer_offset(self, group: str, topic: str, partition: int) -> int | None:
        got = self._get(consumer_offset_path(group, topic, partition))
        return None if got is None else int(got[0])

    # -- security znodes: SCRAM users and ACLs, with change notifications ------------------------
    @zk_read
    def read_tree(self, path: str, depth: int) -> dict[str, tuple[bytes, int]]:
        """Every znode exactly `depth` levels below `path`: relative path → (data, version)."""
        level = [path]
        for _ in range(depth):
            nxt = []
            for p in level:
                try:
                    nxt += [f"{p}/{c}" for c in self._client.get_children(self._abs(p))]
                except NoNodeError:
                    pass
            level = nxt
        out = {}
        for p in level:
            try:
                data, stat = self._client.get(self._abs(p))
            except NoNodeError:
                continue
            out[p] = (data or b"", stat.version)
        return out

    @zk_read
    def read_znode(self, path: str) -> tuple[bytes, int] | None:
        try:
            data, stat = self._client.get(self._abs(path))
        except NoNodeError:
            return None
        return data or b"", stat.version

    @zk_call
    def watch_notices(self, path: str, callback: Callable[[list[str]], None]) -> ZkWatch:
        """callback(sorted notification names) now and on every change (they may coalesce)."""
        self._client.ensure_path(self._abs(path))
        return self._children_watch(path, lambda children: sorted(children or ()), callback)

    @zk_call
    def write_with_notice(self, path: str, data: bytes | None, version: int,
                          notice_dir: str, notice_prefix: str, notice: bytes,
                          sensitive: bool = False) -> None:
        """Set `path` to `data` (None: delete it) if its version is still `version` (-1: it
        must not exist yet), and announce it in `notice_dir`, in one multi."""
        self._client.ensure_path(self._abs(notice_dir))
        parent = path.rpartition("/")[0]
        if parent:
            self._client.ensure_path(self._abs(parent),
                                     acl=self.private_acl if sensitive else None)
        t = self._client.transaction()
        if data is None:
            t.delete(self._abs(path), version=version)
        elif version < 0:
            t.create(self._abs(path), data, acl=self.private_acl if sensitive else None)
        else:
            t.set_data(self._abs(path), data, version=version)
        t.create(self._abs(f"{notice_dir}/{notice_prefix}"), notice, sequence=True)
        results = t.commit()
        failure = next((r for r in results if isinstance(r, Exception)
                        and type(r).__name__ != "RuntimeInconsistency"), None)
        if isinstance(failure, (BadVersionError, NodeExistsError)):
            raise BadVersion(path)
        if isinstance(failure, NoNodeError):
            raise NoNode(path)
        if failure is not None:
            raise failure
        self._purge_notices(notice_dir)

    def _purge_notices(self, notice_dir: str) -> None:
        """Oldest first (the sequence numbers are creation order), stopping at the first one
        still young: a write costs one read per expired notice, not one per notice."""
        horizon_ms = time.time() * 1000 - NOTICE_TTL_MS
        for name in sorted(self._client.get_children(self._abs(notice_dir))):
            p = self._abs(f"{notice_dir}/{name}")
            stat = self._client.exists(p)
            if stat is not None and stat.ctime >= horizon_ms:
                return
            try:
                self._client.delete(p)
            except NoNodeError:
                pass                               # another writer purged it first

    def set_user_credentials(self, user: str, data: bytes | None, version: int) -> None:
        """Kafka's /config/users/<user> (None: delete), conditional on `version`."""
        self.write_with_notice(f"{CONFIG_USERS}/{user}", data, version, CONFIG_CHANGES,
                               CONFIG_CHANGE_PREFIX,
                               json.dumps({"version": 2, "entity_path": f"users/{user}"}).encode(),
                               sensitive=True)
