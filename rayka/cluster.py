"""The driver's entry points: `start_local`, `connect` and `Cluster`.

Rules:
- A cluster is named; its actors live in the Ray namespace `rayka-<name>`: the ClusterHost
  `rayka-cluster` (facts, embedded ZooKeeper), controllers `controller-<id>` (ids 1001..),
  brokers `broker-<id>` (ids 1..). All detached, so the cluster outlives the driver that
  started it; `connect(name)` re-attaches from any driver.
- `start_local` starts the embedded ZooKeeper when none is given, starts Ray when it is not
  initialised (`ensure_ray`), and starts (or re-attaches to) the named cluster; on a running
  cluster a larger `brokers` ADDS brokers (scale out; never removes any); it returns
  once every broker is registered in ZooKeeper and one controller is active. A given
  ZooKeeper that cannot be reached fails within `zk_connect_timeout_s` with ZkUnavailable
  naming the address, before any actor is created.
- Keyword config: ControllerConfig field names go to the controllers, the rest to the
  brokers (e.g. min_insync_replicas, replica_lag_time_max_ms, zk_session_timeout_ms);
  `metrics_interval_s` (Ray gauges' refresh, actors/metrics.py) and `zookeeper_auth`
  ("user:password": every rayka ZooKeeper session authenticates with it and creates the
  cluster's znodes writable by it alone, controller/zookeeper/client.py) go to both and to
  the driver's own session.
- Per-broker static config: `broker_configs={broker_id: {"broker.rack": "r1", ...}}` is laid
  over the cluster-wide keyword config for that broker alone (Kafka's static configs are
  per broker: broker.rack above all). Kept in the cluster's facts; given again to a
  running cluster it is merged in and reaches a broker at its next start (a new broker,
  a restart), as a changed server.properties does in Kafka.
- Placement: `broker_resources` (e.g. {"rayka_broker": 1} with one unit per node: one
  broker per node) and `control_resources` (controllers and the ClusterHost) are Ray
  custom resources every incarnation asks for, restarts included.
- Leadership is read from ZooKeeper (the truth), never from Ray's actor table.
- Ray (`ensure_ray`): a given address, else RAY_ADDRESS, else a FRESH local instance with
  Ray's dashboard on (127.0.0.1, 8265 or the next free port; `include_dashboard=False` opts
  out). Never the head recorded in Ray's `ray_current_cluster` file unless asked ("auto"): a
  killed `ray start` or test run leaves it naming a dead address, and a plain `ray.init()`
  then waits on it for minutes. A non-local address is probed first and fails fast with
  RayUnavailable naming it. `connect(name)` finds the Ray that `rayka start --name <name>`
  used (its state file, rayka/cluster_state.py), else "auto" (the recorded head), probed too.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import tempfile
import time

import ray

from actors.broker_config import broker_config_for, replication_refusal, split_broker_config
from actors.cluster_host import (HOST_NAME, ClusterHost, broker_actor_name,
                                 controller_actor_name, namespace_for)
from controller.controller import ControllerConfig
from controller.store_api import ZkUnavailable
from controller.zookeeper.store import ZkStore
from rayka.client.admin import Admin, wait_for
from rayka.client.types import BrokerInfo, ControllerInfo
from rayka.cluster_state import load_state, ray_address_file, ray_auth_env, use_ray_auth
from rayka.errors import RayUnavailable
from replicas.config_keys import underscored_key
from replicas.errors import BrokerNotAvailable, NotController

log = logging.getLogger(__name__)
CONTROLLER_ID_BASE = 1000
_CONTROLLER_KEYS = {f.name for f in dataclasses.fields(ControllerConfig)}
_SHARED_KEYS = {"metrics_interval_s", "zookeeper_auth"}


RAY_PROBE_TIMEOUT_S = 5.0


def _recorded_head() -> str:
    try:
        with open(ray_address_file()) as f:
            recorded = f.read().strip()
    except FileNotFoundError:
        recorded = ""
    if not recorded:
        raise RayUnavailable(f"no Ray cluster recorded in {ray_address_file()} (address 'auto'); "
                             "give an address, or start Ray")
    return recorded


H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_SETTINGS = 0x4


def _probe(address: str, source: str) -> None:
    """Fail fast when no Ray GCS answers at `address` (ray.init would wait for minutes):
    nothing listens there, or what listens does not speak HTTP/2, which a GCS (a gRPC
    server) does: it answers a client's connection preface with a SETTINGS frame (RFC 9113
    §3.4). A stale record may name a port another program took since. With Ray's TLS on
    (RAY_USE_TLS) the handshake comes first, and only the connection is checked."""
    hostport = address.split("://", 1)[-1].rsplit("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), RAY_PROBE_TIMEOUT_S) as s:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return
            s.sendall(H2_PREFACE)
            header = _read_exactly(s, 9)
    except (OSError, ValueError) as exc:
        raise RayUnavailable(f"Ray at {address} ({source}) does not answer: "
                             f"{getattr(exc, 'strerror', None) or exc}") from None
    if len(header) < 9 or header[3] != H2_SETTINGS:
        raise RayUnavailable(f"Ray at {address} ({source}) does not answer: what listens "
                             f"there is not a Ray GCS (no HTTP/2 answer)")


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    """Up to `n` bytes; fewer when the peer closed first (socket timeouts raise)."""
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


_ray_context = None     # what ray.init answered in this process (its dashboard URL)


def dashboard_url() -> str | None:
    """The Ray dashboard's URL of the cluster this process joined through ensure_ray."""
    url = getattr(_ray_context, "dashboard_url", None) if ray.is_initialized() else None
    return (url if "://" in url else f"http://{url}") if url else None


