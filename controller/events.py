"""Every controller event, as frozen dataclasses (Kafka's ControllerEvent hierarchy).

Rules:
- ZooKeeper watches, broker responses, admin calls and timers only CREATE these and put
  them on the controller's queue; the one event thread hands each to
  `Controller.process(event)`, which calls `process_<snake_case_name>`
  (replicas/dispatch.py).
- Events carry data, never behaviour; a reply channel (for requests that wait for an
  answer, e.g. controlled shutdown, AlterPartition) is a callable the handler calls once.
- An event's name says what happened, not what to do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from controller.layout import LeaderIsrAndControllerEpoch, TopicPartition

Reply = Callable[[Any], None]


def _no_reply(_result) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Startup:
    """The controller candidate starts: register watches, try to become controller."""


@dataclass(frozen=True, slots=True)
class ControllerChange:
    """/controller was created or changed: resign if it no longer names us."""


@dataclass(frozen=True, slots=True)
class Reelect:
    """/controller was deleted: resign if we were controller, then try to win."""


@dataclass(frozen=True, slots=True)
class Expire:
    """Our ZooKeeper session expired: the queue was cleared and this put first."""


@dataclass(frozen=True, slots=True)
class BrokerChange:
    """The children of /brokers/ids changed."""


@dataclass(frozen=True, slots=True)
class BrokerModification:
    """The data of /brokers/ids/<id> changed."""

    broker_id: int


@dataclass(frozen=True, slots=True)
class TopicChange:
    """The children of /brokers/topics changed (topics created or removed)."""


@dataclass(frozen=True, slots=True)
class TopicDeletion:
    """The children of /admin/delete_topics changed."""


@dataclass(frozen=True, slots=True)
class PartitionModifications:
    """/brokers/topics/<topic> changed (partitions added, or a reassignment written)."""

    topic: str


@dataclass(frozen=True, slots=True)
class TopicConfigChange:
    """/config/topics/<topic> changed (e.g. unclean.leader.election.enable turned on)."""

    topic: str


@dataclass(frozen=True, slots=True)
class ReassignPartitions:
    """/admin/reassign_partitions was created."""


@dataclass(frozen=True, slots=True)
class PartitionReassignmentIsrChange:
    """The ISR of a partition being reassigned changed: maybe the new replicas caught up."""

    partition: TopicPartition


@dataclass(frozen=True, slots=True)
class PreferredReplicaElection:
    """A leader election was asked for: by an admin call (`partitions` given; ElectLeaders'
    `election_type` 0 preferred or 1 unclean), by /admin/preferred_replica_election being
    created (trigger "zk": partitions read there, preferred)."""

    partitions: frozenset = frozenset()
    trigger: str = "admin"
    reply: Reply = field(default=_no_reply, compare=False)
    election_type: int = 0


@dataclass(frozen=True, slots=True)
class ApiPartitionReassignment:
    """AlterPartitionReassignments (KIP-455): partition → target replicas, None to cancel."""

    targets: Mapping[TopicPartition, Any]
    reply: Reply = field(default=_no_reply, compare=False)


@dataclass(frozen=True, slots=True)
class ListPartitionReassignments:
    """ListPartitionReassignments: of these partitions (None: every one in progress)."""

    partitions: frozenset | None = None
    reply: Reply = field(default=_no_reply, compare=False)


@dataclass(frozen=True, slots=True)
class AutoPreferredReplicaElection:
    """The leader-imbalance timer fired (leader.imbalance.check.interval.seconds)."""


@dataclass(frozen=True, slots=True)
class IsrChangeNotification:
    """Children appeared under /isr_change_notification: refresh those partitions."""


@dataclass(frozen=True, slots=True)
class LogDirEventNotification:
    """Children appeared under /log_dir_event_notification: some broker's log directory
    failed (KIP-112); ask those brokers about every replica they hold."""


@dataclass(frozen=True, slots=True)
class AlterPartition:
    """A partition leader proposes new ISRs (KIP-497); the reply is partition → state or error."""

    broker_id: int
    broker_epoch: int
    proposals: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    reply: Reply = field(default=_no_reply, compare=False)


@dataclass(frozen=True, slots=True)
class ControlledShutdown:
    """A broker asks to shut down; the reply is the set of partitions it still leads."""

    broker_id: int
    broker_epoch: int
    reply: Reply = field(default=_no_reply, compare=False)


@dataclass(frozen=True, slots=True)
class LeaderAndIsrResponse:
    """A broker answered a LeaderAndIsr: partition → error code (0 = none)."""

    broker_id: int
    errors: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class StopReplicaResponse:
    """A broker answered a StopReplica(delete=true): partition → error code."""

    broker_id: int
    errors: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class Shutdown:
    """Stop the event thread after resigning."""


EVENTS = (Startup, ControllerChange, Reelect, Expire, BrokerChange, BrokerModification,
          TopicChange, TopicDeletion, PartitionModifications, TopicConfigChange,
          ReassignPartitions, PartitionReassignmentIsrChange, PreferredReplicaElection,
          ApiPartitionReassignment, ListPartitionReassignments,
          AutoPreferredReplicaElection, IsrChangeNotification, LogDirEventNotification,
          AlterPartition, ControlledShutdown, LeaderAndIsrResponse, StopReplicaResponse,
          Shutdown)
