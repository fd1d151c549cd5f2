"""InProcessCluster: real brokers (actors.broker.Broker) and a real controller in THIS process,
over a real ZooKeeper, with no Ray.

What it is:
- One controller candidate (controller.controller.Controller, id 100: rayka's controllers
  are not brokers) with its own ZooKeeper session; its requests reach the brokers through
  the product's `QueuedBrokerChannel` (one sender thread per broker) delivering by a
  direct call of `Broker.handle_controller_request`.
- Brokers on temp directories (the shared `config` with each one's `broker_configs` laid
  over it), each with its own ZooKeeper session and a `LocalHost`
  (listeners advertised on 127.0.0.1; the controller asked through
  actors.controller_actor.ControllerCalls). Replication runs over the brokers' real
  Kafka listeners, as in a Ray cluster.
- `cluster.api(b)` is broker b's `KafkaBrokerApi`, the object the Kafka handlers call.
- `create_topic` goes through that API (CreateTopics) and returns when every partition
  has a leader in the broker's metadata.
- `close()` stops the controller (no request reaches a closing broker), then shuts the
  brokers down (their stores too).
"""

from __future__ import annotations

import threading
import time
import uuid

from actors.broker import Broker
from actors.broker_config import broker_config_for, split_broker_config
from actors.channel import QueuedBrokerChannel
from actors.controller_actor import ControllerCalls
from controller.controller import Controller, ControllerConfig
from controller.zookeeper.store import ZkStore
from protocol.api import Deferred, TopicSpec

CONTROLLER_ID = 100


class NoSuchBroker(LookupError):
    """The controller addressed a broker that is not (or no longer) in this process."""


class LocalHost:
    """A broker's host in this process (actors.broker.BrokerHost)."""

    def __init__(self, cluster: "InProcessCluster", broker_id: int):
        self.cluster, self.broker_id = cluster, broker_id
        self.figures = None

    def node_ip(self) -> str:
        return "127.0.0.1"

    def node_id(self) -> str:
        return f"local-node-{self.broker_id}"

    def registration_name(self) -> str:
        return f"broker-{self.broker_id}"

    def was_restarted(self) -> bool:
        return False

    def ask_controller(self, controller_id: int, method: str, *args):
        if controller_id != CONTROLLER_ID or self.cluster.calls is None:
            raise ValueError(f"no controller {controller_id} in this process")
        return getattr(self.cluster.calls, method)(*args)

    def report_metrics(self, figures, stop: threading.Event) -> None:
        self.figures = figures          # read on demand by tests: no reporter thread

    def call_broker(self, broker_id: int, method: str, *args):
        broker = self.cluster.brokers.get(broker_id)
        if broker is None:
            raise LookupError(f"no broker {broker_id} in this process")
        return getattr(broker, method)(*args)


class InProcessCluster:
    def __init__(self, zk_connect: str, data_root, broker_ids=(1,), config: dict | None = None,
                 broker_configs: dict | None = None):
        self.name = f"inproc-{uuid.uuid4().hex[:8]}"
        self.zk_connect, self.data_root = zk_connect, data_root
        self.config = dict(config or {})
        self.broker_configs = dict(broker_configs or {})     # broker id → its own static keys
        self.brokers: dict[int, Broker] = {}
        self.calls = None
        for b in broker_ids:
            self.start_broker(b)
        store = ZkStore(zk_connect, self.name).start()
        self.controller = Controller(CONTROLLER_ID, store, None,
                                     lambda: int(time.monotonic() * 1000), ControllerConfig())
        # A broker's raise is retried, as a Ray call's RayTaskError is by RayBrokerChannel.
        self.channel = QueuedBrokerChannel(self.controller, self._deliver, (Exception,))
        self.controller.channel = self.channel
        self.calls = ControllerCalls(CONTROLLER_ID, self.controller)
        self.controller.start()
        self.wait_for(lambda: all(sorted(b.live_brokers()) == sorted(self.brokers)
                                  for b in self.brokers.values()),
                      30.0, "every broker's metadata to list every broker")

    def _deliver(self, broker_id: int, request) -> dict:
        broker = self.brokers.get(broker_id)
        if broker is None:
            raise NoSuchBroker(broker_id)
        return broker.handle_controller_request(request)

    def start_broker(self, broker_id: int) -> Broker:
        settings = split_broker_config(broker_config_for(self.config,
                                                         self.broker_configs.get(broker_id)))
        store = ZkStore(self.zk_connect, self.name,
                        session_timeout_s=settings.zk_session_timeout_ms / 1000).start()
        broker = Broker(broker_id, store, str(self.data_root / f"broker-{broker_id}"), settings,
                        LocalHost(self, broker_id))
        self.brokers[broker_id] = broker
        return broker

    def api(self, broker_id: int):
        return self.brokers[broker_id].kafka_api

    def bootstrap_servers(self) -> str:
        """Every broker's first listener, for a Kafka client."""
        return ",".join(f"127.0.0.1:{b.listeners[0].port}" for _, b in sorted(self.brokers.items()))

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     configs: dict | None = None, via: int | None = None,
                     timeout_s: float = 30.0) -> None:
        via = min(self.brokers) if via is None else via
        spec = TopicSpec(name, partitions, replication_factor, {}, dict(configs or {}))
        outcome = self.api(via).create_topics([spec], int(timeout_s * 1000), False)[name]
        assert outcome.error == 0, outcome
        self.wait_for(lambda: all(
            self.brokers[via].rm.metadata.partitions.get((name, p)) is not None
            and self.brokers[via].rm.metadata.partitions[(name, p)].leader >= 0
            for p in range(partitions)), timeout_s, f"leaders of {name}")

    @staticmethod
    def wait_for(predicate, timeout_s: float, what: str):
        deadline = time.monotonic() + timeout_s
        while True:
            got = predicate()
            if got:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
            time.sleep(0.02)      # poll interval of a deadline loop

    def close(self) -> None:
        self.controller.shutdown()
        self.channel.stop()
        self.controller.store.close()
        for broker in list(self.brokers.values()):
            broker.shutdown()
        self.brokers.clear()


def running(cluster: InProcessCluster):
    """A fixture's body: `yield from running(InProcessCluster(...))` gives the cluster and
    closes it afterwards."""
    try:
        yield cluster
    finally:
        cluster.close()


def settled(value):
    """The value of an api answer that may be a Deferred (the real broker's produce)."""
    return value.result() if isinstance(value, Deferred) else value
