"""The ZooKeeper store's controller side: the controller election and the fenced writes.

Part of the ZooKeeper store (``controller/zookeeper/store.py`` is its facade and re-exports
``ControllerElection`` and ``FencedWriter``; see there for the module map).

Rules:
- Election is exactly Kafka's KafkaZkClient.registerControllerAndIncrementControllerEpoch:
  one multi {create EPHEMERAL /controller, set /controller_epoch = epoch+1 at the version
  read}; on NodeExists/BadVersion (or a
  connection loss, when the multi's outcome is unknown) re-read, and succeed only if
  /controller is ours (our session, our id) with epoch+1. Otherwise
  ``ControllerMovedError``.
- Fencing: every controller write goes through a ``FencedWriter`` bound to the election
  result; each multi starts with ``check(/controller_epoch, epoch_zk_version)``. A failed
  check raises ``ControllerMovedError`` and that multi wrote nothing (ZK multi is atomic).
- Fenced bulk writes report per item, with the batching semantics of
  ``controller/zookeeper/multi.py``: each successful item was written under a passing epoch
  check. Atomicity is per multi, not per call: if the epoch moves between two multis of
  one call, earlier ones (written while we were controller) stay, and the call raises
  ``ControllerMovedError``.
- Deletes of trees go children before parents, multis in order (not pipelined); a
  topic's deletion request marker goes last, so an interrupted deletion is resumed.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable, Mapping, Sequence

from kazoo.exceptions import BadVersionError, ConnectionLoss, NodeExistsError, NoNodeError

from controller.zookeeper.client import (BadVersion, ControllerMovedError, NodeExists, NoNode,
                                         NotEmpty, ZkStoreError, ZkWatch, zk_call,
                                         zk_read)
from controller.zookeeper.multi import Op, Unit, ZkMultiSession, all_ok, first_failure
from controller.layout import (CONTROLLER, CONTROLLER_EPOCH, PREFERRED_REPLICA_ELECTION,
                               REASSIGN_PARTITIONS, LeaderIsrAndControllerEpoch,
                               TopicAssignment, TopicPartition, config_topic_path,
                               decode_controller_id, decode_epoch, delete_topic_path,
                               encode_controller, encode_epoch, encode_reassignment,
                               isr_change_path, log_dir_event_path,
                               partition_path, partition_state_path, partitions_path,
                               topic_path)

__all__ = ["ControllerElection", "FencedWriter", "ZkElectionSession"]


# -- results ---------------------------------------------------------------------------------
from controller.store_api import ControllerElection  # noqa: E402  (defined kazoo-free)


def _deleted_by_us(units: list[Unit], res: dict) -> int:
    """How many delete units this run deleted (a tolerated NoNode empties the unit's ops)."""
    return sum(1 for u in units if u.ops and res.get(u.key) is True)


# -- the election -------------------------------------------------------------------------------

class ZkElectionSession(ZkMultiSession):
    """``ZkMultiSession`` plus the controller election; ``fenced()`` gives the writer."""

    @zk_read
    def get_controller_epoch(self) -> tuple[int, int]:
        """(epoch, zk_version) of /controller_epoch; (0, -1) if it does not exist yet."""
        got = self._get(CONTROLLER_EPOCH)
        return (0, -1) if got is None else (decode_epoch(got[0]), got[1].version)

    @zk_read
    def get_controller(self) -> int | None:
        """The active controller's id, None when /controller is absent."""
        got = self._get(CONTROLLER)
        return None if got is None else decode_controller_id(got[0])

    @zk_call
    def elect_controller(self, controller_id: int) -> ControllerElection:
        """Kafka's registerControllerAndIncrementControllerEpoch: ONE multi creating
        EPHEMERAL /controller and bumping
        /controller_epoch at the version read. Raises ControllerMovedError when another
        controller holds /controller or bumped the epoch first."""
        try:
            self._client.create(self._abs(CONTROLLER_EPOCH), encode_epoch(0))
        except NodeExistsError:
            pass
        data, stat = self._client.get(self._abs(CONTROLLER_EPOCH))
        new_epoch = decode_epoch(data) + 1
        t = self._client.transaction()
        t.create(self._abs(CONTROLLER), encode_controller(controller_id, int(time.time() * 1000)),
                 ephemeral=True)
        t.set_data(self._abs(CONTROLLER_EPOCH), encode_epoch(new_epoch), version=stat.version)
        try:
            results = t.commit()
        except ConnectionLoss:  # outcome unknown: our multi may have landed; verify
            results = None
        if results is not None:
            if all_ok(results):
                return ControllerElection(new_epoch, results[1].version, controller_id,
                                          self.session_id)
            _, exc = first_failure(results, 0)
            if not isinstance(exc, (NodeExistsError, BadVersionError, NoNodeError)):
                raise ZkStoreError(f"controller election failed: {type(exc).__name__}")
        return self._check_controller_and_epoch(controller_id, new_epoch)

    def _check_controller_and_epoch(self, controller_id: int, new_epoch: int) -> ControllerElection:
        retry = self._client.retry
        try:
            cdata, cstat = retry(self._client.get, self._abs(CONTROLLER))
        except NoNodeError:
            cdata, cstat = None, None
        current = decode_controller_id(cdata)
        edata, estat = retry(self._client.get, self._abs(CONTROLLER_EPOCH))
        epoch = decode_epoch(edata)
        if current == controller_id and cstat is not None and \
                cstat.ephemeralOwner == self.session_id and epoch == new_epoch:
            return ControllerElection(new_epoch, estat.version, controller_id, self.session_id)
        raise ControllerMovedError(
            f"controller moved: /controller names {current} (epoch {epoch}); "
            f"candidate {controller_id} wanted epoch {new_epoch}", current)

    def watch_controller(self, callback: Callable[[int | None], None]) -> ZkWatch:
        """DataWatch on /controller: callback(controller id) on create/change, None on delete."""
        return self._data_watch(CONTROLLER, lambda data, stat:
                                None if stat is None else decode_controller_id(data), callback)

    @zk_call
    def delete_controller_if_ours(self) -> bool:
        """Delete /controller if THIS session owns it (resign); True if deleted."""
        return self._delete_controller_when(
            lambda data, stat: stat.ephemeralOwner == self.session_id)

    resign = delete_controller_if_ours

    @zk_call
    def delete_dead_incarnation_controller(self, controller_id: int) -> bool:
        """A RESTARTED candidate (Ray reruns __init__ only after the old process died)
        deletes /controller when it names this candidate's id but another session owns it:
        that session belonged to the dead incarnation, and waiting out its timeout would
        leave the cluster without a controller for that long (brokers do the same with their
        registration). Safe even if the old process lingers (a partitioned node): every
        controller write is fenced by the controller epoch the next election bumps."""
        return self._delete_controller_when(
            lambda data, stat: decode_controller_id(data) == controller_id
            and stat.ephemeralOwner != self.session_id)

    def _delete_controller_when(self, test) -> bool:
        """Delete /controller at the version read if test(data, stat) holds; True if deleted
        (a node changed or gone meanwhile is left alone)."""
        got = self._get(CONTROLLER)
        if got is None or not test(*got):
            return False
        try:
            self._client.delete(self._abs(CONTROLLER), version=got[1].version)
            return True
        except (NoNodeError, BadVersionError):
            return False

    def fenced(self, election: ControllerElection) -> "FencedWriter":
        """The controller's write API, every write fenced by ``election``."""
        return FencedWriter(self, election)


# -- the controller's fenced write API -----------------------------------------------------------
class FencedWriter:
    """Every write is a multi starting with check(/controller_epoch, election.epoch_zk_version).
    A failed check raises ControllerMovedError (the fence that stops a zombie controller)."""

    def __init__(self, store: ZkElectionSession, election: ControllerElection):
        self.store, self.election = store, election

    @property
    def hosts(self) -> str:
        """Its session's ZooKeeper (what zk_call's ZkUnavailable names)."""
        return self.store.hosts

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

    def _run(self, units: list[Unit], pipeline: bool = True) -> dict:
        return self.store._run_units(units, self._fence, pipeline=pipeline, on_moved=self._moved)

    def _one(self, op: Op):
        """A single fenced op: its result, or raise its outcome error."""
        r = self._run([Unit(0, [op])], pipeline=False)[0]
        if isinstance(r, ZkStoreError):
            raise r
        return r

    @zk_call
    def verify(self) -> None:
        """Raise ControllerMovedError unless /controller_epoch still has our version."""
        if self.store.get_controller_epoch()[1] != self._fence:
            raise self._moved()

    @zk_call
    def create_partition_states(self, topic: str, states: Mapping[int, LeaderIsrAndControllerEpoch]
                                ) -> dict[int, LeaderIsrAndControllerEpoch | NodeExists | NoNode]:
        """Create /brokers/topics/<t>/partitions[/<p>]/state with missing parents, fenced.
        Per partition: the written state (zk_version 0), NodeExists (state already there:
        Kafka keeps the partition New), or NoNode (the topic znode is gone)."""
        children = self.store._children(partitions_path(topic))
        existing = set(children or [])
        units = [Unit(p, ([] if str(p) in existing else
                           [Op("create", partition_path(topic, p), tolerate=(NodeExistsError,))])
                       + [Op("create", partition_state_path(topic, p), st.to_json())])
                 for p, st in sorted(states.items())]
        if children is None:  # the parent of all partitions goes first, in the same multi
            head = Unit(None, [Op("create", partitions_path(topic), tolerate=(NodeExistsError,))])
            first = self.store._chunks([head] + units, 1)[0]
            res = self._run(first, pipeline=False)
            res.update(self._run(units[len(first) - 1:]))
        else:
            res = self._run(units)
        return {p: (res[p] if isinstance(res[p], ZkStoreError) else st.with_version(0))
                for p, st in states.items()}

    @zk_call
    def update_partition_states(
            self, updates: Mapping[TopicPartition, tuple[LeaderIsrAndControllerEpoch, int]]
    ) -> dict[TopicPartition, int | BadVersion | NoNode]:
        """Conditional set of each state znode at its expected zk_version, fenced. Per
        partition: the new zk_version (partition epoch), BadVersion (kept its data) or NoNode."""
        units = [Unit(tp, [Op("set", partition_state_path(tp[0], tp[1]), st.to_json(),
                                version=int(v))])
                 for tp, (st, v) in updates.items()]
        res = self._run(units)
        return {tp: (r if isinstance(r, ZkStoreError) else r.version) for tp, r in res.items()}

    @zk_call
    def set_topic_assignment(self, assignment: TopicAssignment, expected_version: int = -1) -> int:
        """Fenced (conditional if expected_version >= 0) set of /brokers/topics/<t>; returns
        the new znode version; raises NoNode / BadVersion."""
        return self._one(Op("set", topic_path(assignment.topic), assignment.to_json(),
                             version=expected_version)).version

    @zk_call
    def delete_topic_znodes(self, topic: str) -> int:
        """Fenced recursive delete of /brokers/topics/<t>, then /config/topics/<t>, then
        /admin/delete_topics/<t> (the request marker last, only once the rest is gone, so an
        interrupted deletion is resumed). Children before parents, many per multi, multis
        in order. Returns how many znodes this call deleted."""
        deleted = 0
        for _ in range(5):
            tree = self._list_tree(topic_path(topic))
            units = [Unit(p, [Op("delete", p, tolerate=(NoNodeError,))]) for p in reversed(tree)]
            res = self._run(units, pipeline=False)
            deleted += _deleted_by_us(units, res)
            if not any(isinstance(r, NotEmpty) for r in res.values()):
                break  # (NotEmpty: a child appeared meanwhile; list again)
        else:
            raise ZkStoreError(f"delete_topic_znodes {topic}: children kept appearing")
        units = [Unit(p, [Op("delete", p, tolerate=(NoNodeError,))])
                 for p in (config_topic_path(topic), delete_topic_path(topic))]
        res = self._run(units, pipeline=False)
        return deleted + _deleted_by_us(units, res)

    def _list_tree(self, root: str) -> list[str]:
        """root and all descendants, breadth first (pipelined per level)."""
        if self.store._client.exists(self.store._abs(root)) is None:
            return []
        out, level = [root], [root]
        while level:
            nxt = []
            for parent, children in zip(level, self.store._children_many(level, small=True)):
                nxt += [f"{parent}/{c}" for c in (children or [])]
            out += nxt
            level = nxt
        return out

    @zk_call
    def delete_topic_marker(self, topic: str) -> bool:
        """Remove /admin/delete_topics/<t> alone (a request for a topic that does not exist,
        or while deletion is disabled)."""
        return self._delete_one(delete_topic_path(topic))

    @zk_call
    def delete_reassign_partitions(self) -> bool:
        return self._delete_one(REASSIGN_PARTITIONS)

    @zk_call
    def set_reassign_partitions(self, partitions: Mapping[TopicPartition, Sequence[int]]) -> bool:
        """Kafka's removePartitionsFromZkReassignment: rewrite /admin/reassign_partitions with
        the reassignments still pending, deleting it once none is left. False if it is gone."""
        if not partitions:
            return self._delete_one(REASSIGN_PARTITIONS)
        try:
            self._one(Op("set", REASSIGN_PARTITIONS, encode_reassignment(partitions)))
            return True
        except NoNode:
            return False

    @zk_call
    def delete_preferred_election(self) -> bool:
        return self._delete_one(PREFERRED_REPLICA_ELECTION)

    @zk_call
    def delete_controller(self) -> bool:
        """Kafka's fenced deleteController: remove /controller so others may elect."""
        return self._delete_one(CONTROLLER)

    def _delete_one(self, path: str) -> bool:
        try:
            self._one(Op("delete", path))
            return True
        except NoNode:
            return False

    @zk_call
    def delete_isr_change_notifications(self, names: Iterable[str]) -> int:
        """Fenced delete of the named notifications; returns how many were deleted by us."""
        units = [Unit(n, [Op("delete", isr_change_path(n), tolerate=(NoNodeError,))])
                 for n in names]
        res = self._run(units)
        return _deleted_by_us(units, res)

    @zk_call
    def delete_log_dir_event_notifications(self, names: Iterable[str]) -> int:
        """Fenced delete of the named log dir event notices; returns how many were deleted
        by us."""
        units = [Unit(n, [Op("delete", log_dir_event_path(n), tolerate=(NoNodeError,))])
                 for n in names]
        res = self._run(units)
        return _deleted_by_us(units, res)