_STATE_API_ENV = "RAY_API_SERVER_ADDRESS"
_state_api_set_by_us = False


def _point_state_api(url: str | None) -> None:
    """Ray's state API (`ray.util.state.list_actors()`, job submission) resolves its server from
    RAY_API_SERVER_ADDRESS, else from the recorded head or a `ps` scan, which is wrong (or
    hangs) with a stale record or several Ray instances on the machine. Point it at the local
    instance this process started, unless the user set it."""
    global _state_api_set_by_us
    if os.environ.get(_STATE_API_ENV) and not _state_api_set_by_us:
        return
    if url:
        os.environ[_STATE_API_ENV] = url
        _state_api_set_by_us = True
    elif _state_api_set_by_us:
        os.environ.pop(_STATE_API_ENV, None)
        _state_api_set_by_us = False


def ensure_ray(address: str | None = None, *, include_dashboard: bool = True,
               logging_level: str = "WARNING", **init_kw) -> bool:
    """Initialise Ray in this process unless it already is; True when this call did.
    `address`: None → RAY_ADDRESS, else "local" (a fresh instance, with the dashboard
    unless `include_dashboard=False`); "auto" → the head recorded by `ray start`; an
    address → that cluster. Anything but "local" is probed first (RayUnavailable)."""
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or "local"
    global _ray_context
    if address == "local":
        _ray_context = ray.init(address="local", include_dashboard=include_dashboard,
                                logging_level=logging_level, **init_kw)
        _point_state_api(dashboard_url())
        return True
    source = "given"
    if address == "auto":
        address, source = _recorded_head(), f"recorded in {ray_address_file()}"
    elif os.environ.get("RAY_ADDRESS") == address:
        source = "RAY_ADDRESS"
    if not address.startswith("ray://"):
        _probe(address, source)
    try:
        _ray_context = ray.init(address=address, logging_level=logging_level, **init_kw)
    except ConnectionError as exc:
        raise RayUnavailable(f"cannot reach Ray at {address} ({source}): {exc}") from None
    return True


def use_head_token(state) -> None:
    """Join `state`'s private head (`rayka start`) with its own token (rayka/cluster_state.py);
    nothing for a Ray rayka does not own. Ray reads RAY_AUTH_MODE and the token once and
    caches both (Ray 2.60's Config and AuthenticationTokenLoader), so both are read again."""
    if not ray_auth_env(state) or ray.is_initialized():
        return
    use_ray_auth(state)
    from ray._raylet import AuthenticationTokenLoader, Config
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


ACTOR_RESTART_POLL_S = 0.2


def _stop_actor(actor, deadline: float) -> None:
    """Ask `actor` to shut down (flush, leave ZooKeeper) before `deadline` (monotonic); an
    actor Ray is restarting is asked again once it is back, one that died for good has
    nothing left to stop."""
    while True:
        try:
            ray.get(actor.shutdown.remote(), timeout=max(0.0, deadline - time.monotonic()))
            return
        except ray.exceptions.ActorDiedError:
            return
        except ray.exceptions.ActorUnavailableError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(ACTOR_RESTART_POLL_S)


