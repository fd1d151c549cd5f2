"""ControllerActor: one controller candidate as a Ray actor (the shell around controller/).

Rules:
- One candidate per actor, each with its OWN ZooKeeper session (ZkStore); the candidates
  race through the ZooKeeper election, never through Ray. Ray restarts a killed candidate
  (max_restarts=-1), which simply becomes a candidate again; if the dead incarnation was
  the active controller, the new one deletes its /controller (owned by the dead session)
  first, so the election does not wait out that session's timeout.
- Threaded actor: calls that wait for the controller's answer (AlterPartition, controlled
  shutdown, preferred elections) block only their own thread; the controller's event
  thread does the work, in order. `ControllerCalls` holds them without Ray (the
  in-process clusters of the tests call a controller through it too).
- Requests to brokers leave through RayBrokerChannel (per-broker sender threads).
- Answers that carry typed errors are returned as values (picklable KafkaError objects),
  per partition for batch calls.
- The controller's journal (controller/journal.py) is read with `journal(after_seq)`; its
  times are the wall clock, its seqs start at the wall clock's ms × 1000 so that a
  restarted candidate's seqs stay above its previous incarnation's.
- Ray metrics (actors/metrics.py): a daemon thread publishes `metrics()` every
  `metrics_interval_s` (config key, default 5 s) until shutdown.
"""

from __future__ import annotations

import logging
import threading
import time

import ray

from actors import metrics
from actors.channel import RayBrokerChannel
from actors.cluster_host import normal_priority, was_restarted
from controller import events as ev
from controller.controller import Controller, ControllerConfig
from controller.journal import Journal
from controller.zookeeper.store import ZkStore
from replicas.errors import NotController, RequestTimedOut

log = logging.getLogger(__name__)


def _clock_ms() -> int:
    return int(time.monotonic() * 1000)


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class ControllerCalls:
    """The calls brokers and admins make on a controller, each answered by its event thread
    (a NotController or RequestTimedOut value when it cannot answer)."""

    def __init__(self, controller_id: int, controller: Controller):
        self.id, self.controller = controller_id, controller

    def ask(self, make_event, timeout_s: float = 30.0):
        if not self.controller.is_active:
            return NotController(f"controller {self.id} is not the active controller")
        done, box = threading.Event(), {}

        def reply(result):
            box["r"] = result
            done.set()
        self.controller.loop.put(make_event(reply))
        if not done.wait(timeout_s):
            return RequestTimedOut(f"controller {self.id} did not answer within {timeout_s} s")
        return box["r"]

    def alter_partition(self, broker_id: int, broker_epoch: int, proposals: dict):
        return self.ask(lambda reply: ev.AlterPartition(broker_id, broker_epoch, proposals,
                                                        reply=reply))

    def controlled_shutdown(self, broker_id: int, broker_epoch: int):
        return self.ask(lambda reply: ev.ControlledShutdown(broker_id, broker_epoch, reply=reply))

    def elect_preferred_leaders(self, partitions):
        return self.ask(lambda reply: ev.PreferredReplicaElection(
            frozenset(tuple(p) for p in partitions), reply=reply))

    def elect_leaders(self, partitions, election_type: int = 0):
        """ElectLeaders: 0 preferred, 1 unclean; partition → new state or a KafkaError."""
        return self.ask(lambda reply: ev.PreferredReplicaElection(
            frozenset(tuple(p) for p in partitions), reply=reply, election_type=election_type))

    def alter_partition_reassignments(self, targets: dict):
        """KIP-455: partition → target replicas or None (cancel); partition → KafkaError|None."""
        return self.ask(lambda reply: ev.ApiPartitionReassignment(
            {tuple(tp): None if r is None else tuple(r) for tp, r in targets.items()},
            reply=reply))

    def list_partition_reassignments(self, partitions=None):
        """partition → (replicas, adding, removing) of the reassignments in progress."""
        answer = self.ask(lambda reply: ev.ListPartitionReassignments(
            None if partitions is None else frozenset(tuple(p) for p in partitions),
            reply=reply))
        if isinstance(answer, Exception):
            return answer
        return {tuple(tp): (a.replicas, a.adding, a.removing) for tp, a in answer.items()}


