"""`rayka chaos`: a seeded fault schedule against a live cluster, then the checker's verdict.

Rules:
- Everything is real: a 3-server ZooKeeper ensemble on loopback, Ray (a multi-node
  `ray.cluster_utils.Cluster` with one broker per node when `kill-node` is among the faults,
  else a local Ray), broker and controller actors, the workload of rayka/chaos/workload.py.
- The schedule is a seeded round robin over the requested fault kinds (shuffled per round,
  so every kind gets its turn): inject, hold (a pause or an outage lasts `hold_s`), heal,
  wait until the cluster is healthy again (every broker registered, every partition led
  with a full ISR), let traffic flow for a moment, next fault. The seed is printed first
  and written into the history; the same seed gives the same schedule and targets.
- At the end: heal everything, stop producing (every outstanding send answered), read every
  partition to its high watermark, shut the cluster down cleanly (logs flushed), and run
  the checker over the history AND the brokers' files. A cluster that does not heal within
  `heal_timeout_s` is reported as a liveness failure (the run fails) but is still checked.
- `transactions` > 0 adds rayka/chaos/txns.py: its topics, writers, pipeline and live reader
  start with the workload and the faults wait for every transactional id's first commit;
  the kill-txn-coordinator and pause-txn-coordinator faults attack the broker leading one
  of its ids' `__transaction_state` partitions. At the end its writers stop after the
  producers; after the group, the pipeline catches up, LSO = HW is awaited and the
  transactional topics are read whole (rayka/chaos/txn_checker.py judges). "Healthy" then
  covers its topics and `__transaction_state` too.
- `unsafe=True` sets unclean.leader.election.enable=true and min.insync.replicas=1: the
  configuration in which Kafka (and rayka) CAN lose acknowledged writes.
- `flush_before_ack=True` sets log.flush.before.ack=true on every broker (no acks=all
  produce answered before every ISR replica fsynced it); the history's meta records it.
- Disk faults (DISK_FAULT_KINDS; not among the defaults: they need FUSE, and root to let
  Ray's workers use the mounts): when any is requested, each broker keeps its log directory
  (`log.dirs`, a per-broker static config) on its own faultfs mount
  (rayka/chaos/faultfs.py; source, mount and control socket under the run's data dir),
  started before the cluster and stopped by pid in teardown, whatever happened. The
  checker reads the logs from the mounts' sources after they stopped, through a view
  `<data>/checker-view/broker-<id>/` linking the broker's data dir and its log directory,
  so rule 3 still compares every ISR replica's bytes up to the HW.
  - fill-disk / disk-eio: a broker (the leader of a random partition) gets a space limit
    DISK_HEADROOM bytes above what it holds / every operation failing with EIO. Its
    directory must go offline within DIR_OFFLINE_TIMEOUT_S (polled on Broker.log_dirs)
    and the workload must keep being acknowledged through the hold, else a liveness
    failure: a sick disk may cost its broker, never the cluster. Heal: the fault lifted,
    the broker's process SIGKILLed by pid, Ray restarts it on the healed directory.
  - power-loss-one: that broker's mount loses every write not fsynced while its process
    is SIGKILLed (faultfs's freeze, kill, revert, thaw); Ray restarts it.
  - power-loss-all: the same for every broker at one instant. Refused at start without
    flush_before_ack: then acknowledged writes may be lost, by design.
  What each disk fault did and saw goes into the fault's end line of the history and
  into the verdict's stats["disk_faults"].
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, field

from rayka.chaos.checker import Verdict, check
from rayka.chaos.history import History, load_history

TOPIC = "chaos"
FAULT_KINDS = ("kill-broker", "kill-broker-norestart", "kill-controller", "pause-leader",
               "pause-controller", "expire-broker", "expire-controller", "zk-restart-server",
               "zk-kill-leader", "corrupt-tail", "controlled-shutdown", "kill-node",
               "cut-links")
# with a consumer group in the run (group_members > 0): its coordinator's broker attacked
GROUP_FAULT_KINDS = ("kill-coordinator", "pause-coordinator")
# with transactions in the run (transactions > 0): the broker leading the
# `__transaction_state` partition of one of the workload's transactional ids
TXN_FAULT_KINDS = ("kill-txn-coordinator", "pause-txn-coordinator")
# a broker's log directory on a faultfs mount (rayka/chaos/faultfs.py): needs FUSE
DISK_FAULT_KINDS = ("fill-disk", "disk-eio", "power-loss-one", "power-loss-all")
RE_REGISTER = {"kill-broker", "kill-broker-norestart", "expire-broker", "corrupt-tail",
               "controlled-shutdown", "kill-node", "kill-coordinator", "kill-txn-coordinator",
               "fill-disk", "disk-eio", "power-loss-one", "power-loss-all"}
HELD = {"pause-leader", "pause-controller", "zk-restart-server", "zk-kill-leader",
        "kill-broker-norestart", "pause-coordinator", "pause-txn-coordinator", "cut-links",
        "fill-disk", "disk-eio"}
DISK_HEADROOM = 64 * 1024         # bytes a filled disk may still take: seconds of traffic
DIR_OFFLINE_TIMEOUT_S = 30.0      # a sick disk's directory must be offline within this


@dataclass
class ChaosConfig:
    duration_s: float = 60.0
    seed: int = 0
    faults: tuple[str, ...] = FAULT_KINDS
    min_faults_per_kind: int = 0        # keep going past duration until each kind had this many
    partitions: int = 6
    brokers: int = 3
    producers: int = 3
    consumers: int = 1
    rate_per_producer: float = 150.0
    hold_s: tuple[float, float] = (3.5, 5.0)    # > the ZooKeeper session timeout: pauses expire
    rest_s: tuple[float, float] = (0.5, 1.5)
    heal_timeout_s: float = 120.0
    zk_session_timeout_ms: int = 3000
    replica_lag_time_max_ms: int = 3000
    unsafe: bool = False
    scenario: str = "random"    # "isr-of-one": Jepsen 2013's loss, scripted; "rolling-restart"
    client: str = "native"      # "librdkafka": the workload over the Kafka listeners
    group_members: int = 0      # > 0: a consumer group churning over the topic (chaos/groups.py)
    group_protocol: str = "classic"     # or "consumer": its members speak KIP-848
    share_members: int = 0      # > 0: a share group (KIP-932) reading the topic as a queue
    compact_keys: int = 0       # > 0: a compacted topic, values sent under this many keys
    transactions: int = 0       # > 0: this many transactional writers and a consume-transform-
                                # produce pipeline (chaos/txns.py)
    flush_before_ack: bool = False      # log.flush.before.ack=true on every broker
    out_dir: str = ""
    keep_data: bool = False
    fault_log: list = field(default_factory=list)


def config_error(config: ChaosConfig) -> str | None:
    """Why `config` cannot run, in one line; None if it can."""
    known = FAULT_KINDS + DISK_FAULT_KINDS + (GROUP_FAULT_KINDS if config.group_members
                                               else ()) + \
        (TXN_FAULT_KINDS if config.transactions else ())
    unknown = set(config.faults) - set(known)
    if unknown:
        return (f"unknown fault kinds {sorted(unknown)}; known: {', '.join(known)}"
                + ("" if config.group_members else
                   f" ({', '.join(GROUP_FAULT_KINDS)} need group_members)")
                + ("" if config.transactions else
                   f" ({', '.join(TXN_FAULT_KINDS)} need transactions)"))
    if config.compact_keys and (config.group_members or config.share_members):
        return ("compact_keys and group_members do not mix: a group's "
                "'consumed every acknowledged record' has no meaning under compaction")
    if "power-loss-all" in config.faults and not config.flush_before_ack:
        return ("power-loss-all needs --flush-before-ack (flush_before_ack=True): without it "
                "a power loss of every broker at once loses acknowledged writes by design")
    disk = [k for k in config.faults if k in DISK_FAULT_KINDS]
    if disk and not os.path.exists("/dev/fuse"):
        return f"fault kinds {', '.join(disk)} need FUSE (/dev/fuse) for their faultfs mounts"
    return None


class ChaosRun:
    def __init__(self, config: ChaosConfig, say=print):
        problem = config_error(config)
        if problem:
            raise ValueError(problem)
        self.cfg = config
        self.say = say
        self.rng = random.Random(config.seed)
        self.out = config.out_dir or os.path.join("chaos-runs", f"seed-{config.seed}-{int(time.time())}")
        os.makedirs(self.out, exist_ok=True)
        self.data_dir = os.path.join(self.out, "data")
        self.history = History(os.path.join(self.out, "history.jsonl"))
        self.multi_node = "kill-node" in config.faults
        self.disks: dict = {}          # broker id → its faultfs mount (disk faults only)
        self.disk_faults: list[dict] = []
        self.socket_dir = None         # a short dir for control sockets, if the run's is long
        self.ensemble = self.ray_cluster = self.cluster = self.injector = self.workload = None
        self.groups = self.txns = self.shares = None
        self.liveness: list[str] = []
        self.unhealthy = ""            # what the last failed health check saw
        self.rolling: list[dict] = []
        self.t0 = time.monotonic()
        self.fault_counts: dict[str, int] = {}

    # -- setup and teardown ------------------------------------------------------------------------
    def _start(self) -> None:
        import logging

        import ray
        logging.getLogger("kazoo").setLevel(logging.ERROR)   # ZooKeeper faults are the point

        import rayka
        from rayka.chaos.faults import FaultInjector
        from rayka.chaos.workload import Workload
        from controller.zookeeper.server import ZooKeeperEnsemble
        self.ensemble = ZooKeeperEnsemble(3).start()
        if self.multi_node:
            from ray.cluster_utils import Cluster as RayTestCluster
            self.ray_cluster = RayTestCluster(initialize_head=True, head_node_args={
                "num_cpus": 2, "resources": {"rayka_control": 100}})
            self.broker_node_args = {"num_cpus": 1, "resources": {"rayka_broker": 1}}
            for _ in range(self.cfg.brokers):
                self.ray_cluster.add_node(**self.broker_node_args)
            ray.init(address=self.ray_cluster.address, include_dashboard=False,
                     logging_level="ERROR", log_to_driver=False)
        else:
            ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR",
                     log_to_driver=False)
        placement = ({"broker_resources": {"rayka_broker": 1},
                      "control_resources": {"rayka_control": 1}} if self.multi_node else {})
        if self.cfg.group_members:   # sessions and join delays that fit a minute of churn
            from rayka.chaos.groups import GROUP_BROKER_CONFIG
            placement.update(GROUP_BROKER_CONFIG)
        if self.cfg.share_members:   # short locks: a dead member's records come back soon
            from rayka.chaos.shares import SHARE_BROKER_CONFIG
            placement.update(SHARE_BROKER_CONFIG)
        if self.cfg.transactions:     # a fast timed-out-transaction check (chaos/txns.py)
            from rayka.chaos.txns import TXN_BROKER_CONFIG
            placement.update(TXN_BROKER_CONFIG)
        broker_configs = {b: {} for b in range(1, self.cfg.brokers + 1)}
        if self.cfg.flush_before_ack:
            for own in broker_configs.values():
                own["log.flush.before.ack"] = "true"
        if any(k in DISK_FAULT_KINDS for k in self.cfg.faults):
            self._mount_disks()
            for b, disk in self.disks.items():
                broker_configs[b]["log.dirs"] = str(disk.mount)
        self.cluster = rayka.start_local(
            name=f"chaos{uuid.uuid4().hex[:6]}", brokers=self.cfg.brokers, controllers=2,
            zookeeper=self.ensemble.connect_string, data_dir=self.data_dir,
            replica_lag_time_max_ms=self.cfg.replica_lag_time_max_ms,
            zk_session_timeout_ms=self.cfg.zk_session_timeout_ms, log_cleaner_backoff_ms=1000,
            broker_configs={b: c for b, c in broker_configs.items() if c}, **placement)
        topic_config = ({"min.insync.replicas": 1, "unclean.leader.election.enable": "true"}
                        if self.cfg.unsafe else {"min.insync.replicas": 2})
        if self.cfg.compact_keys:     # small segments and a low ratio: the cleaners work
            topic_config.update({"cleanup.policy": "compact", "segment.bytes": 16384,
                                 "min.cleanable.dirty.ratio": 0.1})
        self.cluster.admin().create_topic(TOPIC, self.cfg.partitions, 3, topic_config)
        self.history.record("info", "meta", topic=TOPIC, partitions=self.cfg.partitions,
                            replication_factor=3, min_isr=topic_config["min.insync.replicas"],
                            seed=self.cfg.seed, faults=list(self.cfg.faults),
                            unsafe=self.cfg.unsafe, client=self.cfg.client,
                            group_members=self.cfg.group_members,
                            group_protocol=self.cfg.group_protocol,
                            share_members=self.cfg.share_members,
                            compact_keys=self.cfg.compact_keys,
                            transactions=self.cfg.transactions,
                            flush_before_ack=self.cfg.flush_before_ack,
                            faultfs_log_dirs=bool(self.disks))
        self.injector = FaultInjector(self.cluster, ensemble=self.ensemble, rng=self.rng)
        self.workload = Workload(self.cluster, TOPIC, self.history,
                                 producers=self.cfg.producers, consumers=self.cfg.consumers,
                                 rate_per_producer=self.cfg.rate_per_producer,
                                 client=self.cfg.client, keys=self.cfg.compact_keys)
        if self.cfg.group_members:
            from rayka.chaos.groups import GroupWorkload
            self.groups = GroupWorkload(self.cluster, TOPIC, self.history, self.rng,
                                        members=self.cfg.group_members,
                                        group_protocol=self.cfg.group_protocol)
        if self.cfg.share_members:
            from rayka.chaos.shares import ShareWorkload
            self.shares = ShareWorkload(self.cluster, TOPIC, self.history, self.rng,
                                        members=self.cfg.share_members)
        if self.cfg.transactions:
            from rayka.chaos.txns import TxnWorkload
            self.txns = TxnWorkload(self.cluster, self.history, self.rng,
                                    writers=self.cfg.transactions,
                                    partitions=self.cfg.partitions)
            self.txns.create_topics()

    def _mount_disks(self) -> None:
        """One faultfs mount per broker under the data dir, each registered as soon as it
        runs, so that teardown stops every one that started."""
        import tempfile

        from rayka.chaos.faultfs import FaultFs
        root = os.path.abspath(os.path.join(self.data_dir, "faultfs"))
        sockets = root
        if len(os.fsencode(os.path.join(root, "ctl-999"))) >= 100:      # AF_UNIX: 108 bytes
            sockets = self.socket_dir = tempfile.mkdtemp(prefix="rayka-faultfs-")
        for b in range(1, self.cfg.brokers + 1):
            source = os.path.join(root, f"src-{b}")
            os.makedirs(source, exist_ok=True)
            self.disks[b] = FaultFs.start(source, os.path.join(root, f"mnt-{b}"),
                                          os.path.join(sockets, f"ctl-{b}"))

    def _lift_disk_faults(self) -> None:
        """Every mount thawed, without limit or error mode: nothing waits on a disk."""
        for disk in self.disks.values():
            disk.thaw()
            disk.set_mode("ok")
            disk.set_space_limit(None)

    def _unmount_disks(self) -> None:
        problems = []
        for b, disk in sorted(self.disks.items()):
            try:
                disk.stop()
            except Exception as exc:   # the others are still stopped
                problems.append(f"broker {b}'s mount: {type(exc).__name__}: {exc}")
        if self.socket_dir is not None:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
        if problems:
            raise RuntimeError("; ".join(problems))

    def _checker_root(self) -> str:
        """The data root the checker reads: the data dir, or with faultfs mounts (stopped by
        now) a view linking each broker's data dir and its log directory's source into
        `checker-view/broker-<id>/`, the layout rayka/chaos/disk.py reads."""
        if not self.disks:
            return self.data_dir
        view = os.path.join(self.data_dir, "checker-view")
        for b, disk in self.disks.items():
            linked = os.path.join(view, f"broker-{b}")
            os.makedirs(linked, exist_ok=True)
            for where in (os.path.join(disk.source, f"broker-{b}"),
                          os.path.join(self.data_dir, f"broker-{b}")):
                for name in (os.listdir(where) if os.path.isdir(where) else ()):
                    if not os.path.lexists(os.path.join(linked, name)):
                        os.symlink(os.path.abspath(os.path.join(where, name)),
                                   os.path.join(linked, name))
        return view

    def _teardown(self) -> None:
        """Every step runs whatever the previous one did: nothing may outlive the run."""
        import ray
        steps = [("disk faults lifted", self._lift_disk_faults if self.disks else None),
                 ("cluster shutdown", self.cluster.shutdown if self.cluster else None),
                 ("ray shutdown", ray.shutdown if ray.is_initialized() else None),
                 ("ray test cluster", self.ray_cluster.shutdown if self.ray_cluster else None),
                 ("ZooKeeper ensemble", self.ensemble.stop if self.ensemble else None),
                 ("faultfs mounts", self._unmount_disks if self.disks else None)]
        for what, step in steps:
            if step is None:
                continue
            try:
                step()
            except Exception as exc:  # report it; the remaining steps still run
                self.liveness.append(f"teardown ({what}): {type(exc).__name__}: {exc}")

    # -- the run ---------------------------------------------------------------------------------------
    def run(self) -> Verdict:
        self.say(f"chaos seed {self.cfg.seed}: faults {', '.join(self.cfg.faults)}; "
                 f"output in {self.out}")
        try:
            self._start()
            self.workload.start()
            if self.groups is not None:
                self.groups.start()
            if self.shares is not None:
                self.shares.start()
            if self.txns is not None:
                self.txns.start()
            from rayka.client.admin import wait_for
            wait_for(lambda: self.workload.acked > 50, 60, "the workload's first acknowledgements")
            if self.txns is not None:
                wait_for(lambda: self.txns.started, 120,
                         "a first commit of every transactional id")
            self._phase(f"scenario {self.cfg.scenario}")
            if self.cfg.scenario == "isr-of-one":
                self._isr_of_one()
            elif self.cfg.scenario == "rolling-restart":
                self.rolling = self.cluster.rolling_restart(
                    say=lambda r: self.say(f"rolling restart: {r}"))
            else:
                self._fault_loop()
            self._phase("healing everything")
            self._heal_all()
            self._phase("stopping the workload (every outstanding send answered)")
            self.workload.stop()
            if self.txns is not None:
                self._phase("stopping the transactional writers")
                self.txns.stop_writing()
            self._phase("waiting for a healthy cluster")
            if not self._wait_healthy():
                self.liveness.append(f"not healthy before the final read: {self.unhealthy}")
            if self.groups is not None:
                self._phase("the group consumes and commits everything")
                try:
                    self.groups.finish()
                except Exception as exc:          # the checker's invariant 9 shows what is left
                    self.liveness.append(f"group finish: {type(exc).__name__}: {exc}")
            if self.shares is not None:
                self._phase("the share group accepts everything")
                try:
                    acked = [(e["partition"], e["offset"]) for e in load_history(
                        self.history.path) if e["f"] == "send" and e["type"] == "ok"]
                    self.shares.finish(acked)
                except Exception as exc:          # invariant 17 shows what is left
                    self.liveness.append(f"share finish: {type(exc).__name__}: {exc}")
            if self.txns is not None:
                self._phase("transactions: the pipeline catches up, LSO = HW, final reads")
                try:
                    self.txns.finish()
                except Exception as exc:          # invariants 12, 13 and 15 show what is left
                    self.liveness.append(f"transactions finish: {type(exc).__name__}: {exc}")
            self._phase("final read")
            self.workload.final_read()
            self._phase("shutting down")
        finally:
            if self.workload is not None:
                self.workload.stop_all.set()
            if self.groups is not None:
                self.groups.stop()
            if self.shares is not None:
                self.shares.stop()
            if self.txns is not None:
                self.txns.stop()
            if self.injector is not None:
                self.injector.resume_all()
            self._teardown()
            self.history.close()
        verdict = check(load_history(self.history.path), data_root=self._checker_root())
        verdict.stats["liveness_failures"] = list(self.liveness) + list(
            self.workload.errors if self.workload else []) + list(
            self.txns.errors if self.txns else [])
        if self.txns is not None:
            verdict.stats["txn_clients"] = dict(self.txns.counts)
        if self.disks:
            verdict.stats["disk_faults"] = list(self.disk_faults)
        verdict.stats["seed"] = self.cfg.seed
        if self.rolling:
            verdict.stats["rolling_restart"] = self.rolling
        with open(os.path.join(self.out, "verdict.json"), "w") as f:
            json.dump({"config": {k: v for k, v in asdict(self.cfg).items() if k != "fault_log"},
                       "verdict": verdict.to_json()}, f, indent=2, default=str)
        if not self.cfg.keep_data and verdict.ok and not verdict.stats["liveness_failures"]:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        return verdict

    def _phase(self, what: str) -> None:
        self.say(f"[{time.monotonic() - self.t0:7.1f} s] {what}")

    def _schedule(self):
        while True:
            kinds = list(self.cfg.faults)
            self.rng.shuffle(kinds)
            yield from kinds

    def _fault_loop(self) -> None:
        deadline = time.monotonic() + self.cfg.duration_s
        schedule = self._schedule()
        fault_id = 0
        while time.monotonic() < deadline or any(
                self.fault_counts.get(k, 0) < self.cfg.min_faults_per_kind for k in self.cfg.faults):
            kind = next(schedule)
            fault_id += 1
            started = time.monotonic()
            epochs = self._broker_epochs()
            what = self._inject(kind)
            self.history.record("info", "fault", id=fault_id, kind=kind, phase="start",
                                target=str(what.get("target")), partition=what.get("partition"))
            if kind in HELD:
                time.sleep(self.rng.uniform(*self.cfg.hold_s))   # the outage lasts this long
            self._heal(kind, what)
            detail = self._judge_disk_fault(fault_id, kind, what) if kind in DISK_FAULT_KINDS \
                else {}
            self.history.record("info", "fault", id=fault_id, kind=kind, phase="end",
                                target=str(what.get("target")), partition=what.get("partition"),
                                **detail)
            self.fault_counts[kind] = self.fault_counts.get(kind, 0) + 1
            healthy = self._wait_reregistered(kind, what, epochs) and self._wait_healthy()
            self.say(f"fault {fault_id:3d} {kind:22s} {str(what.get('target')):>12s} "
                     f"healed in {time.monotonic() - started:5.1f} s"
                     f"{'' if healthy else '  NOT HEALTHY'}  acked {self.workload.acked}")
            if not healthy:
                self.liveness.append(f"fault {fault_id} ({kind}) did not heal within "
                                     f"{self.cfg.heal_timeout_s} s: {self.unhealthy}")
                self._heal_all()
                if not self._wait_healthy():
                    raise RuntimeError(f"cluster did not recover after fault {fault_id} ({kind}); "
                                       f"seed {self.cfg.seed}: {self.unhealthy}")
            time.sleep(self.rng.uniform(*self.cfg.rest_s))   # traffic between faults

    def _isr_of_one(self) -> None:
        """Jepsen's Kafka 0.8 loss, scripted: both followers of partition 0 stop (SIGSTOP), the
        ISR shrinks to the leader alone, which keeps acknowledging acks=all writes (min ISR 1);
        then the leader dies for good and the followers come back: only an UNCLEAN election
        can give the partition a leader, and the writes only the old leader had are gone.
        With the safe defaults (min ISR 2, unclean off) the same script loses nothing."""
        import ray

        from rayka.client.admin import wait_for
        from replicas.errors import RequestTimedOut
        inj, admin = self.injector, self.cluster.admin()
        p = admin.describe_topic(TOPIC)[0]
        followers = [b for b in p.replicas if b != p.leader]
        pids = [inj.pause_pid(ray.get(self.cluster.broker_actor(b).pid.remote(), timeout=30),
                              f"broker-{b}")["pid"] for b in followers]
        self.history.record("info", "fault", id=1, kind="pause-followers", phase="start",
                            target=",".join(map(str, followers)), partition=0)
        wait_for(lambda: admin.describe_topic(TOPIC)[0].isr == (p.leader,), 60,
                 "the ISR of partition 0 shrunk to its leader")
        acked = self.workload.acked
        try:      # unsafe: acknowledged by the leader alone; safe: refused (NOT_ENOUGH_REPLICAS)
            wait_for(lambda: self.workload.acked > acked + 300, 20, "writes acked by one replica")
        except RequestTimedOut:
            pass
        inj.kill_broker(p.leader, restart=False)
        self.history.record("info", "fault", id=2, kind="kill-broker-norestart", phase="start",
                            target=f"broker-{p.leader}", partition=0)
        for pid in pids:
            inj.resume_pid(pid)
        if self.cfg.unsafe:       # safe: partition 0 stays offline until its last ISR member
            wait_for(lambda: admin.describe_topic(TOPIC)[0].leader in followers, 90,
                     "an unclean leader for partition 0 among the returning followers")
        inj.revive_brokers()
        for i in (1, 2):
            self.history.record("info", "fault", id=i, kind="isr-of-one", phase="end",
                                target="", partition=0)
        if not self._wait_healthy():
            self.liveness.append("isr-of-one: not healthy after the scenario")

    def _random_partition(self) -> int:
        return self.rng.randrange(self.cfg.partitions)

    def _inject(self, kind: str) -> dict:
        inj, p = self.injector, self._random_partition()
        if kind == "kill-broker":
            return inj.kill_leader(TOPIC, p, restart=True)
        if kind == "kill-broker-norestart":
            return inj.kill_leader(TOPIC, p, restart=False)
        if kind == "kill-controller":
            return inj.kill_controller()
        if kind == "pause-leader":
            return inj.pause_leader(TOPIC, p)
        if kind == "pause-controller":
            return inj.pause_controller()
        if kind == "expire-broker":
            leader = inj.live_leaders(TOPIC).get(p, -1)
            if leader < 0:
                leader = self.rng.choice(self.cluster.facts["brokers"])
            return dict(inj.expire_broker_session(leader), partition=p)
        if kind == "expire-controller":
            return inj.expire_controller_session()
        if kind == "zk-restart-server":
            return inj.zk_stop_server(self.rng.randrange(3))
        if kind == "zk-kill-leader":
            return inj.zk_kill_leader()
        if kind == "corrupt-tail":
            broker = self.rng.choice(self.cluster.facts["brokers"])
            return dict(inj.corrupt_segment_tail(broker, TOPIC, p), partition=p)
        if kind == "controlled-shutdown":
            broker = self.rng.choice(self.cluster.facts["brokers"])
            return inj.controlled_shutdown(broker)
        if kind == "kill-node":
            return self._kill_node(p)
        if kind == "cut-links":         # a follower cut off from its leader
            leader = inj.live_leaders(TOPIC).get(p, -1)
            others = [b for b in self.cluster.facts["brokers"] if b != leader]
            broker = self.rng.choice(others)
            return dict(inj.cut_replication(broker, self.cfg.hold_s[1] + 60.0), partition=p)
        if kind in ("fill-disk", "disk-eio"):
            broker = self._disk_target(p)
            disk = self.disks[broker]
            out = (inj.fill_disk(broker, disk, DISK_HEADROOM) if kind == "fill-disk"
                   else inj.fail_disk(broker, disk))
            out.update(partition=p,
                       dir_offline_s=inj.wait_dir_offline(broker, DIR_OFFLINE_TIMEOUT_S),
                       acked_at_offline=self.workload.acked)
            return out
        if kind == "power-loss-one":
            broker = self._disk_target(p)
            return dict(inj.power_loss({broker: self.disks[broker]}), partition=p)
        if kind == "power-loss-all":
            return inj.power_loss(dict(self.disks))
        if kind == "kill-coordinator":
            return self.groups.kill_coordinator(inj)
        if kind == "pause-coordinator":
            return self.groups.pause_coordinator(inj)
        if kind == "kill-txn-coordinator":
            return self.txns.kill_coordinator(inj)
        if kind == "pause-txn-coordinator":
            return self.txns.pause_coordinator(inj)
        raise ValueError(kind)

    def _disk_target(self, partition: int) -> int:
        """The broker whose disk fails: the partition's leader, so that leadership has to
        move (any broker when it has none)."""
        leader = self.injector.live_leaders(TOPIC).get(partition, -1)
        return leader if leader in self.disks else self.rng.choice(sorted(self.disks))

    def _judge_disk_fault(self, fault_id: int, kind: str, what: dict) -> dict:
        """What a disk fault did and saw (for the history and stats["disk_faults"]); a sick
        disk whose directory never went offline, or that stopped the acknowledgements or
        kept its broker leading, is a liveness failure."""
        detail = {k: what[k] for k in ("broker", "brokers", "space_limit", "dir_offline_s",
                                       "acked_during_hold", "leads_after_hold",
                                       "files_reverted", "bytes_dropped") if k in what}
        self.disk_faults.append({"id": fault_id, "kind": kind, **detail})
        if kind not in ("fill-disk", "disk-eio"):
            return detail
        b, problems = what["broker"], []
        if what["dir_offline_s"] is None:
            problems.append(f"broker {b}'s log directory not offline within "
                            f"{DIR_OFFLINE_TIMEOUT_S} s")
        if not what["acked_during_hold"]:
            problems.append("nothing acknowledged during the hold: the sick disk took the "
                            "cluster down")
        if what["leads_after_hold"]:
            problems.append(f"broker {b} still led partitions {what['leads_after_hold']} "
                            "with its directory offline")
        for problem in problems:
            self.liveness.append(f"fault {fault_id} ({kind}): {problem}")
        return detail

    def _kill_node(self, partition: int) -> dict:
        import ray
        leader = self.injector.live_leaders(TOPIC).get(partition)
        node_id = ray.get(self.cluster.broker_actor(leader).node_id.remote(), timeout=30)
        node = next(n for n in self.ray_cluster.worker_nodes if n.node_id == node_id)
        self.injector.kill_node(self.ray_cluster, node, **self.broker_node_args)
        return {"kind": "kill-node", "target": f"node-of-broker-{leader}", "partition": partition,
                "broker": leader}

    def _heal(self, kind: str, what: dict) -> None:
        inj = self.injector
        if kind in ("pause-leader", "pause-controller", "pause-coordinator",
                    "pause-txn-coordinator"):
            inj.resume_pid(what["pid"])
        elif kind == "kill-broker-norestart":
            inj.revive_brokers()
        elif kind == "cut-links":
            inj.restore_replication(what["broker"])
        elif kind in ("zk-restart-server", "zk-kill-leader"):
            inj.zk_start_server(what["server"])
        elif kind in ("fill-disk", "disk-eio"):
            b = what["broker"]
            what["acked_during_hold"] = self.workload.acked - what["acked_at_offline"]
            what["leads_after_hold"] = sorted(p for p, leader in inj.live_leaders(TOPIC).items()
                                              if leader == b)
            inj.heal_disk(b, self.disks[b])

    def _heal_disks(self) -> None:
        """Every mount healed; a broker whose directory is offline restarted (only a new
        incarnation brings it back)."""
        for b, disk in sorted(self.disks.items()):
            try:
                offline = any(not d["online"] for d in self.injector.broker_log_dirs(b))
            except Exception:  # restarting: its new incarnation opens the healed disk
                offline = False
            self.injector.heal_disk(b, disk, restart=offline)

    def _heal_all(self) -> None:
        inj = self.injector
        inj.resume_all()
        if self.disks:
            self._heal_disks()
        for i, server in enumerate(self.ensemble.servers):
            if not server.is_running():
                inj.zk_start_server(i)
        inj.revive_brokers()
        for broker in self.cluster.facts["brokers"]:
            inj.restore_replication(broker)

    def _broker_epochs(self) -> dict[int, int]:
        try:
            return {b: r.epoch for b, r in self.cluster.store.get_brokers().items()}
        except Exception:  # ZooKeeper under attack: nothing to compare with
            return {}

    def _wait_reregistered(self, kind: str, what: dict, before: dict[int, int]) -> bool:
        """A broker that lost its process or session must come back as a NEW incarnation
        (larger broker epoch) before the cluster can be called healed: otherwise a health
        check could pass before anyone noticed the fault."""
        brokers = [b for b in (what.get("brokers") or [what.get("broker")]) if b in before]
        if kind not in RE_REGISTER or not brokers:
            return True
        from rayka.client.admin import wait_for
        from replicas.errors import RequestTimedOut

        def registered_anew():
            epochs = self._broker_epochs()
            return all(epochs.get(b, -1) > before[b] for b in brokers)
        try:
            wait_for(registered_anew, self.cfg.heal_timeout_s,
                     f"brokers {brokers} registered anew")
            return True
        except RequestTimedOut:
            return False

    def _wait_healthy(self) -> bool:
        import ray

        from rayka.client.admin import wait_for
        from replicas.errors import RequestTimedOut
        store, admin = self.cluster.store, self.cluster.admin()
        want = set(self.cluster.facts["brokers"])

        def healthy():
            try:
                missing = sorted(want - store.get_broker_ids())
                if missing:
                    self.unhealthy = f"brokers {missing} not registered"
                    return False
                if store.get_controller() is None:
                    self.unhealthy = "no active controller"
                    return False
                topics = [TOPIC] + (self.txns.health_topics() if self.txns else [])
                short = [f"{t}-{p.partition} (leader {p.leader}, ISR {list(p.isr)})"
                         for t in topics for p in admin.describe_topic(t)
                         if p.leader not in want or len(p.isr) != len(p.replicas)]
                if short:
                    self.unhealthy = f"under-replicated: {', '.join(short[:8])}" + (
                        f" (+{len(short) - 8} more)" if len(short) > 8 else "")
                    return False
                self.unhealthy = "an actor does not answer"
                # every actor answers: none is still restarting (Ray may not have begun to)
                actors = self.cluster.broker_actors() + [
                    self.cluster.controller_actor(c) for c in self.cluster.facts["controllers"]]
                ray.get([a.pid.remote() for a in actors if a is not None], timeout=5)
                return len(actors) == len(want) + len(self.cluster.facts["controllers"])
            except Exception:  # ZooKeeper or an actor is recovering
                return False
        try:
            wait_for(healthy, self.cfg.heal_timeout_s, "a healthy cluster")
            return True
        except RequestTimedOut:
            return False


def run_chaos(config: ChaosConfig, say=print) -> tuple[Verdict, str]:
    """Run one chaos scenario; returns the verdict and the output directory."""
    run = ChaosRun(config, say)
    verdict = run.run()
    return verdict, run.out