def _split_config(config: dict) -> tuple[dict, dict]:
    """(the controllers' keys by field name, the brokers' keys as given)."""
    controller, broker = {}, {}
    for key, value in config.items():
        name = underscored_key(key)
        if name in _CONTROLLER_KEYS | _SHARED_KEYS:
            controller[name] = value
        if name not in _CONTROLLER_KEYS:
            broker[key] = value
    return controller, broker


def _broker_settings(config: dict, per_broker: dict, ids) -> list:
    """Each broker's settings (actors/broker_config.py): the cluster-wide keyword config with
    its own static keys laid over it; InvalidConfig for one that does not parse."""
    broker_cfg = _split_config(config)[1]
    return [split_broker_config(broker_config_for(broker_cfg, per_broker.get(b))) for b in ids]


def start_local(name: str = "default", brokers: int = 3, controllers: int = 2,
                zookeeper: str | None = None, data_dir: str | None = None,
                start_timeout_s: float = 60.0, zk_connect_timeout_s: float = 10.0,
                broker_resources: dict | None = None, control_resources: dict | None = None,
                ray_address: str | None = None, include_dashboard: bool = True,
                broker_configs: dict | None = None, console: bool = False,
                console_port: int = 0, console_args=(), **config) -> "Cluster":
    per_broker = {int(b): dict(c) for b, c in (broker_configs or {}).items()}
    ControllerConfig.parse(_split_config(config)[0])    # InvalidConfig before any actor
    _broker_settings(config, per_broker, set(range(1, brokers + 1)) | set(per_broker))
    ensure_ray(ray_address, include_dashboard=include_dashboard)
    ns = namespace_for(name)
    try:
        host = ray.get_actor(HOST_NAME, namespace=ns)
    except ValueError:
        if zookeeper is not None:      # fail fast, with the address, before any actor exists
            ZkStore(zookeeper, name, connection_timeout_s=zk_connect_timeout_s,
                    auth=config.get("zookeeper_auth")).start().close()
        facts = {"name": name, "brokers": list(range(1, brokers + 1)),
                 "controllers": [CONTROLLER_ID_BASE + i + 1 for i in range(controllers)],
                 "data_dir": data_dir or tempfile.mkdtemp(prefix=f"rayka-{name}-"),
                 "config": dict(config), "broker_configs": per_broker,
                 "broker_resources": dict(broker_resources or {}),
                 "control_resources": dict(control_resources or {})}
        host = ClusterHost.options(name=HOST_NAME, namespace=ns, lifetime="detached",
                                   resources=facts["control_resources"]).remote(facts, zookeeper)
    try:
        facts = ray.get(host.info.remote())
    except ray.exceptions.RayTaskError as exc:   # e.g. the embedded ZooKeeper did not start
        ray.kill(host, no_restart=True)
        raise exc.cause from None
    kept = facts.get("broker_configs", {})
    merged = {**kept, **{b: {**kept.get(b, {}), **c} for b, c in per_broker.items()}}
    if merged != kept:
        facts = ray.get(host.update.remote(broker_configs=merged))
    if brokers > len(facts["brokers"]):        # scale out: brokers are only ever added
        facts = ray.get(host.update.remote(brokers=sorted(
            set(facts["brokers"]) | set(range(1, brokers + 1)))))
    cluster = Cluster(name, facts)
    cluster.ensure_actors()
    cluster.wait_ready(start_timeout_s)
    for warning in cluster.replication_warnings():
        log.warning(warning)
    if console:
        from rayka.console_process import start_console
        cluster.console = start_console(name, ray.get_runtime_context().gcs_address,
                                        port=console_port, extra_args=tuple(console_args))
        log.info("rayka console: %s", cluster.console.url)
    return cluster


def connect(name: str = "default", zookeeper: str | None = None,
            ray_address: str | None = None) -> "Cluster":
    """Attach to the named cluster: in `ray_address`, else RAY_ADDRESS, else the Ray that
    `rayka start --name <name>` recorded (rayka/cluster_state.py), else the head Ray
    recorded last ("auto")."""
    state = load_state(name)
    if not (ray_address or os.environ.get("RAY_ADDRESS")) and state is not None:
        ray_address = state.ray_address
    if state is not None and ray_address == state.ray_address:
        use_head_token(state)
    ensure_ray(ray_address or os.environ.get("RAY_ADDRESS") or "auto")
    try:
        host = ray.get_actor(HOST_NAME, namespace=namespace_for(name))
    except ValueError:
        raise NotController(f"no rayka cluster named {name!r} in this Ray cluster") from None
    facts = ray.get(host.info.remote())
    if zookeeper is not None:
        facts["zookeeper"] = zookeeper
    return Cluster(name, facts)


