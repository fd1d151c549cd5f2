"""The admin half of ``tests/memory_zk.py``'s ``MemoryZkStore`` (topics, configs, admin
requests, ISR change and log dir event notifications, consumer offsets and the watches of
those znodes) and
``MemoryFencedWriter``, the controller's fenced writes.

Rules (the rest are in tests/memory_zk.py's docstring):
- Same names, signatures, return values and exceptions as ``controller.zookeeper.store.ZkStore``,
  byte-identical znode contents (``controller.layout`` codecs).
- The real store's retry loops (config created or changed concurrently, racing offset
  committers) are not needed: a call runs alone and each write is one atomic transaction,
  so an admin write either lands whole or raises, leaving nothing behind.
- Validation of names (InvalidTopic, ValueError) happens before anything else; then the
  session check (ZkUnavailable); then the write.
- Fencing: each MemoryFencedWriter call first checks that /controller_epoch's version is
  ``election.epoch_zk_version``, else raises ControllerMovedError having written NOTHING
  (a call is atomic here, so "per multi" of the real writer becomes "per call"). Per-item
  outcomes are VALUES as in the real writer; each item is its own transaction.
- This module imports nothing from tests/memory_zk.py: it works through the store's
  ``_check``, ``_node``, ``_children``, ``_op``, ``_txn``, ``_do``, ``_try`` and watches.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterable, Mapping, Sequence

from controller.store_api import (AdminOperationInProgress, BadVersion, ControllerElection,
                                  ControllerMovedError, NodeExists, NoNode, ZkStoreError)
from controller.layout import (BROKER_TOPICS, CONTROLLER, CONTROLLER_EPOCH, DELETE_TOPICS,
                               ISR_CHANGE_NOTIFICATION, ISR_CHANGE_PREFIX,
                               LOG_DIR_EVENT_NOTIFICATION, LOG_DIR_EVENT_PREFIX,
                               PREFERRED_REPLICA_ELECTION,
                               REASSIGN_PARTITIONS, LeaderIsrAndControllerEpoch,
                               TopicAssignment, TopicPartition, check_name, check_topic,
                               config_topic_path, decode_log_dir_event, decode_partition_list,
                               decode_reassignment, decode_topic_config, delete_topic_path,
                               encode_log_dir_event, encode_partition_list, encode_reassignment,
                               encode_topic_config, isr_change_path, log_dir_event_path,
                               new_topic_id,
                               partition_path, partition_state_path,
                               partitions_path, topic_path)
from controller.topic_config import normalize_topic_config
from replicas.errors import TopicAlreadyExists, UnknownTopicOrPartition

__all__ = ["AdminMixin", "MemoryFencedWriter"]


class AdminMixin:
    """Needs from the store: _check, _node, _children, _op (build an Op), _do (a transaction
    raising its outcome error), _data_watch, _children_watch, zk, _client and root."""

    def _config_op(self, path: str, data: bytes):
        node = self._node(path)
        return (self._op("create", path, data) if node is None
                else self._op("set", path, data, version=node.version))

    # -- topics (admin side: not fenced) ------------------------------------------------------
    def create_topic(self, topic: str, assignment: Mapping[int, Sequence[int]] | TopicAssignment,
                     config: Mapping[str, object] | None = None,
                     topic_id: str | None = None) -> TopicAssignment:
        """Create-or-set /config/topics/<t> and create /brokers/topics/<t> in ONE transaction;
        TopicAlreadyExists if the topic exists or is marked for deletion."""
        check_topic(topic)
        config = normalize_topic_config(config)
        if isinstance(assignment, TopicAssignment):
            ta = replace(assignment, topic_id=assignment.topic_id or topic_id or new_topic_id())
            if ta.topic != topic:
                raise ValueError(f"assignment is for {ta.topic!r}, not {topic!r}")
        else:
            ta = TopicAssignment(topic, dict(assignment), topic_id=topic_id or new_topic_id())
        self._check(write=True)
        if self._node(delete_topic_path(topic)) is not None:
            raise TopicAlreadyExists(f"Topic '{topic}' is marked for deletion.")
        if self._node(topic_path(topic)) is not None:
            raise TopicAlreadyExists(f"Topic '{topic}' already exists.")
        self.zk.ensure_path(self._client, self.root + BROKER_TOPICS)
        try:
            self._do([self._config_op(config_topic_path(topic), encode_topic_config(config)),
                      self._op("create", topic_path(topic), ta.to_json())])
        except (NodeExists, NoNode) as e:
            raise ZkStoreError(f"create_topic {topic}: {type(e).__name__}") from None
        return ta

    def request_topic_deletion(self, topic: str) -> bool:
        """Create /admin/delete_topics/<t>; UnknownTopicOrPartition if the topic does not
        exist; False if already requested."""
        ops = [self._op("check", topic_path(topic)), self._op("create", delete_topic_path(topic))]
        self._check(write=True)
        if self._node(topic_path(topic)) is None:
            raise UnknownTopicOrPartition(f"Topic '{topic}' does not exist.")
        if self._node(delete_topic_path(topic)) is not None:
            return False
        self._do(ops)
        return True

    def set_topic_config(self, topic: str, config: Mapping[str, object]) -> None:
        """Create-or-set /config/topics/<t> of an EXISTING topic (UnknownTopicOrPartition); the
        whole config is replaced; InvalidConfig (nothing written) for a bad key/value."""
        path, data = config_topic_path(topic), encode_topic_config(normalize_topic_config(config))
        self._check(write=True)
        if self._node(topic_path(topic)) is None:
            raise UnknownTopicOrPartition(f"Topic '{topic}' does not exist.")
        self._do([self._config_op(path, data)])

    def get_topic_config(self, topic: str) -> dict[str, str] | None:
        self._check()
        node = self._node(config_topic_path(topic))
        return None if node is None else decode_topic_config(node.data)

    def get_topics(self) -> set[str]:
        self._check()
        return set(self._children(BROKER_TOPICS) or [])

    def get_topic_assignment(self, topic: str) -> TopicAssignment | None:
        self._check()
        node = self._node(topic_path(topic))
        return None if node is None else TopicAssignment.from_json(topic, node.data)

    def get_all_assignments(self, topics: Iterable[str] | None = None
                            ) -> dict[str, TopicAssignment]:
        names = sorted(self.get_topics() if topics is None else set(topics))
        return {t: a for t in names if (a := self.get_topic_assignment(t)) is not None}

    def get_partition_state(self, topic: str, partition: int) -> LeaderIsrAndControllerEpoch | None:
        self._check()
        node = self._node(partition_state_path(topic, partition))
        return None if node is None else LeaderIsrAndControllerEpoch.from_json(node.data,
                                                                              node.version)

    def get_partition_states(self, topics: Iterable[str] | None = None
                             ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        names = sorted(self.get_topics() if topics is None else set(topics))
        out = {}
        for t in names:
            for c in sorted((c for c in self._children(partitions_path(t)) or [] if c.isdigit()),
                            key=int):
                if (st := self.get_partition_state(t, int(c))) is not None:
                    out[(t, int(c))] = st
        return out

    def get_topic_deletions(self) -> set[str]:
        self._check()
        return set(self._children(DELETE_TOPICS) or [])

    # -- admin requests ------------------------------------------------------------------------
    def _create_request(self, path: str, data: bytes, what: str) -> None:
        self._check(write=True)
        self.zk.ensure_path(self._client, self.root + path.rsplit("/", 1)[0])
        try:
            self._do([self._op("create", path, data)])
        except NodeExists:
            raise AdminOperationInProgress(f"a {what} is already in progress") from None

    def request_reassignment(self, partitions: Mapping[TopicPartition, Sequence[int]]) -> None:
        self._create_request(REASSIGN_PARTITIONS, encode_reassignment(partitions),
                             "partition reassignment")

    def get_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        self._check()
        node = self._node(REASSIGN_PARTITIONS)
        return {} if node is None else decode_reassignment(node.data)

    def request_preferred_election(self, partitions: Iterable[TopicPartition]) -> None:
        self._create_request(PREFERRED_REPLICA_ELECTION, encode_partition_list(partitions),
                             "preferred replica election")

    def get_preferred_election(self) -> set[TopicPartition]:
        self._check()
        node = self._node(PREFERRED_REPLICA_ELECTION)
        return set() if node is None else decode_partition_list(node.data)

    def create_isr_change_notification(self, partitions: Iterable[TopicPartition]) -> str:
        data = encode_partition_list(partitions)
        self._check(write=True)
        path = self._do([self._op("create", f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}",
                                  data, sequence=True)])[0]
        return path.rsplit("/", 1)[1]

    def get_isr_change_notifications(self) -> list[str]:
        self._check()
        return sorted(c for c in (self._children(ISR_CHANGE_NOTIFICATION) or [])
                      if c.startswith(ISR_CHANGE_PREFIX))

    def read_isr_change_notifications(self, names: Iterable[str]) -> set[TopicPartition]:
        paths = [isr_change_path(n) for n in names]
        self._check()
        out: set[TopicPartition] = set()
        for p in paths:
            if (node := self._node(p)) is not None:
                out |= decode_partition_list(node.data)
        return out

    def propagate_log_dir_event(self, broker_id: int) -> str:
        data = encode_log_dir_event(broker_id)
        self._check(write=True)
        path = self._do([self._op("create", f"{LOG_DIR_EVENT_NOTIFICATION}/{LOG_DIR_EVENT_PREFIX}",
                                  data, sequence=True)])[0]
        return path.rsplit("/", 1)[1]

    def get_log_dir_event_notifications(self) -> list[str]:
        self._check()
        return sorted(c for c in (self._children(LOG_DIR_EVENT_NOTIFICATION) or [])
                      if c.startswith(LOG_DIR_EVENT_PREFIX))

    def read_log_dir_event_notifications(self, names: Iterable[str]) -> list[int]:
        paths = [log_dir_event_path(n) for n in names]
        self._check()
        out: list[int] = []
        for p in paths:
            if (node := self._node(p)) is not None:
                try:
                    out.append(decode_log_dir_event(node.data))
                except ValueError:
                    continue        # the real store logs and skips it too
        return out

    # -- watches ---------------------------------------------------------------------------------
    def watch_topics(self, callback: Callable[[set[str]], None]):
        return self._children_watch(BROKER_TOPICS, set, callback)

    def watch_topic_deletions(self, callback: Callable[[set[str]], None]):
        return self._children_watch(DELETE_TOPICS, set, callback)

    def watch_isr_change_notifications(self, callback: Callable[[list[str]], None]):
        return self._children_watch(ISR_CHANGE_NOTIFICATION, lambda cs: sorted(
            c for c in cs if c.startswith(ISR_CHANGE_PREFIX)), callback)

    def watch_log_dir_event_notifications(self, callback: Callable[[list[str]], None]):
        return self._children_watch(LOG_DIR_EVENT_NOTIFICATION, lambda cs: sorted(
            c for c in cs if c.startswith(LOG_DIR_EVENT_PREFIX)), callback)

    def watch_reassignment(self, callback: Callable[[dict | None], None]):
        return self._data_watch(REASSIGN_PARTITIONS, lambda d: None if d is None
                                else decode_reassignment(d), callback)

    def watch_preferred_election(self, callback: Callable[[set | None], None]):
        return self._data_watch(PREFERRED_REPLICA_ELECTION, lambda d: None if d is None
                                else decode_partition_list(d), callback)

    def watch_topic_config(self, topic: str, callback: Callable[[dict[str, str] | None], None]):
        return self._data_watch(config_topic_path(topic), lambda d: None if d is None
                                else decode_topic_config(d), callback)

    def watch_topic_assignment(self, topic: str,
                               callback: Callable[[TopicAssignment | None], None]):
        return self._data_watch(topic_path(topic), lambda d: None if d is None
                                else TopicAssignment.from_json(topic, d), callback)

class MemoryFencedWriter:
    """``FencedWriter``'s API: every call first checks /controller_epoch's version against
    ``election.epoch_zk_version`` and raises ControllerMovedError having written nothing;
    per-item outcomes (NodeExists, NoNode, BadVersion) are returned as values."""

    def __init__(self, store, election: ControllerElection):
        self.store, self.election = store, election

    @property
    def _fence(self) -> int:
        return self.election.epoch_zk_version

    def _moved(self) -> ControllerMovedError:
        try:
            current = self.store.get_controller()
            epoch, version = self.store.get_controller_epoch()
        except ZkStoreError:
            current, epoch, version = None, "?", "?"
        return ControllerMovedError(
            f"controller epoch {self.election.epoch} (zk version {self._fence}) is fenced: "
            f"/controller_epoch is now {epoch} (version {version}), controller {current}", current)

    def _begin(self):
        self.store._check(write=True)
        node = self.store._node(CONTROLLER_EPOCH)
        if node is None or node.version != self._fence:
            raise self._moved()
        return self.store

    def verify(self) -> None:
        self.store._check()
        if self.store.get_controller_epoch()[1] != self._fence:
            raise self._moved()

    def create_partition_states(self, topic: str, states: Mapping[int, LeaderIsrAndControllerEpoch]
                                ) -> dict[int, LeaderIsrAndControllerEpoch | NodeExists | NoNode]:
        """Per partition: the state (zk_version 0), NodeExists (kept) or NoNode (no topic)."""
        parts = partitions_path(topic)
        s = self._begin()
        if s._node(parts) is None:
            s._try([s._op("create", parts)])     # NoNode if the topic is gone: reported below
        out = {}
        for p, st in sorted(states.items()):
            ppath = partition_path(topic, p)
            ops = [] if s._node(ppath) is not None else [s._op("create", ppath)]
            r = s._try(ops + [s._op("create", partition_state_path(topic, p), st.to_json())])
            out[p] = r if isinstance(r, ZkStoreError) else st.with_version(0)
        return {p: out[p] for p in states}

    def update_partition_states(
            self, updates: Mapping[TopicPartition, tuple[LeaderIsrAndControllerEpoch, int]]
    ) -> dict[TopicPartition, int | BadVersion | NoNode]:
        """Per partition: the new zk_version, BadVersion (kept its data) or NoNode."""
        s = self.store
        ops = {tp: s._op("set", partition_state_path(tp[0], tp[1]), st.to_json(), version=int(v))
               for tp, (st, v) in updates.items()}
        self._begin()
        return {tp: s._try([op]) for tp, op in ops.items()}

    def set_topic_assignment(self, assignment: TopicAssignment, expected_version: int = -1) -> int:
        """The new znode version; raises NoNode / BadVersion."""
        op = self.store._op("set", topic_path(assignment.topic), assignment.to_json(),
                            version=expected_version)
        r = self._begin()._try([op])
        if isinstance(r, ZkStoreError):
            raise r
        return r

    def _list_tree(self, root: str) -> list[str]:
        if self.store._node(root) is None:
            return []
        out, level = [root], [root]
        while level:
            level = [f"{p}/{c}" for p in level for c in self.store._children(p) or []]
            out += level
        return out

    def delete_topic_znodes(self, topic: str) -> int:
        """/brokers/topics/<t> children first, then its config, then the deletion marker."""
        tree, rest = topic_path(topic), (config_topic_path(topic), delete_topic_path(topic))
        s = self._begin()
        deleted = 0
        for paths in (list(reversed(self._list_tree(tree))), [p for p in rest if s._node(p)]):
            if paths:
                s._txn([s._op("delete", p) for p in paths])
                deleted += len(paths)
        return deleted

    def _delete_one(self, path: str) -> bool:
        s = self._begin()
        return not isinstance(s._try([s._op("delete", path)]), NoNode)

    def delete_topic_marker(self, topic: str) -> bool:
        """Remove /admin/delete_topics/<t> alone."""
        return self._delete_one(delete_topic_path(topic))

    def delete_reassign_partitions(self) -> bool:
        return self._delete_one(REASSIGN_PARTITIONS)

    def set_reassign_partitions(self, partitions: Mapping[TopicPartition, Sequence[int]]) -> bool:
        if not partitions:
            return self._delete_one(REASSIGN_PARTITIONS)
        s = self._begin()
        return not isinstance(s._try([s._op("set", REASSIGN_PARTITIONS,
                                            encode_reassignment(partitions))]), NoNode)

    def delete_preferred_election(self) -> bool:
        return self._delete_one(PREFERRED_REPLICA_ELECTION)

    def delete_controller(self) -> bool:
        return self._delete_one(CONTROLLER)

    def delete_isr_change_notifications(self, names: Iterable[str]) -> int:
        paths = list(dict.fromkeys(isr_change_path(n) for n in names))
        s = self._begin()
        present = [p for p in paths if s._node(p) is not None]
        if present:
            s._txn([s._op("delete", p) for p in present])
        return len(present)

    def delete_log_dir_event_notifications(self, names: Iterable[str]) -> int:
        paths = list(dict.fromkeys(log_dir_event_path(n) for n in names))
        s = self._begin()
        present = [p for p in paths if s._node(p) is not None]
        if present:
            s._txn([s._op("delete", p) for p in present])
        return len(present)
