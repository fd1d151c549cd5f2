"""Small real classes standing in for the outside world in unit tests (no patches)."""

from __future__ import annotations

from collections import defaultdict


class RecordingChannel:
    """An in-memory BrokerChannel: records every request per broker, in send order."""

    def __init__(self):
        self.sent: list[tuple[int, object]] = []

    def send(self, broker_id, request) -> None:
        self.sent.append((broker_id, request))

    def by_broker(self) -> dict[int, list[object]]:
        out = defaultdict(list)
        for b, r in self.sent:
            out[b].append(r)
        return dict(out)

    def kinds(self) -> list[tuple[int, str]]:
        return [(b, type(r).__name__) for b, r in self.sent]

    def clear(self) -> None:
        self.sent.clear()


class AnsweringChannel(RecordingChannel):
    """A RecordingChannel whose brokers answer like real ones would, as controller events.

    - Each broker remembers the highest controller epoch it has seen and REJECTS requests
      from an older one (kept in `rejected`), as brokers do (STALE_CONTROLLER_EPOCH).
    - StopReplica(delete=true) is answered with StopReplicaResponse to the controller that
      sent it: error 0, or 56 (KafkaStorageError) for brokers in `failing`.
    - Brokers in `unreachable` get nothing (requests still recorded).
    """

    def __init__(self):
        super().__init__()
        self.controllers: dict = {}
        self.failing: set[int] = set()
        self.unreachable: set[int] = set()
        self.highest_epoch: dict[int, int] = {}
        self.rejected: list[tuple[int, object]] = []

    def send(self, broker_id, request) -> None:
        from controller import events as ev
        from controller.requests import StopReplicaRequest
        super().send(broker_id, request)
        if broker_id in self.unreachable:
            return
        if request.controller_epoch < self.highest_epoch.get(broker_id, 0):
            self.rejected.append((broker_id, request))
            return
        self.highest_epoch[broker_id] = request.controller_epoch
        controller = self.controllers.get(request.controller_id)
        if controller is not None and isinstance(request, StopReplicaRequest):
            code = 56 if broker_id in self.failing else 0
            errors = {(p.topic, p.partition): code for p in request.partitions if p.delete}
            if errors:
                controller.loop.put(ev.StopReplicaResponse(broker_id, errors))


class InMemoryStore:
    """The ControllerStore protocol over dicts, with the real store's fencing and outcomes.

    `epoch_zk_version` is the /controller_epoch version; a writer bound to an older one is
    fenced (ControllerMovedError, nothing written), as the ZooKeeper multi-op check does.
    """

    def __init__(self):
        self.states: dict = {}            # (topic, partition) -> (state, zk_version)
        self.topics: set[str] = set()
        self.epoch_zk_version = 0
        self.writer_epoch_zk_version = 0
        self.writes = 0

    def _check_epoch(self):
        from controller.store_api import ControllerMovedError
        if self.writer_epoch_zk_version != self.epoch_zk_version:
            raise ControllerMovedError("controller epoch moved", None)

    def create_partition_states(self, topic, states):
        from controller.store_api import NodeExists, NoNode
        self._check_epoch()
        out = {}
        for p, st in states.items():
            if topic not in self.topics:
                out[p] = NoNode(f"/brokers/topics/{topic}")
            elif (topic, p) in self.states:
                out[p] = NodeExists(f"/brokers/topics/{topic}/partitions/{p}/state")
            else:
                self.states[(topic, p)] = (st.with_version(0), 0)
                self.writes += 1
                out[p] = st.with_version(0)
        return out

    def update_partition_states(self, updates):
        from controller.store_api import BadVersion, NoNode
        self._check_epoch()
        out = {}
        for tp, (st, expected) in updates.items():
            key = (tp[0], tp[1])
            if key not in self.states:
                out[tp] = NoNode(f"/brokers/topics/{tp[0]}/partitions/{tp[1]}/state")
            elif self.states[key][1] != expected:
                out[tp] = BadVersion(f"/brokers/topics/{tp[0]}/partitions/{tp[1]}/state")
            else:
                version = expected + 1
                self.states[key] = (st.with_version(version), version)
                self.writes += 1
                out[tp] = version
        return out

    def get_partition_state(self, topic, partition):
        got = self.states.get((topic, partition))
        return got[0] if got else None

    def bump_behind_our_back(self, topic, partition, **changes):
        """Another writer changes a state znode (its version moves on)."""
        from dataclasses import replace
        st, v = self.states[(topic, partition)]
        self.states[(topic, partition)] = (replace(st, zk_version=v + 1, **changes), v + 1)


class QuietNetwork:
    """A broker's event loop, never started: nothing handed to it runs."""

    def call(self, fn, *args):
        pass


class IdleBroker:
    """What a follower fetcher (actors/fetcher.py) needs of its broker, with the loop never
    started: the fetcher's coroutine does not run, its methods are called directly."""

    def __init__(self):
        from actors.kafka_api import KafkaConfig
        self.id = 2
        self.kafka_config = KafkaConfig(replica_fetch_backoff_ms=100)
        self.security = None
        self.network = QuietNetwork()
        self.inter_broker_listener = "PLAINTEXT"

    def replication_cut_until(self, leader_id):
        return 0.0