class Cluster:
    def __init__(self, name: str, facts: dict):
        self.name = name
        self.facts = facts
        self.namespace = namespace_for(name)
        self.zookeeper = facts["zookeeper"]
        self.store = ZkStore(self.zookeeper, name,
                             auth=facts.get("config", {}).get("zookeeper_auth")).start()
        self.console = None          # rayka/console_process.py, with start_local(console=True)

    # -- actors -------------------------------------------------------------------------------------
    def _actor(self, actor_name: str):
        try:
            return ray.get_actor(actor_name, namespace=self.namespace)
        except ValueError:
            return None

    def broker_actor(self, broker_id: int):
        return self._actor(broker_actor_name(broker_id))

    def broker_actors(self, ids=None) -> list:
        ids = self.facts["brokers"] if ids is None else ids
        return [a for a in (self.broker_actor(b) for b in sorted(ids)) if a is not None]

    def controller_actor(self, controller_id: int):
        return self._actor(controller_actor_name(controller_id))

    def active_controller_actor(self):
        cid = self.store.get_controller()
        actor = self.controller_actor(cid) if cid is not None else None
        if actor is None:
            raise NotController("no active controller")
        return actor

    def ensure_actors(self) -> None:
        """Create the controllers and brokers that do not exist (Ray restarts dead ones)."""
        from actors.broker_actor import BrokerActor
        from actors.controller_actor import ControllerActor
        controller_cfg, broker_cfg = _split_config(self.facts.get("config", {}))
        session_ms = broker_cfg.get("zk_session_timeout_ms", 3000)
        for cid in self.facts["controllers"]:
            if self.controller_actor(cid) is None:
                ControllerActor.options(name=controller_actor_name(cid), namespace=self.namespace,
                                        lifetime="detached",
                                        resources=self.facts.get("control_resources", {})).remote(
                    cid, self.name, self.zookeeper, self.namespace, session_ms, controller_cfg)
        for b in self.facts["brokers"]:
            if self.broker_actor(b) is None:
                BrokerActor.options(name=broker_actor_name(b), namespace=self.namespace,
                                    lifetime="detached",
                                    resources=self.facts.get("broker_resources", {})).remote(
                    b, self.name, self.zookeeper, self.namespace,
                    os.path.join(self.facts["data_dir"], f"broker-{b}"),
                    broker_config_for(broker_cfg, self.facts.get("broker_configs", {}).get(b)))

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Every broker registered, a controller elected, and every broker's metadata cache
        listing every broker (so a Kafka client's first Metadata answer is complete)."""
        want = set(self.facts["brokers"])

        def registered():
            try:
                return want <= self.store.get_broker_ids() and self.store.get_controller()
            except ZkUnavailable:      # a dropped connection: kazoo reconnects in the session
                return False
        wait_for(registered, timeout_s, f"brokers {sorted(want)} registered and a controller "
                 "elected")

        def caches_complete():
            try:
                return all(want <= set(live) for live in ray.get(
                    [b.live_brokers.remote() for b in self.broker_actors(want)], timeout=10))
            except ray.exceptions.RayError:
                return False
        wait_for(caches_complete, timeout_s, "every broker's metadata listing every broker")

    # -- the public API -----------------------------------------------------------------------------
    def admin(self) -> Admin:
        return Admin(self)

    def producer(self, **kw):
        from rayka.client.producer import Producer
        return Producer(self, **kw)

    def consumer(self, group_id: str | None = None, **kw):
        from rayka.client.consumer import Consumer
        return Consumer(self, group_id=group_id, **kw)

    def share_consumer(self, group_id: str, **kw):
        """A member of share group `group_id` (KIP-932): rayka/client/share_consumer.py."""
        from rayka.client.share_consumer import ShareConsumer
        return ShareConsumer(self, group_id, **kw)

    def share_workers(self, group_id: str, topics, process, workers: int, **kw):
        """`workers` Ray actors as share group `group_id` over `topics`, each running
        process(record) -> "accept" | "release" | "reject" (rayka/share_workers.py)."""
        from rayka.share_workers import ShareWorkers
        return ShareWorkers(self, group_id, topics, process, workers, **kw)

    def controller(self) -> ControllerInfo:
        return self.admin().controller()

    def brokers(self) -> list[BrokerInfo]:
        registered = self.store.get_brokers()
        return [BrokerInfo(b, registered[b].node_id if b in registered else None, b in registered,
                           tuple(e.url() for e in registered[b].endpoints) if b in registered
                           else ()) for b in self.facts["brokers"]]

    def replication_warnings(self) -> list[str]:
        """One line per distinct broker config whose followers an authorizer will refuse
        (actors/broker_config.py replication_refusal), against the cluster's ACLs now."""
        from actors.security_store import read_bindings
        settings = _broker_settings(self.facts.get("config", {}),
                                    self.facts.get("broker_configs", {}), self.facts["brokers"])
        if not any(s.security.authorizer for s in settings):
            return []
        bindings = read_bindings(self.store)
        return sorted({w for s in settings if (w := replication_refusal(s, bindings))})

    def _ask_live_brokers(self, method: str, timeout_s: float, *args) -> dict[int, object]:
        """Live broker id → its answer to `method` (a broker restarting answers next time)."""
        live = [b.id for b in self.brokers() if b.alive]
        refs = {b: getattr(a, method).remote(*args)
                for b in live if (a := self.broker_actor(b)) is not None}
        out = {}
        for b, ref in refs.items():
            try:
                out[b] = ray.get(ref, timeout=timeout_s)
            except ray.exceptions.RayError:
                pass
        return out

    def replication_problems(self, timeout_s: float = 10.0) -> dict[int, dict]:
        """Live broker id → what keeps its followers from replicating (Broker.
        replication_problems: its inter-broker principal, each fetcher's problem)."""
        return self._ask_live_brokers("replication_problems", timeout_s)

    def log_dirs(self, timeout_s: float = 10.0, with_partitions: bool = True
                 ) -> dict[int, list[dict]]:
        """Live broker id → its log directories (Broker.log_dirs: path, online, why
        offline, the partitions held there or lost with it; only their counts without
        `with_partitions`)."""
        return self._ask_live_brokers("log_dirs", timeout_s, with_partitions)

    def partition_stats(self, timeout_s: float = 10.0) -> dict[int, dict]:
        """Live broker id → {(topic, partition): [role, log start, log end, high watermark,
        bytes]} of every replica it hosts (Broker.partition_stats: one call per broker)."""
        return self._ask_live_brokers("partition_stats", timeout_s)

    def topic_io(self, timeout_s: float = 10.0) -> dict[int, dict]:
        """Live broker id → {topic: (bytes in from producers, bytes out to consumers)} since
        it started (Broker.topic_io_stats: Kafka's per-topic BytesIn/BytesOutPerSec)."""
        return self._ask_live_brokers("topic_io_stats", timeout_s)

    def kafka_stats(self, timeout_s: float = 10.0) -> dict[int, dict]:
        """Live broker id → per listener and API: requests, bytes in and out since it
        started (Broker.kafka_stats)."""
        return self._ask_live_brokers("kafka_stats", timeout_s)

    def controller_journal(self, after: dict | None = None, timeout_s: float = 10.0
                           ) -> list[dict]:
        """What the controllers did (controller/journal.py entries: terms, brokers, leader
        and ISR changes), every candidate's entries after `after` ({controller id: the last
        seq seen}) merged by time, each tagged with the `controller_id` that wrote it; a
        candidate that does not answer within `timeout_s` is skipped (asked again at the
        next poll). At most 5,000 entries per candidate per call: poll again for more."""
        import heapq
        after = after or {}
        refs = {cid: actor.journal.remote(after.get(cid, 0))
                for cid in sorted(self.facts["controllers"])
                if (actor := self.controller_actor(cid)) is not None}
        deadline = time.monotonic() + timeout_s
        per_controller = []
        for cid, ref in refs.items():
            try:
                answer = ray.get(ref, timeout=max(0.0, deadline - time.monotonic()))
            except ray.exceptions.RayError:
                continue
            per_controller.append([{**e, "controller_id": cid} for e in answer["entries"]])
        # each journal is in seq order: a merge keeps it even if a wall clock stepped back
        return list(heapq.merge(*per_controller, key=lambda e: e["time_ms"]))

    def pipeline_reads(self, limit: int = 50) -> list[dict]:
        """The newest `limit` Spark reads, newest first, as the ClusterHost keeps them past
        their drivers (actors/cluster_host.py PipelineReads: the plan's fields and each
        task's report, forwarded by pipeline/tasklog.py); [] when there is no host."""
        host = self._actor(HOST_NAME)
        return [] if host is None else ray.get(host.pipeline_reads.remote(limit), timeout=10)

    def bootstrap_servers(self, listener: str = "PLAINTEXT") -> str:
        """"host:port,host:port,..." of the live brokers' `listener` endpoints (what a Kafka
        client's bootstrap.servers wants), from their ZooKeeper registrations."""
        regs = self.store.get_brokers()
        return ",".join(f"{e.host}:{e.port}" for _, reg in sorted(regs.items())
                        for e in reg.endpoints if e.listener == listener)

    def kill_broker(self, broker_id: int, restart: bool = True) -> None:
        actor = self.broker_actor(broker_id)
        if actor is not None:
            ray.kill(actor, no_restart=not restart)

    def kill_controller(self, restart: bool = True) -> int:
        """Kill the ACTIVE controller's actor; returns its id."""
        cid = self.store.get_controller()
        actor = self.controller_actor(cid) if cid is not None else None
        if actor is None:
            raise NotController("no active controller to kill")
        ray.kill(actor, no_restart=not restart)
        return cid

    def restart_broker(self, broker_id: int, timeout_s: float = 120.0) -> dict:
        """Kafka's restart of one broker: controlled shutdown (the controller moves every
        leadership away), clean shutdown (logs flushed, HWs checkpointed), the actor removed,
        a new one started on the same data dir; returns once it is registered anew.
        Answers {"controlled_shutdown_s", "completed", "restart_s"}."""
        actor = self.broker_actor(broker_id)
        if actor is None:
            raise BrokerNotAvailable(f"broker {broker_id} has no actor")
        before = self.store.get_broker(broker_id)
        t0 = time.monotonic()
        completed = ray.get(actor.controlled_shutdown.remote(), timeout=timeout_s)
        shutdown_s = time.monotonic() - t0
        ray.get(actor.shutdown.remote(), timeout=timeout_s)
        ray.kill(actor, no_restart=True)
        wait_for(lambda: self.broker_actor(broker_id) is None, timeout_s,
                 f"broker {broker_id}'s actor gone")
        self.ensure_actors()
        self.wait_registered_anew({broker_id: before.epoch if before is not None else -1},
                                  timeout_s)
        return {"broker": broker_id, "controlled_shutdown_s": shutdown_s,
                "completed": bool(completed), "restart_s": time.monotonic() - t0}

    def wait_registered_anew(self, old_epochs: dict[int, int], timeout_s: float = 120.0) -> None:
        """Until every broker of `old_epochs` ({broker: its registration epoch before}) is
        registered under a newer epoch: a new incarnation, a new ZooKeeper session (the old
        registration lingers until its session expires, so "registered" alone is too early)."""
        def anew():
            regs = self.store.get_brokers()
            return all(b in regs and regs[b].epoch > e for b, e in old_epochs.items())
        wait_for(anew, timeout_s, f"brokers {sorted(old_epochs)} registered again")

    def rolling_restart(self, brokers=None, timeout_s: float = 300.0, say=None) -> list[dict]:
        """Restart brokers one at a time; before the next one, wait until no partition is
        under-replicated (the restarted broker is back in every ISR), as Kafka operators do."""
        out = []
        for b in brokers or self.facts["brokers"]:
            r = self.restart_broker(b, timeout_s)
            t0 = time.monotonic()
            wait_for(lambda: not self.under_replicated(), timeout_s, "every ISR full again")
            r["isr_full_s"] = time.monotonic() - t0
            out.append(r)
            if say:
                say(r)
        return out

    def under_replicated(self) -> list[tuple[str, int]]:
        admin = self.admin()
        return [(t, p.partition) for t in admin.list_topics() for p in admin.describe_topic(t)
                if len(p.isr) < len(p.replicas)]

    @property
    def console_url(self) -> str | None:
        """The web console's URL when start_local(console=True) started it."""
        return self.console.url if self.console is not None else None

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop the console this driver started, brokers (flushing their logs),
        controllers, and the embedded ZooKeeper."""
        if self.console is not None:
            self.console.stop()
            self.console = None
        actors = [self.broker_actor(b) for b in self.facts["brokers"]] + \
            [self.controller_actor(c) for c in self.facts["controllers"]]
        failures = []
        for actor in actors:
            if actor is not None:
                try:
                    _stop_actor(actor, time.monotonic() + timeout_s)
                except ray.exceptions.RayError as e:
                    failures.append(e)
                finally:
                    ray.kill(actor, no_restart=True)
        self.store.close()
        host = self._actor(HOST_NAME)
        if host is not None:
            ray.get(host.stop_zookeeper.remote(), timeout=timeout_s)
            ray.kill(host, no_restart=True)
        if failures:
            raise failures[0]
