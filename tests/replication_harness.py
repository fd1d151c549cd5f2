"""Several ReplicaManagers replicating by direct calls: a fake controller and fetcher loop.

No Ray, no ZooKeeper, no sleeping: a `FakeClock`, LeaderAndIsr built from
controller.requests dataclasses, AlterPartition answered like the controller does
(leader epoch and partition epoch must match, the ISR is committed with zk_version + 1),
and a fetcher per (follower, partition) that follows what the shell will do: send the
position from `follower_fetch_request`, truncate on a diverging epoch, append otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.requests import (LeaderAndIsrRequest, LiveBroker, PartitionLeaderState,
                                 StopReplicaPartition, StopReplicaRequest,
                                 UpdateMetadataRequest)
from controller.layout import Endpoint, LeaderIsrAndControllerEpoch
from replicas.errors import InvalidUpdateVersion
from replicas.replica_manager import (BrokerConfig, HighWatermarkChanged, ProduceDone,
                                      ProposeIsr, ReplicaManager, TopicPartition)

CONTROLLER_ID = 100


class FakeClock:
    def __init__(self, now: int = 1_000):
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@dataclass
class Leadership:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]


@dataclass
class Cluster:
    base: object
    broker_ids: tuple[int, ...] = (1, 2, 3)
    lag_ms: int = 10_000
    hw_checkpoint_interval_ms: int = 0
    clock: FakeClock = field(default_factory=FakeClock)
    replica_selector_class: str | None = None       # replica.selector.class (KIP-392)
    racks: dict = field(default_factory=dict)       # broker id -> broker.rack
    flush_before_ack: bool = False                  # log.flush.before.ack

    def __post_init__(self):
        self.controller_epoch = 1
        self.brokers: dict[int, ReplicaManager] = {}
        self.leadership: dict[TopicPartition, Leadership] = {}
        self.topic_configs: dict[str, dict] = {}
        self.fetching: dict[tuple[int, TopicPartition], int] = {}   # (follower, tp) -> leader
        self.down: set[int] = set()          # brokers cut off: no requests, no fetching
        self.dead: set[int] = set()          # killed brokers (also in `down`)
        self.hold_alter_partition = False
        self.held: list[tuple[int, ProposeIsr]] = []
        self.done: dict[tuple[int, int], ProduceDone] = {}
        self.hw_events: list[tuple[int, HighWatermarkChanged]] = []
        for b in self.broker_ids:
            self.start(b)

    # -- brokers ---------------------------------------------------------------------------
    def config(self, b: int) -> BrokerConfig:
        return BrokerConfig(str(self.base / f"broker-{b}"), replica_lag_time_max_ms=self.lag_ms,
                            hw_checkpoint_interval_ms=self.hw_checkpoint_interval_ms,
                            replica_selector_class=self.replica_selector_class,
                            log_flush_before_ack=self.flush_before_ack)

    def start(self, b: int):
        """A new incarnation of broker b on its data dir (pending ids start over)."""
        for key in [k for k in self.fetching if k[0] == b]:
            del self.fetching[key]
        for key in [k for k in self.done if k[0] == b]:
            del self.done[key]
        rm = ReplicaManager(b, self.config(b), self.clock)
        reports = rm.startup()
        self.brokers[b] = rm
        return reports

    def restart(self, b: int):
        self.brokers[b].close()
        return self.start(b)

    def kill(self, b: int) -> None:
        """The broker process dies: no close(), nothing flushed or checkpointed beyond
        what the calls already did; it stays down until `start(b)`."""
        self.down.add(b)
        self.dead.add(b)

    def revive(self, b: int):
        self.dead.discard(b)
        self.down.discard(b)
        return self.start(b)

    # -- controller ------------------------------------------------------------------------
    def state(self, tp: TopicPartition, is_new: bool = False) -> PartitionLeaderState:
        lead = self.leadership[tp]
        return PartitionLeaderState(tp.topic, tp.partition, self.controller_epoch, lead.leader,
                                    lead.leader_epoch, lead.isr, lead.zk_version, lead.replicas,
                                    is_new)

    def leader_and_isr(self, states, broker_epoch: int = -1, controller_epoch: int | None = None):
        return LeaderAndIsrRequest(CONTROLLER_ID, controller_epoch or self.controller_epoch,
                                   broker_epoch, tuple(states), ())

    def create(self, topic: str, partition: int = 0, replicas=(1, 2, 3), config=None,
               isr=None) -> TopicPartition:
        tp = TopicPartition(topic, partition)
        self.topic_configs[topic] = dict(config or {})
        self.leadership[tp] = Leadership(replicas[0], 0, tuple(isr or replicas), 0, tuple(replicas))
        self.send_leader_and_isr(tp, is_new=True)
        return tp

    def elect(self, tp: TopicPartition, leader: int, isr=None, to=None) -> None:
        lead = self.leadership[tp]
        lead.leader, lead.leader_epoch = leader, lead.leader_epoch + 1
        lead.isr, lead.zk_version = tuple(isr or lead.isr), lead.zk_version + 1
        self.send_leader_and_isr(tp, to=to)

    def send_leader_and_isr(self, tp: TopicPartition, to=None, is_new: bool = False) -> dict:
        outcomes = {}
        for b in to or self.leadership[tp].replicas:
            if b in self.down:
                continue
            outcome = self.brokers[b].handle_leader_and_isr(
                self.leader_and_isr([self.state(tp, is_new)]), self.topic_configs)
            outcomes[b] = outcome
            for t in outcome.became_leader:
                self.fetching.pop((b, t), None)
            for t, leader in outcome.became_follower.items():
                if leader >= 0:
                    self.fetching[(b, t)] = leader
                else:
                    self.fetching.pop((b, t), None)
            self.apply(b, outcome.effects)
        return outcomes

    def stop_replica(self, b: int, tp: TopicPartition, delete: bool, leader_epoch: int = -2):
        req = StopReplicaRequest(CONTROLLER_ID, self.controller_epoch, -1,
                                 (StopReplicaPartition(tp.topic, tp.partition, leader_epoch,
                                                       delete),))
        outcome = self.brokers[b].handle_stop_replica(req)
        for t in outcome.stopped:
            self.fetching.pop((b, t), None)
        self.apply(b, outcome.effects)
        return outcome

    def update_metadata(self, b: int):
        live = tuple(LiveBroker(x, "127.0.0.1", 9000 + x, f"node-{x}", f"broker-{x}",
                                self.racks.get(x),
                                (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + x, "PLAINTEXT"),))
                     for x in self.broker_ids if x not in self.down)
        states = tuple(self.state(tp) for tp in sorted(self.leadership))
        return self.brokers[b].handle_update_metadata(
            UpdateMetadataRequest(CONTROLLER_ID, self.controller_epoch, -1, states, live))

    def apply(self, b: int, effects) -> None:
        for e in effects:
            if isinstance(e, ProduceDone):
                assert (b, e.pending_id) not in self.done, f"answered twice: {e}"
                self.done[(b, e.pending_id)] = e
            elif isinstance(e, HighWatermarkChanged):
                self.hw_events.append((b, e))
            elif isinstance(e, ProposeIsr):
                if b in self.down:
                    continue            # a cut-off broker never reaches the controller
                if self.hold_alter_partition:
                    self.held.append((b, e))
                else:
                    self.answer_alter_partition(b, e)

    def answer_alter_partition(self, b: int, e: ProposeIsr) -> None:
        lead = self.leadership[e.tp]
        if lead.leader != b or e.leader_epoch != lead.leader_epoch \
                or e.partition_epoch != lead.zk_version:
            result = InvalidUpdateVersion(f"{e}")
        else:
            lead.isr, lead.zk_version = tuple(e.isr), lead.zk_version + 1
            result = LeaderIsrAndControllerEpoch(b, lead.leader_epoch, lead.isr,
                                                 self.controller_epoch, lead.zk_version)
        self.apply(b, self.brokers[b].handle_alter_partition_response(e.tp, result, proposal=e))

    def release_held(self) -> None:
        held, self.held = self.held, []
        for b, e in held:
            self.answer_alter_partition(b, e)

    # -- data plane ------------------------------------------------------------------------
    def fetch_once(self, b: int, tp: TopicPartition) -> bool:
        """One fetcher round trip of follower b for tp; True if anything changed."""
        leader = self.fetching.get((b, tp))
        if leader is None or b in self.down or leader in self.down:
            return False
        follower, lead = self.brokers[b], self.brokers[leader]
        pos = follower.follower_fetch_request(tp)
        res = lead.fetch(tp, pos.fetch_offset, 1 << 20, replica_id=b,
                         current_leader_epoch=pos.current_leader_epoch,
                         last_fetched_epoch=pos.last_fetched_epoch,
                         log_start_offset=follower.log(tp).log_start_offset)
        self.apply(leader, res.effects)
        if res.error == 1 and res.log_start_offset > pos.fetch_offset:   # OFFSET_OUT_OF_RANGE
            self.apply(b, follower.follower_start_at_leader_log_start(
                tp, res.log_start_offset, res.high_watermark,
                leader_epoch=pos.current_leader_epoch))
            return True
        if res.error:
            return False
        if res.diverging_epoch is not None:
            result = follower.follower_truncate(tp, *res.diverging_epoch,
                                                leader_epoch=pos.current_leader_epoch)
            self.apply(b, result.effects)
            return True
        hw_before = follower.partition_info(tp)["high_watermark"]
        self.apply(b, follower.append_as_follower(tp, res.records, res.high_watermark,
                                                  fetch_offset=pos.fetch_offset,
                                                  leader_epoch=pos.current_leader_epoch,
                                                  leader_log_start_offset=res.log_start_offset))
        return bool(res.records) or follower.partition_info(tp)["high_watermark"] != hw_before

    def replicate(self, max_rounds: int = 50) -> int:
        """Run every fetcher until a whole round changes nothing; returns rounds run."""
        for rounds in range(1, max_rounds + 1):
            changed = False
            for (b, tp) in sorted(self.fetching):
                changed |= self.fetch_once(b, tp)
            if not changed:
                return rounds
        raise AssertionError("replication did not settle")

    def tick(self, b: int) -> list:
        """The broker shell's tick: the manager's, then its deferred HW checkpoint, the
        fsyncs of its rolls and the recovery checkpoint they moved."""
        rm = self.brokers[b]
        effects = rm.tick()
        self.apply(b, effects)
        hws = rm.due_high_watermarks()
        if hws is not None:
            rm.write_high_watermarks(hws)
        points = rm.segments_flushed(rm.write_segment_flushes(rm.due_segment_flushes()))
        if points is not None:
            rm.write_recovery_points(points)
        return effects

    def log_bytes(self, b: int, tp: TopicPartition, upto: int) -> bytes:
        log = self.brokers[b].log(tp)
        return b"".join(log.iter_reads(log.log_start_offset, upto))
