"""What the controller's logic needs from its store, and the store's outcomes (no kazoo).

Rules:
- The pure controller (state machines, elections, event handlers) talks to ZooKeeper only
  through `ControllerStore`; the real implementation is `controller.zookeeper.store` (fenced by
  the controller epoch), the unit tests use an in-memory store (tests/fakes.py).
- Batch operations answer per item: a value, or one of the outcome exceptions below as a
  VALUE (not raised), as Kafka's `updateLeaderAndIsr` does.
- Log dir event notices (KIP-112) are their own small protocols: `LogDirEventNotices`
  (a broker writes one, the controller lists, reads and watches them) and
  `LogDirEventNoticeWriter` (the controller's fenced delete).
- `ControllerMovedError` is always RAISED: a failed epoch check means another controller
  exists, nothing of that write landed, and this controller must resign at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Protocol

from controller.layout import LeaderIsrAndControllerEpoch, TopicPartition


class ZkStoreError(Exception):
    """Base of the store's own errors (picklable: all state is in ``args``)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else type(self).__name__


class ZkUnavailable(ZkStoreError):
    """ZooKeeper unreachable, connection lost mid-call, no connection for the session
    timeout while the call waited, or session closed/expired."""


class ControllerMovedError(ZkStoreError):
    """Another controller holds (or won) the election: this one must resign at once."""

    def __init__(self, message: str = "controller moved", controller_id: int | None = None):
        super().__init__(message, controller_id)

    @property
    def controller_id(self) -> int | None:
        return self.args[1]


class PathError(ZkStoreError):
    def __init__(self, path: str = ""):
        super().__init__(path)

    @property
    def path(self) -> str:
        return self.args[0]

    def __str__(self) -> str:
        return f"{type(self).__name__}: {self.path}"


class NodeExists(PathError):
    """The znode already exists."""


class NoNode(PathError):
    """The znode (or a parent) does not exist."""


class BadVersion(PathError):
    """The znode's version is not the expected one (a conditional write lost a race)."""


class NotEmpty(PathError):
    """The znode still has children."""


class BrokerIdInUse(ZkStoreError):
    """``/brokers/ids/<id>`` stayed held by another session past the wait deadline."""


class AdminOperationInProgress(ZkStoreError):
    """A reassignment / preferred election request znode already exists."""


@dataclass(frozen=True)
class ControllerElection:
    """A won election: fence later writes with ``epoch_zk_version`` (the /controller_epoch
    znode version written by the election multi)."""

    epoch: int
    epoch_zk_version: int
    controller_id: int
    session_id: int | None = None


class ControllerStore(Protocol):
    """The fenced partition-state operations the state machines perform."""

    def create_partition_states(self, topic: str,
                                states: Mapping[int, LeaderIsrAndControllerEpoch]
                                ) -> dict[int, LeaderIsrAndControllerEpoch | ZkStoreError]: ...

    def update_partition_states(
            self, updates: Mapping[TopicPartition, tuple[LeaderIsrAndControllerEpoch, int]]
    ) -> dict[TopicPartition, int | ZkStoreError]: ...

    def get_partition_state(self, topic: str, partition: int
                            ) -> LeaderIsrAndControllerEpoch | None: ...


class LogDirEventNotices(Protocol):
    """/log_dir_event_notification (Kafka's LogDirEventNotificationZNode)."""

    def propagate_log_dir_event(self, broker_id: int) -> str: ...

    def get_log_dir_event_notifications(self) -> list[str]: ...

    def read_log_dir_event_notifications(self, names: Iterable[str]) -> list[int]: ...

    def watch_log_dir_event_notifications(self, callback: Callable[[list[str]], None]
                                          ) -> Any: ...


class LogDirEventNoticeWriter(Protocol):
    """The fenced half: only the active controller deletes notices."""

    def delete_log_dir_event_notifications(self, names: Iterable[str]) -> int: ...
