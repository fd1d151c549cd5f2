"""BrokerActor: a Broker (actors/broker.py) as a detached Ray actor, and the Ray side of its host.

Rules:
- The actor is the thin shell: it opens the broker's ZooKeeper session, builds a `Broker`
  with a `RayBrokerHost` and adds nothing else but Ray's options and what belongs to its
  process (the collector's pauses, actors/gc_pauses.py).
- Separate thread pools (Ray concurrency groups): waiting acks=all produces and long-polls
  must never take every thread while the follower fetches and controller requests that
  would release them queue up (seen at 3,000 partitions). `METHOD_GROUPS` names each
  remote method's pool; the rest share the default one.
- Ray restarts a dead broker (max_restarts=-1) by running __init__ again: the restarted
  incarnation recovers its logs and takes its dead registration over (the host says it
  was restarted).
- The host finds peers and controllers by their actor names in the cluster's namespace
  (actors/cluster_host.py), and calls a controller with a 30 s timeout.
- The broker's own calls to its methods go straight to them (`untraced`): Ray wraps every
  method of an actor class, the inherited Broker ones too, in its tracing shim
  (ray/util/tracing/tracing_helper.py `_inject_tracing_into_class`, in the driver and again
  when the worker loads the class). The shim does nothing without the trace context only
  Ray's remote calls carry, yet costs each call a frame, a keyword packing and a flag
  check (0.12-0.32 µs warm against 0.04), several times per request (apply_effects,
  fetch_begin, ...). Ray's executor keeps the wrapped functions it collected when it
  loaded the class, so remote calls keep their tracing.
"""

from __future__ import annotations

import functools
import logging

import ray

from actors import gc_pauses, metrics
from actors.broker import Broker
from actors.broker_config import split_broker_config
from actors.cluster_host import (broker_actor_name, controller_actor_name, normal_priority,
                                 was_restarted)
from controller.zookeeper.store import ZkStore

CONTROLLER_CALL_TIMEOUT_S = 30
BROKER_CALL_TIMEOUT_S = 10.0

METHOD_GROUPS = {
    "produce": "produce", "produce_many": "produce", "produce_batches": "produce",
    "delete_records": "produce",        # waits for the followers, as an acks=all produce
    "fetch_many": "fetch", "offsets_for_leader_epoch": "fetch",
    "group": "group", "find_coordinator": "group", "txn": "group", "share_group": "group", "share_state": "group",
    "share_describe": "group",
    "share_fetch": "fetch", "share_acknowledge": "fetch",
    "list_offsets": "control", "write_txn_markers": "control",
    "handle_controller_request": "control", "cut_replication": "control",
    "controlled_shutdown": "control", "shutdown": "control",
}


class RayBrokerHost:
    """A broker's host inside a Ray actor of the cluster's namespace."""

    def __init__(self, broker_id: int, cluster: str, namespace: str, metrics_interval_s: float):
        self.broker_id, self.cluster, self.namespace = broker_id, cluster, namespace
        self.metrics_interval_s = metrics_interval_s

    def node_ip(self) -> str:
        return ray.util.get_node_ip_address()

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def registration_name(self) -> str:
        return broker_actor_name(self.broker_id)

    def was_restarted(self) -> bool:
        return was_restarted()

    def ask_controller(self, controller_id: int, method: str, *args):
        controller = ray.get_actor(controller_actor_name(controller_id), namespace=self.namespace)
        return ray.get(getattr(controller, method).remote(*args),
                       timeout=CONTROLLER_CALL_TIMEOUT_S)

    def call_broker(self, broker_id: int, method: str, *args):
        try:
            peer = ray.get_actor(broker_actor_name(broker_id), namespace=self.namespace)
        except ValueError as exc:
            raise LookupError(f"no broker {broker_id}: {exc}") from None
        return ray.get(getattr(peer, method).remote(*args), timeout=BROKER_CALL_TIMEOUT_S)

    def report_metrics(self, figures, stop) -> None:
        metrics.Reporter(figures, metrics.broker_gauges(self.cluster, self.broker_id),
                         self.metrics_interval_s, stop, name="broker-metrics")


class BrokerActor(Broker):
    def __init__(self, broker_id: int, cluster: str, zookeeper: str, namespace: str,
                 data_dir: str, config: dict | None = None):
        logging.basicConfig(level=logging.INFO)
        logging.getLogger("kazoo").setLevel(logging.WARNING)
        untraced(type(self))
        normal_priority()
        gc_pauses.install()
        settings = split_broker_config(config)
        store = ZkStore(zookeeper, cluster, session_timeout_s=settings.zk_session_timeout_ms / 1000,
                        auth=settings.security.zookeeper_auth).start()
        super().__init__(broker_id, store, data_dir, settings,
                         RayBrokerHost(broker_id, cluster, namespace, settings.metrics_interval_s))

    def gc_pauses(self, since_s: float, until_s: float) -> list[tuple[float, float, str]]:
        """The cyclic collector's pauses of this actor's process that began between two
        wall times (actors/gc_pauses.py): (wall time s, ms, "gen N")."""
        return gc_pauses.between(since_s, until_s)


def untraced(cls) -> None:
    """Put back, on `cls` itself, each method Ray's tracing shim wrapped (module rules)."""
    for name, value in list(vars(cls).items()):
        if getattr(value, "__ray_tracing_wrapped__", False):
            setattr(cls, name, value.__wrapped__)


def _in_group(method, group: str):
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        return method(self, *args, **kwargs)
    return ray.method(concurrency_group=group)(call)


for _name, _group in METHOD_GROUPS.items():
    setattr(BrokerActor, _name, _in_group(getattr(Broker, _name), _group))

BrokerActor = ray.remote(max_restarts=-1, max_task_retries=0, max_concurrency=16, num_cpus=0,
                         concurrency_groups={"produce": 64, "fetch": 32, "control": 4,
                                             "group": 64})(BrokerActor)
