"""Controller → broker requests and their per-event batch (Kafka's ControllerBrokerRequestBatch).

Rules (Kafka's ControllerChannelManager.scala):
- Requests are frozen dataclasses; every one carries the controller id and epoch and the
  receiving broker's epoch, so a broker can reject a stale controller (STALE_CONTROLLER_EPOCH)
  and a request meant for an earlier incarnation of itself (STALE_BROKER_EPOCH).
- One batch per controller event: `new_batch()` must find it empty, the event's handlers
  add to it, `send()` emits per broker LeaderAndIsr, then UpdateMetadata, then StopReplica,
  and empties it.
- Adding a LeaderAndIsr for a partition also queues an UpdateMetadata for it to every live
  (or shutting-down) broker. A partition queued twice for the same broker keeps the latest
  state; `is_new` and StopReplica's `delete` are sticky (OR-ed), as in Kafka.
- Every partition state carries its topic's id (from `/brokers/topics/<t>`), as
  LeaderAndIsr v5+ and UpdateMetadata v7+ do: brokers learn topic ids only this way.
- UpdateMetadata's offline_replicas are the partition's replicas that are not online
  (ControllerContext.is_replica_online: dead or shutting-down broker, or an offline log
  directory), as Kafka's addUpdateMetadataRequestForBrokers lists them.
- A partition of a topic queued for deletion is announced with leader -2
  (LeaderDuringDelete) in UpdateMetadata; a StopReplica that deletes carries leader
  epoch -2 (EpochDuringDelete), otherwise the current leader epoch.
- The batch also says what it announces, for the controller's journal: the partitions of
  its UpdateMetadata (every partition a LeaderAndIsr names is among them;
  `announced_partitions`, None = every partition) and, where the code that changed a
  partition knows why, the reason (`note_reason`): the first noted in a batch stays,
  except that an election's reason (it chose the leader) replaces a reason noted by a
  change that chose none.
- Sending goes through a `BrokerChannel`: the actor shell implements it with a per-broker
  sender that retries until the broker leaves the live set; tests use an in-memory fake.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Union

from controller.context import ControllerContext, TopicPartition

LEADER_DURING_DELETE = -2
EPOCH_DURING_DELETE = -2
NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class PartitionLeaderState:
    """A partition's state as LeaderAndIsr and UpdateMetadata carry it."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int                 # the partition epoch
    replicas: tuple[int, ...]
    is_new: bool = False
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    topic_id: str | None = None     # Kafka's Uuid text form; LeaderAndIsr v5+ / UpdateMetadata v7+

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class LiveBroker:
    id: int
    host: str
    port: int
    node_id: str
    actor_name: str
    rack: str | None = None
    endpoints: tuple = ()        # controller.layout.Endpoint: the broker's Kafka listeners