@ray.remote(max_restarts=-1, max_task_retries=0, max_concurrency=32, num_cpus=0)
class ControllerActor:
    def __init__(self, controller_id: int, cluster: str, zookeeper: str, namespace: str,
                 zk_session_timeout_ms: int = 3000, config: dict | None = None):
        logging.basicConfig(level=logging.INFO)
        logging.getLogger("kazoo").setLevel(logging.WARNING)
        normal_priority()
        self.id = controller_id
        config = dict(config or {})
        metrics_interval_s = float(config.pop("metrics_interval_s", metrics.DEFAULT_INTERVAL_S))
        self.store = ZkStore(zookeeper, cluster, session_timeout_s=zk_session_timeout_ms / 1000,
                             auth=config.pop("zookeeper_auth", None)).start()
        if was_restarted() and \
                self.store.delete_dead_incarnation_controller(controller_id):
            log.info("controller %s: deleted /controller of its dead incarnation", controller_id)
        # seqs from the wall clock: a restarted incarnation's journal continues above the
        # last one's, so a reader's "after this seq" stays meaningful across restarts
        self.controller = Controller(controller_id, self.store, None, _clock_ms,
                                     ControllerConfig.parse(config), wall_clock_ms=_wall_clock_ms,
                                     journal=Journal(first_seq=_wall_clock_ms() * 1000 + 1))
        self.channel = RayBrokerChannel(namespace, self.controller)
        self.controller.channel = self.channel
        self.calls = ControllerCalls(controller_id, self.controller)
        self.controller.start()
        self._metrics_stop = threading.Event()
        metrics.Reporter(self.metrics, metrics.controller_gauges(cluster, controller_id),
                         metrics_interval_s, self._metrics_stop, name="controller-metrics")

    # -- queries ---------------------------------------------------------------------------------
    def info(self) -> dict:
        c = self.controller
        return {"id": self.id, "active": c.is_active, "epoch": c.ctx.epoch if c.is_active else None,
                "active_controller_id": c.active_controller_id,
                "failovers_completed": c.failovers_completed}

    def pid(self) -> int:
        import os
        return os.getpid()

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def zk_session(self) -> tuple[int, bytes]:
        """(session id, password) of this candidate's ZooKeeper session (fault injection)."""
        return self.store.session_credentials()

    def status(self) -> dict:
        """Health figures of the active controller (`rayka status`, Ray metrics)."""
        c = self.controller
        if not c.is_active:
            return {"active": False}
        ctx = c.ctx
        return {"active": True, "epoch": ctx.epoch, "live_brokers": sorted(ctx.live_brokers),
                "shutting_down": sorted(ctx.shutting_down),
                "partitions": len(ctx.all_partitions()),
                "offline_partitions": ctx.offline_partition_count(),
                "under_replicated_partitions": len(ctx.under_replicated()),
                "topics_to_delete": sorted(ctx.topics_to_delete),
                "reassigning": sorted(map(tuple, c.reassignment.in_progress))}

    def journal(self, after_seq: int = 0, limit: int = 5000) -> dict:
        """This candidate's journal entries after `after_seq` (controller/journal.py), at
        most `limit`, with whether it is the active controller now; `last_seq` is the
        newest entry's seq (below `after_seq`: a reader asked a journal it never saw)."""
        c = self.controller
        active = c.is_active
        return {"controller_id": self.id, "active": active,
                "epoch": c.ctx.epoch if active else None,
                "last_seq": c.journal.last_seq,
                "entries": c.journal.entries(after_seq, limit)}

    def metrics(self) -> dict:
        """The figures this candidate publishes as Ray gauges (actors/metrics.py)."""
        return metrics.controller_figures(self.status())

    # -- requests that wait for the controller ------------------------------------------------------
    def alter_partition(self, broker_id: int, broker_epoch: int, proposals: dict):
        return self.calls.alter_partition(broker_id, broker_epoch, proposals)

    def controlled_shutdown(self, broker_id: int, broker_epoch: int):
        return self.calls.controlled_shutdown(broker_id, broker_epoch)

    def elect_preferred_leaders(self, partitions):
        return self.calls.elect_preferred_leaders(partitions)

    def shutdown(self) -> None:
        self._metrics_stop.set()
        self.controller.shutdown()
        self.channel.stop()
        self.store.close()

    def elect_leaders(self, partitions, election_type: int = 0):
        return self.calls.elect_leaders(partitions, election_type)

    def alter_partition_reassignments(self, targets: dict):
        return self.calls.alter_partition_reassignments(targets)

    def list_partition_reassignments(self, partitions=None):
        return self.calls.list_partition_reassignments(partitions)
