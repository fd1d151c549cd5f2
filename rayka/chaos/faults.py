"""FaultInjector: the faults of rayka's chaos suite, against a running rayka Cluster.

Each fault method does ONE thing to the cluster and returns a dict describing it:
``{"kind": str, "target": str, "partition": int | None, ...}`` (plus what was done: ids,
pids, epochs, files, bytes), so the chaos run can log it into its history. Where a fault
has a second half, the method either does it itself (restart=True, controlled shutdown,
corruption: the broker is started again) or returns what ``heal`` needs (the ``pid`` of a
paused process for ``resume_pid``; without restart, ``revive_brokers()`` re-creates
missing brokers).

Rules:
- Public Ray APIs only: ``ray.kill``, actor methods (``pid()``, ``zk_session()``,
  ``controlled_shutdown()``, ``shutdown()``), ``os.kill`` by pid, and
  ``ray.cluster_utils.Cluster.remove_node/add_node``. Never ``ray._private``.
- Processes are signalled by pid only (SIGSTOP/SIGCONT/SIGKILL through Ray), never by
  name. Every pid this injector paused is remembered until resumed; ``resume_all()`` is
  the cleanup that must run whatever happens.
- Who leads is read from ZooKeeper (``describe_topic``, ``/controller``), never from Ray.
- A session expiry is REAL (server side, ``controller.zookeeper.store.expire_session`` on the
  actor's own credentials), on the connect string WITHOUT chroot.
- No sleeps as synchronisation: waits poll a condition with a deadline (``wait_for``).
- ZooKeeper ensemble faults need the ``ensemble`` (a ``controller.zookeeper.server.ZooKeeperEnsemble``).
- ``rng`` (a ``random.Random``) makes every random choice here; seed it to replay a run.
- Disk faults act on a broker's log directory through its faultfs mount
  (rayka/chaos/faultfs.py, one mount per broker, passed in as a ``FaultFs``): a space limit
  just above what it holds (ENOSPC), every operation failing (EIO), a power loss (every
  write not fsynced dropped, the broker SIGKILLed with it). An offline directory comes back
  only with a restart (replicas/log_dirs.py), so ``heal_disk`` lifts the fault and then
  kills the broker's process by pid: Ray restarts it, and it recovers from the disk.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import ray

from controller.zookeeper.store import expire_session
from rayka.chaos.faultfs import power_loss_together
from rayka.client.admin import wait_for
from rayka.ops.procs import pid_alive
from replicas import records
from replicas.log import partition_dir_name
from replicas.errors import CorruptRecord, RequestTimedOut

__all__ = ["FaultInjector", "CORRUPT_MODES"]

CORRUPT_MODES = ("flip", "torn", "flip+torn")
_NODE_RESOURCE_KEYS = {"CPU": "num_cpus", "GPU": "num_gpus", "memory": "memory",
                       "object_store_memory": "object_store_memory"}


class FaultInjector:
    """Faults against ``cluster`` (rayka.cluster.Cluster) and, optionally, its ZooKeeper
    ``ensemble``. ``timeout_s`` bounds every wait and every actor call made here."""

    def __init__(self, cluster, ensemble=None, rng: random.Random | None = None,
                 timeout_s: float = 120.0):
        self.cluster = cluster
        self.ensemble = ensemble
        self.rng = rng if rng is not None else random.Random()
        self.timeout_s = timeout_s
        self._paused: dict[int, str] = {}      # pid -> target, until resumed
        self._lock = threading.Lock()

    # -- reading the cluster -------------------------------------------------------------------
    def live_leaders(self, topic: str) -> dict[int, int]:
        """{partition: leader broker id (-1: none)} as ZooKeeper has it."""
        return {p.partition: p.leader for p in self.cluster.admin().describe_topic(topic)}

    def _leader(self, topic: str, partition: int) -> tuple[int, int]:
        for p in self.cluster.admin().describe_topic(topic):
            if p.partition == partition:
                if p.leader < 0:
                    raise RuntimeError(f"{topic}-{partition} has no leader to fault")
                return p.leader, p.leader_epoch
        raise ValueError(f"{topic} has no partition {partition}")

    def _broker(self, broker_id: int):
        actor = self.cluster.broker_actor(broker_id)
        if actor is None:
            raise RuntimeError(f"broker {broker_id} has no actor")
        return actor

    def _active_controller(self) -> tuple[int, object]:
        cid = self.cluster.store.get_controller()
        actor = self.cluster.controller_actor(cid) if cid is not None else None
        if actor is None:
            raise RuntimeError("no active controller")
        return cid, actor

    def _call(self, method, *args):
        return ray.get(method.remote(*args), timeout=self.timeout_s)

    def _pid_of(self, actor, target: str) -> int | None:
        """The actor's pid: a paused one cannot answer, so it comes from our own record."""
        with self._lock:
            for pid, t in self._paused.items():
                if t == target:
                    return pid
        try:
            return ray.get(actor.pid.remote(), timeout=min(30.0, self.timeout_s))
        except Exception:   # dead or restarting: the caller only needed it to wait
            return None

    def _zk_hosts(self) -> str:
        # a session is global to the server: strip any chroot from the connect string
        return self.cluster.zookeeper.partition("/")[0]

    # -- broker and controller kills ------------------------------------------------------------
    def kill_broker(self, broker_id: int, restart: bool = True) -> dict:
        """SIGKILL the broker's actor (ray.kill). With restart, Ray restarts it (it recovers
        from its data dir); without, the actor is gone (this waits until its process is)
        until ``revive_brokers()``."""
        target = f"broker-{broker_id}"
        actor = self._broker(broker_id)
        pid = None if restart else self._pid_of(actor, target)
        ray.kill(actor, no_restart=not restart)
        self._forget_target(target)
        if not restart:
            self._wait_gone(broker_id, pid)
        return {"kind": "kill_broker", "target": target, "partition": None,
                "broker": broker_id, "restart": restart}

    def kill_leader(self, topic: str, partition: int, restart: bool = True) -> dict:
        """Kill the partition's leader as ZooKeeper names it (see ``kill_broker``)."""
        leader, epoch = self._leader(topic, partition)
        out = self.kill_broker(leader, restart)
        out.update(kind="kill_leader", topic=topic, partition=partition, leader_epoch=epoch)
        return out

    def revive_brokers(self) -> dict:
        """Re-create the broker actors that do not exist (killed without restart); each new
        one recovers from the same data dir."""
        missing = [b for b in self.cluster.facts["brokers"]
                   if self.cluster.broker_actor(b) is None]
        self.cluster.ensure_actors()
        return {"kind": "revive_brokers", "target": ",".join(f"broker-{b}" for b in missing),
                "partition": None, "brokers": missing}

    def kill_controller(self) -> dict:
        """Kill the ACTIVE controller's actor; Ray restarts it as a plain candidate."""
        cid = self.cluster.kill_controller(restart=True)
        self._forget_target(f"controller-{cid}")
        return {"kind": "kill_controller", "target": f"controller-{cid}", "partition": None,
                "controller": cid}

    def _wait_gone(self, broker_id: int, pid: int | None) -> None:
        """Until Ray has freed the name AND the old process no longer runs: the name goes
        when Ray marks the actor dead, which may come before the SIGKILL has landed."""
        wait_for(lambda: self.cluster.broker_actor(broker_id) is None, self.timeout_s,
                 f"broker-{broker_id}'s actor gone")
        if pid is not None:
            wait_for(lambda: not pid_alive(pid), self.timeout_s,
                     f"broker-{broker_id}'s process {pid} gone")

    # -- pauses (SIGSTOP / SIGCONT) ----------------------------------------------------------------
    def pause_pid(self, pid: int, target: str | None = None) -> dict:
        """SIGSTOP ``pid``; it stays recorded until ``resume_pid``/``resume_all``."""
        with self._lock:
            os.kill(pid, signal.SIGSTOP)
            self._paused[pid] = target or f"pid-{pid}"
        return {"kind": "pause", "target": target or f"pid-{pid}", "partition": None, "pid": pid}

    def resume_pid(self, pid: int) -> dict:
        """SIGCONT ``pid`` (a process that died meanwhile is simply forgotten)."""
        with self._lock:
            target = self._paused.pop(pid, f"pid-{pid}")
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        return {"kind": "resume", "target": target, "partition": None, "pid": pid}

    def resume_all(self) -> list[int]:
        """Resume every pid still paused by this injector (cleanup); returns them."""
        with self._lock:
            pids = list(self._paused)
        for pid in pids:
            self.resume_pid(pid)
        return pids

    @property
    def paused(self) -> dict[int, str]:
        with self._lock:
            return dict(self._paused)

    def _forget_target(self, target: str) -> None:
        # a killed process is no longer ours to resume (and its pid may be reused)
        with self._lock:
            for pid in [p for p, t in self._paused.items() if t == target]:
                del self._paused[pid]

    def pause_leader(self, topic: str, partition: int) -> dict:
        """SIGSTOP the partition's leader (a zombie leader: its ZooKeeper session times out,
        a new leader is elected); resume it with ``resume_pid(out["pid"])``."""
        leader, epoch = self._leader(topic, partition)
        target = f"broker-{leader}"
        pid = self._call(self._broker(leader).pid)
        out = self.pause_pid(pid, target)
        out.update(kind="pause_leader", topic=topic, partition=partition, broker=leader,
                   leader_epoch=epoch)
        return out

    def pause_controller(self) -> dict:
        """SIGSTOP the active controller (a zombie controller); ``resume_pid(out["pid"])``."""
        cid, actor = self._active_controller()
        target = f"controller-{cid}"
        epoch = self.cluster.store.get_controller_epoch()[0]
        pid = self._call(actor.pid)
        out = self.pause_pid(pid, target)
        out.update(kind="pause_controller", controller=cid, controller_epoch=epoch)
        return out

    # -- ZooKeeper session expiry -------------------------------------------------------------------
    def expire_broker_session(self, broker_id: int) -> dict:
        """Really expire the broker's ZooKeeper session: its registration vanishes, it
        re-registers on a new session with a larger broker epoch (czxid)."""
        session_id, password = self._call(self._broker(broker_id).zk_session)
        reg = self.cluster.store.get_broker(broker_id)
        expire_session(self._zk_hosts(), session_id, password, min(30.0, self.timeout_s))
        return {"kind": "expire_broker_session", "target": f"broker-{broker_id}",
                "partition": None, "broker": broker_id, "session_id": session_id,
                "broker_epoch": reg.epoch if reg is not None else None}

    def expire_controller_session(self) -> dict:
        """Really expire the ACTIVE controller's ZooKeeper session: /controller vanishes and
        a controller of a higher epoch is elected."""
        cid, actor = self._active_controller()
        session_id, password = self._call(actor.zk_session)
        epoch = self.cluster.store.get_controller_epoch()[0]
        expire_session(self._zk_hosts(), session_id, password, min(30.0, self.timeout_s))
        return {"kind": "expire_controller_session", "target": f"controller-{cid}",
                "partition": None, "controller": cid, "session_id": session_id,
                "controller_epoch": epoch}

    # -- ZooKeeper ensemble -----------------------------------------------------------------------
    def _need_ensemble(self):
        if self.ensemble is None:
            raise RuntimeError("this fault needs a ZooKeeper ensemble (FaultInjector(ensemble=))")
        return self.ensemble

    def zk_kill_leader(self) -> dict:
        """SIGKILL the ensemble's leader (``srvr`` Mode: leader); ``server`` is its index."""
        ensemble = self._need_ensemble()
        i = ensemble.leader(timeout_s=self.timeout_s)
        ensemble.kill_server(i)
        return {"kind": "zk_kill_leader", "target": f"zk-{i}", "partition": None, "server": i}

    def zk_stop_server(self, i: int) -> dict:
        self._need_ensemble().stop_server(i)
        return {"kind": "zk_stop_server", "target": f"zk-{i}", "partition": None, "server": i}

    def zk_start_server(self, i: int, wait: bool = True) -> dict:
        """Start member i on its ports and data dir; with wait, until it serves again."""
        server = self._need_ensemble().start_server(i, wait=wait)
        return {"kind": "zk_start_server", "target": f"zk-{i}", "partition": None, "server": i,
                "mode": server.mode() if wait else None}

    def zk_restart_server(self, i: int, wait: bool = True) -> dict:
        """Stop member i if it runs (killed: nothing to stop), then start it again."""
        ensemble = self._need_ensemble()
        if ensemble.servers[i].is_running():
            ensemble.stop_server(i)
        out = self.zk_start_server(i, wait)
        out["kind"] = "zk_restart_server"
        return out

    # -- replication links ------------------------------------------------------------------
    def cut_replication(self, broker_id: int, duration_s: float) -> dict:
        """The broker's replication links to every leader close and stay down for
        `duration_s` (its failpoint, actors/broker_actor.py `cut_replication`): a network
        partition of its followers, the actor alive and serving clients. The leaders drop it
        from their ISRs after replica.lag.time.max.ms; `restore_replication` heals early."""
        cut = self._call(self._broker(broker_id).cut_replication, duration_s)
        return {"kind": "cut_replication", "target": f"broker-{broker_id}", "partition": None,
                "broker": broker_id, "leaders": cut, "duration_s": duration_s}

    def restore_replication(self, broker_id: int) -> dict:
        actor = self.cluster.broker_actor(broker_id)
        if actor is not None:         # a broker restarted meanwhile has no cut to lift
            self._call(actor.cut_replication, 0.0)
        return {"kind": "restore_replication", "target": f"broker-{broker_id}",
                "partition": None, "broker": broker_id}

    # -- storage -------------------------------------------------------------------------------
    def corrupt_segment_tail(self, broker_id: int, topic: str, partition: int,
                             mode: str | None = None) -> dict:
        """Kill the broker for good, corrupt the tail of the partition's ACTIVE segment,
        start the broker again (its crash recovery must cut the bad tail, then it
        re-replicates from the leader). ``mode``: "flip" (XOR a few bytes of the last
        batch's CRC-covered body), "torn" (append a partial batch), "flip+torn"; None = the
        rng picks (torn when the segment holds no batch)."""
        if mode is not None and mode not in CORRUPT_MODES:
            raise ValueError(f"mode must be one of {CORRUPT_MODES}, not {mode!r}")
        pdir = self._partition_dir(broker_id, topic, partition)
        if not list(pdir.glob("*.log")):
            raise FileNotFoundError(f"broker {broker_id} has no segment in {pdir}")
        self.kill_broker(broker_id, restart=False)
        segment = max(pdir.glob("*.log"), key=lambda p: int(p.stem))
        last, next_offset = self._last_batch(segment)
        if mode is None:
            mode = self.rng.choice(CORRUPT_MODES) if last is not None else "torn"
        elif last is None and mode != "torn":
            mode = "torn"   # nothing to flip in an empty segment
        size_before = segment.stat().st_size
        out = {"kind": "corrupt_segment_tail", "target": f"broker-{broker_id}",
               "partition": partition, "topic": topic, "broker": broker_id,
               "file": str(segment), "mode": mode, "size_before": size_before,
               "last_batch": None, "flipped": [], "appended": 0}
        with open(segment, "r+b") as f:
            if "flip" in mode:
                position, size, base = last
                out["last_batch"] = {"position": position, "size": size, "base_offset": base}
                out["flipped"] = self._flip(f, position, size)
            if "torn" in mode:
                out["appended"] = self._append_torn(f, size_before, next_offset)
            f.flush()
            os.fsync(f.fileno())
        self.cluster.ensure_actors()
        out["restarted"] = True
        return out

    def _partition_dir(self, broker_id: int, topic: str, partition: int) -> Path:
        """Where the broker keeps the partition: in one of its log directories (it says
        which), else where its data dir keeps logs by default."""
        name = partition_dir_name(topic, partition)
        try:
            dirs = self.broker_log_dirs(broker_id)
        except Exception:     # paused or restarting: its default layout it is
            dirs = []
        for d in dirs:
            if (Path(d["path"]) / name).is_dir():
                return Path(d["path"]) / name
        return Path(self.cluster.facts["data_dir"]) / f"broker-{broker_id}" / name

    @staticmethod
    def _last_batch(segment: Path) -> tuple[tuple[int, int, int] | None, int]:
        """((position, size, base_offset) of the last whole valid-looking batch, or None;
        the offset after it) — walks the headers only."""
        last, next_offset = None, int(segment.stem)
        size = segment.stat().st_size
        with open(segment, "rb") as f:
            position = 0
            while size - position >= records.HEADER_SIZE:
                f.seek(position)
                try:
                    header = records.read_header(f.read(records.HEADER_SIZE))
                    records.check_header(header, size - position)
                except CorruptRecord:
                    break           # already torn here: the last whole batch is before
                last = (position, header.size, header.base_offset)
                next_offset = header.next_offset
                position += header.size
        return last, next_offset

    def _flip(self, f, position: int, size: int) -> list[tuple[int, int, int]]:
        """XOR 1-4 bytes (never a no-op) inside the CRC-covered part after the header, so
        the batch still parses but fails its CRC-32C; [(file offset, old, new)]."""
        lo = position + records.HEADER_SIZE
        hi = position + size
        if hi <= lo:                # a batch without records: hit the attributes instead
            lo = position + records.ATTRIBUTES_OFFSET
        offsets = sorted(self.rng.sample(range(lo, hi), min(hi - lo, self.rng.randint(1, 4))))
        flipped = []
        for off in offsets:
            f.seek(off)
            old = f.read(1)[0]
            new = old ^ self.rng.randint(1, 255)
            f.seek(off)
            f.write(bytes([new]))
            flipped.append((off, old, new))
        return flipped

    def _append_torn(self, f, end: int, next_offset: int) -> int:
        """Append a strict prefix of a well-formed batch continuing at ``next_offset`` (a
        write cut by a crash); returns the number of bytes appended."""
        values = [self.rng.randbytes(self.rng.randint(8, 64)) for _ in range(self.rng.randint(1, 5))]
        # fixed timestamp: the bytes are cut anyway, and rng-made input keeps a run replayable
        batch = records.build_batch(values, timestamps_ms=0, base_offset=next_offset)
        n = self.rng.randint(1, len(batch) - 1)
        f.seek(end)
        f.write(bytes(batch[:n]))
        return n

    # -- disks (one faultfs mount per broker) -----------------------------------------------
    def broker_log_dirs(self, broker_id: int) -> list[dict]:
        """The broker's own account of its log directories (Broker.log_dirs: path, online,
        error, partitions)."""
        return self._call(self._broker(broker_id).log_dirs)

    def wait_dir_offline(self, broker_id: int, timeout_s: float) -> float | None:
        """Seconds until the broker reports one of its log directories offline (polled),
        None if it did not within `timeout_s`."""
        started = time.monotonic()

        def offline():
            try:
                return any(not d["online"] for d in self.broker_log_dirs(broker_id))
            except Exception:   # restarting: not offline in this incarnation's eyes yet
                return False
        try:
            wait_for(offline, timeout_s, f"broker-{broker_id}'s log directory offline")
        except RequestTimedOut:
            return None
        return time.monotonic() - started

    def fill_disk(self, broker_id: int, disk, headroom: int) -> dict:
        """The broker's log directory (its faultfs mount `disk`) may grow by `headroom`
        bytes more: its next writes past that fail with ENOSPC and the directory goes
        offline. ``heal_disk`` undoes it."""
        used = disk.set_space_limit(None, headroom=headroom)
        return {"kind": "fill_disk", "target": f"broker-{broker_id}", "partition": None,
                "broker": broker_id, "space_used": used, "space_limit": used + headroom}

    def fail_disk(self, broker_id: int, disk) -> dict:
        """Every operation on the broker's log directory fails with EIO (a dying disk);
        ``heal_disk`` undoes it."""
        disk.set_mode("eio")
        return {"kind": "fail_disk", "target": f"broker-{broker_id}", "partition": None,
                "broker": broker_id}

    def heal_disk(self, broker_id: int, disk, restart: bool = True) -> dict:
        """Lift every fault of the broker's mount (space limit, error mode, freeze); with
        restart, SIGKILL the broker's process by pid: Ray restarts it (max_restarts=-1) and
        the new incarnation brings the directory back online, recovering its logs."""
        disk.set_space_limit(None)
        disk.set_mode("ok")
        disk.thaw()
        target, pid = f"broker-{broker_id}", None
        if restart:
            pid = self._pid_of(self._broker(broker_id), target)
            self._forget_target(target)
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        return {"kind": "heal_disk", "target": target, "partition": None,
                "broker": broker_id, "restarted_pid": pid}

    def power_loss(self, disks: dict) -> dict:
        """A power loss of the brokers of `disks` (broker id → its faultfs mount) at one
        instant: every mount frozen, every broker's process SIGKILLed by pid, every write
        not fsynced dropped (rayka/chaos/faultfs.py `power_loss_together`). Ray restarts
        the brokers, which recover from what is left."""
        brokers = sorted(disks)
        pids = {b: self._call(self._broker(b).pid) for b in brokers}
        for b in brokers:
            self._forget_target(f"broker-{b}")
        results = power_loss_together([disks[b] for b in brokers], kill=pids.values(),
                                      timeout=self.timeout_s)
        return {"kind": "power_loss", "target": ",".join(f"broker-{b}" for b in brokers),
                "partition": None, "brokers": brokers,
                "broker": brokers[0] if len(brokers) == 1 else None,
                "pids": [pids[b] for b in brokers],
                "files_reverted": sum(r["files_reverted"] for r in results),
                "bytes_dropped": sum(r["bytes_dropped"] for r in results)}

    # -- rolling restart -----------------------------------------------------------------------
    def controlled_shutdown(self, broker_id: int) -> dict:
        """Kafka's rolling restart of one broker: controlled shutdown (leadership moves away
        until it leads nothing), clean shutdown, kill, start again from its data dir.
        ``duration_s`` is the controlled shutdown's time, ``completed`` whether it ended
        leading nothing."""
        target = f"broker-{broker_id}"
        actor = self._broker(broker_id)
        pid = self._pid_of(actor, target)
        started = time.monotonic()
        completed = self._call(actor.controlled_shutdown)
        duration_s = time.monotonic() - started
        self._call(actor.shutdown)
        ray.kill(actor, no_restart=True)
        self._forget_target(target)
        self._wait_gone(broker_id, pid)
        self.cluster.ensure_actors()
        return {"kind": "controlled_shutdown", "target": target, "partition": None,
                "broker": broker_id, "completed": bool(completed), "duration_s": duration_s}

    # -- Ray nodes ------------------------------------------------------------------------------
    def kill_node(self, ray_cluster, node, **node_args) -> dict:
        """Remove ``node`` from a ``ray.cluster_utils.Cluster`` (kills its raylet and
        workers) and add a replacement with the same resources: ``node_args`` (add_node's
        keywords) if given, else read from ``ray.nodes()`` (CPUs, GPUs, memory, object
        store, custom resources). ``out["node"]`` is the new node."""
        old_id = node.node_id
        if not node_args:
            node_args = self._node_args(old_id)
        ray_cluster.remove_node(node)
        new = ray_cluster.add_node(**node_args)
        return {"kind": "kill_node", "target": f"node-{old_id[:8]}", "partition": None,
                "old_node_id": old_id, "new_node_id": new.node_id, "node": new,
                "node_args": dict(node_args)}

    @staticmethod
    def _node_args(node_id: str) -> dict:
        entry = next((n for n in ray.nodes() if n["NodeID"] == node_id), None)
        if entry is None:
            raise ValueError(f"node {node_id} is not in ray.nodes()")
        args, custom = {}, {}
        for key, value in entry["Resources"].items():
            if key in _NODE_RESOURCE_KEYS:
                args[_NODE_RESOURCE_KEYS[key]] = int(value)
            elif not key.startswith(("node:", "accelerator_type:")):
                custom[key] = value
        args.setdefault("num_cpus", 0)
        if custom:
            args["resources"] = custom
        return args