@dataclass(frozen=True, slots=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[PartitionLeaderState, ...]
    live_leaders: tuple[LiveBroker, ...]


@dataclass(frozen=True, slots=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[PartitionLeaderState, ...]
    live_brokers: tuple[LiveBroker, ...]


@dataclass(frozen=True, slots=True)
class StopReplicaPartition:
    topic: str
    partition: int
    leader_epoch: int
    delete: bool


@dataclass(frozen=True, slots=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[StopReplicaPartition, ...]


ControllerRequest = Union[LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest]


class BrokerChannel(Protocol):
    """How the controller reaches brokers. Responses come back later as controller events."""

    def send(self, broker_id: int, request: ControllerRequest) -> None: ...


class BatchNotEmpty(RuntimeError):
    """A new batch was started while the previous event's requests were never sent."""


def live_broker(reg) -> LiveBroker:
    return LiveBroker(reg.id, reg.host, reg.port, reg.node_id, reg.actor_name, reg.rack,
                      tuple(reg.endpoints))


class RequestBatch:
    def __init__(self, controller_id: int, context: ControllerContext):
        self.controller_id = controller_id
        self.context = context
        self._leader_and_isr: dict[int, dict[TopicPartition, PartitionLeaderState]] = {}
        self._update_metadata_brokers: set[int] = set()
        self._update_metadata_partitions: set[TopicPartition] = set()
        self._update_metadata_all = False
        self._stop_replica: dict[int, dict[TopicPartition, StopReplicaPartition]] = {}
        self.reasons: dict[TopicPartition, str] = {}
        self._elected: set[TopicPartition] = set()

    @property
    def empty(self) -> bool:
        return not (self._leader_and_isr or self._update_metadata_brokers or self._stop_replica)

    def new_batch(self) -> None:
        if not self.empty:
            raise BatchNotEmpty("controller to broker requests from a previous event were not sent")

    def clear(self) -> None:
        self._leader_and_isr.clear()
        self._update_metadata_brokers.clear()
        self._update_metadata_partitions.clear()
        self._update_metadata_all = False
        self._stop_replica.clear()
        self.reasons.clear()
        self._elected.clear()

    # -- adding ----------------------------------------------------------------------------
    def add_leader_and_isr(self, broker_ids, tp: TopicPartition, replicas, is_new: bool) -> None:
        leadership = self.context.leadership.get(tp)
        if leadership is None:
            return
        assignment = self.context.assignment(tp)
        for b in broker_ids:
            if b < 0:
                continue
            per_broker = self._leader_and_isr.setdefault(b, {})
            previous = per_broker.get(tp)
            per_broker[tp] = PartitionLeaderState(
                tp.topic, tp.partition, leadership.controller_epoch, leadership.leader,
                leadership.leader_epoch, leadership.isr, leadership.zk_version, tuple(replicas),
                is_new=is_new or (previous is not None and previous.is_new),
                adding_replicas=assignment.adding if assignment else (),
                removing_replicas=assignment.removing if assignment else (),
                topic_id=self.context.topic_ids.get(tp.topic))
        self.add_update_metadata(self.context.live_or_shutting_down_broker_ids(), [tp])

    def add_stop_replica(self, broker_ids, tp: TopicPartition, delete: bool) -> None:
        leadership = self.context.leadership.get(tp)
        for b in broker_ids:
            if b < 0:
                continue
            per_broker = self._stop_replica.setdefault(b, {})
            previous = per_broker.get(tp)
            delete_now = delete or (previous is not None and previous.delete)
            epoch = EPOCH_DURING_DELETE if delete_now else (
                leadership.leader_epoch if leadership is not None else NO_LEADER)
            per_broker[tp] = StopReplicaPartition(tp.topic, tp.partition, epoch, delete_now)

    def discard_stop_replica(self, broker_ids) -> None:
        """Drop StopReplica queued for these brokers (meant for a dead incarnation of a
        bounced broker: Kafka's channel to it is gone before they are sent)."""
        for b in broker_ids:
            self._stop_replica.pop(b, None)

    def add_update_metadata(self, broker_ids, partitions=None) -> None:
        """UpdateMetadata to `broker_ids` for `partitions` (None = every partition)."""
        self._update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        if partitions is None:
            self._update_metadata_all = True
        else:
            self._update_metadata_partitions.update(partitions)

    def note_reason(self, tp: TopicPartition, reason: str, election: bool = False) -> None:
        """Why `tp`'s state changes in this batch: the first reason noted stays, but the
        first election's (`election`: it chose the leader) replaces any other."""
        if not election:
            self.reasons.setdefault(tp, reason)
        elif tp not in self._elected:
            self._elected.add(tp)
            self.reasons[tp] = reason

    def announced_partitions(self) -> set[TopicPartition] | None:
        """The partitions whose state this batch's UpdateMetadata carries (None: every
        partition); read it before `send`, which empties the batch."""
        return None if self._update_metadata_all else self._update_metadata_partitions

    # -- sending -----------------------------------------------------------------------------
    def _metadata_state(self, tp: TopicPartition) -> PartitionLeaderState | None:
        leadership = self.context.leadership.get(tp)
        if leadership is None:
            return None
        replicas = self.context.replicas(tp)
        leader = LEADER_DURING_DELETE if self.context.is_topic_queued_for_deletion(tp.topic) \
            else leadership.leader
        return PartitionLeaderState(
            tp.topic, tp.partition, leadership.controller_epoch, leader, leadership.leader_epoch,
            leadership.isr, leadership.zk_version, replicas,
            offline_replicas=tuple(r for r in replicas
                                   if not self.context.is_replica_online(r, tp)),
            topic_id=self.context.topic_ids.get(tp.topic))

    def build(self) -> list[tuple[int, ControllerRequest]]:
        """The batch's requests in Kafka's order, without clearing it."""
        ctx = self.context
        epoch = ctx.epoch
        live = tuple(live_broker(ctx.live_brokers[b]) for b in sorted(ctx.live_brokers))
        out: list[tuple[int, ControllerRequest]] = []
        for b in sorted(self._leader_and_isr):
            states = tuple(self._leader_and_isr[b][tp] for tp in sorted(self._leader_and_isr[b]))
            leaders = {s.leader for s in states}
            out.append((b, LeaderAndIsrRequest(
                self.controller_id, epoch, ctx.broker_epoch(b), states,
                tuple(x for x in live if x.id in leaders))))
        if self._update_metadata_brokers:
            tps = ctx.all_partitions() if self._update_metadata_all \
                else sorted(self._update_metadata_partitions)
            states = tuple(s for tp in sorted(tps) if (s := self._metadata_state(tp)) is not None)
            for b in sorted(self._update_metadata_brokers):
                out.append((b, UpdateMetadataRequest(self.controller_id, epoch, ctx.broker_epoch(b),
                                                     states, live)))
        for b in sorted(self._stop_replica):
            parts = tuple(self._stop_replica[b][tp] for tp in sorted(self._stop_replica[b]))
            out.append((b, StopReplicaRequest(self.controller_id, epoch, ctx.broker_epoch(b), parts)))
        return out

    def send(self, channel: BrokerChannel) -> list[tuple[int, ControllerRequest]]:
        requests = self.build()
        self.clear()
        for broker_id, request in requests:
            channel.send(broker_id, request)
        return requests
