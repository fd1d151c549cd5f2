"""A seeded, deterministic world for controller simulations (issue 3: the chaos
invariants of rayka/chaos/checker.py).

Rules:
- Everything runs on the test's thread over tests/memory_zk.py: controllers use a SimLoop
  and their own ManualScheduler; ZooKeeper notifications and events are interleaved only
  by `settle()`, so a seed fully determines the run.
- Faults and admin operations use the same public calls the real system uses (store
  sessions closed/expired, admin writes, broker requests as controller events).
- `check()` asserts the invariants after every step; every failure message carries the
  seed and the step so the run can be replayed.
"""

from __future__ import annotations

import base64
import random

from controller import events as ev
from controller.assignment import assign_replicas
from controller.controller import Controller, ControllerConfig
from controller.scheduler import ManualScheduler
from controller.store_api import AdminOperationInProgress, ZkStoreError
from controller.layout import BrokerRegistration, LeaderIsrAndControllerEpoch
from replicas.errors import KafkaError
from tests.fakes import AnsweringChannel
from tests.memory_zk import MemoryZk, MemoryZkStore, Op, SimLoop, settle

BROKERS = (1, 2, 3, 4)
CONTROLLERS = (101, 102, 103)
CLUSTER = "sim"
CONFIG = ControllerConfig(leader_imbalance_check_interval_ms=3_000, reelect_backoff_ms=500)


class World:
    def __init__(self, seed: int):
        self.seed, self.rng, self.step = seed, random.Random(seed), 0
        self.now_ms = 0
        self.zk = MemoryZk()
        self.admin = MemoryZkStore(self.zk, CLUSTER).start()
        self.channel = AnsweringChannel()
        self.controllers: dict[int, Controller] = {}
        self.paused: set[int] = set()
        self.expired: set[int] = set()
        self.brokers: dict[int, MemoryZkStore] = {}
        self.broker_epochs: dict[int, int] = {}
        self.topic_seq = 0
        self.seen_epochs: dict[tuple, tuple[int, int]] = {}   # (topic id, p) → (leader epoch, zk version)
        self.epoch_owner: dict[int, int] = {}
        self.replies: list = []
        self.log: list[str] = []
        for cid in CONTROLLERS:
            self.start_controller(cid)
        for b in BROKERS:
            self.broker_up(b)
        self.settle()

    # -- plumbing -------------------------------------------------------------------------------
    def where(self) -> str:
        return f"seed={self.seed} step={self.step} last={self.log[-3:]}"

    def settle(self) -> None:
        loops = [c.loop for cid, c in self.controllers.items() if cid not in self.paused]
        settle(self.zk, *loops)

    def start_controller(self, cid: int) -> None:
        store = MemoryZkStore(self.zk, CLUSTER).start()
        c = Controller(cid, store, self.channel, lambda: self.now_ms, CONFIG,
                       scheduler=ManualScheduler(self.now_ms))
        c.loop = SimLoop(c.process, name=f"controller-{cid}")
        self.controllers[cid] = c
        self.channel.controllers[cid] = c
        c.start()

    def active(self) -> Controller | None:
        live = [c for cid, c in self.controllers.items() if c.is_active and cid not in self.paused]
        return live[0] if len(live) == 1 else None

    def live_brokers(self) -> list[int]:
        return sorted(self.brokers)

    # -- faults ---------------------------------------------------------------------------------
    def broker_up(self, b: int) -> None:
        if b in self.brokers:
            return
        store = MemoryZkStore(self.zk, CLUSTER).start()
        self.broker_epochs[b] = store.register_broker(
            BrokerRegistration(b, "127.0.0.1", 9000 + b, node_id=f"n{b}", actor_name=f"broker-{b}"))
        self.brokers[b] = store

    def broker_down(self, b: int) -> None:
        if b in self.brokers:
            self.brokers.pop(b).close()

    def broker_bounce(self, b: int) -> None:
        """A broker whose session expired re-registers: same id, newer czxid (epoch)."""
        if b in self.brokers:
            store = self.brokers[b]
            self.zk.expire(store)
            self.zk.reconnect(store)
            self.broker_epochs[b] = store.register_broker(
                BrokerRegistration(b, "127.0.0.1", 9000 + b, node_id=f"n{b}", actor_name=f"broker-{b}"))

    def kill_controller(self, cid: int) -> None:
        c = self.controllers.pop(cid, None)
        if c is not None:
            self.channel.controllers.pop(cid, None)
            self.paused.discard(cid)
            self.expired.discard(cid)
            c.store.close()

    def expire_controller(self, cid: int) -> None:
        c = self.controllers.get(cid)
        if c is not None and cid not in self.expired:
            self.zk.expire(c.store)
            self.expired.add(cid)

    def reconnect_controller(self, cid: int) -> None:
        if cid in self.expired:
            self.expired.discard(cid)
            self.zk.reconnect(self.controllers[cid].store)

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        for cid, c in list(self.controllers.items()):
            if cid not in self.paused:
                c.scheduler.advance(ms)
            else:
                c.scheduler.now_ms += ms

    # -- broker requests ------------------------------------------------------------------------
    def alter_isr(self, tp, isr, stale: bool = False) -> None:
        c = self.active()
        state = self.admin.get_partition_state(*tp)
        if c is None or state is None or state.leader not in self.brokers:
            return
        epoch = state.leader_epoch - (1 if stale else 0)
        proposal = LeaderIsrAndControllerEpoch(state.leader, epoch, tuple(isr), c.ctx.epoch,
                                               state.zk_version)
        c.loop.put(ev.AlterPartition(state.leader, self.broker_epochs[state.leader],
                                     {tp: proposal}, reply=lambda r, tp=tp, isr=tuple(isr):
                                     self.replies.append((tp, isr, r))))

    def expand_isr(self, tp) -> None:
        """The leader adds every live assigned replica (they caught up)."""
        c = self.active()
        state = self.admin.get_partition_state(*tp)
        if c is None or state is None or state.leader < 0:
            return
        a = c.ctx.assignment(tp)
        if a is None:
            return
        isr = list(state.isr) + [r for r in a.replicas if r in self.brokers and r not in state.isr]
        if tuple(isr) != state.isr:
            self.alter_isr(tp, isr)

    # -- admin ------------------------------------------------------------------------------------
    def admin_call(self, fn, *args) -> None:
        """An admin request; refusals are part of the game (logged, not raised)."""
        try:
            fn(*args)
        except (KafkaError, AdminOperationInProgress, ZkStoreError) as exc:
            self.log.append(f"admin refused: {exc}")

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self.admin.get_partition_states())

    def create_topic(self) -> None:
        live = self.live_brokers()
        if not live:
            return
        self.topic_seq += 1
        rf = self.rng.randint(1, min(3, len(live)))
        parts = assign_replicas(live, self.rng.randint(1, 4), rf, rng=self.rng)
        topic_id = base64.urlsafe_b64encode(self.rng.randbytes(16)).rstrip(b"=").decode()
        self.admin_call(lambda: self.admin.create_topic(f"t{self.topic_seq}", parts, topic_id=topic_id))

    # -- one random step -------------------------------------------------------------------------
    def random_step(self) -> None:
        self.step += 1
        r, rng = self.rng.random(), self.rng
        parts = self.partitions()
        topics = sorted(self.admin.get_topics())
        cids = sorted(self.controllers)
        if r < 0.10:
            b = rng.choice(BROKERS)
            (self.broker_down if b in self.brokers else self.broker_up)(b)
            what = f"broker {b} {'up' if b in self.brokers else 'down'}"
        elif r < 0.14:
            b = rng.choice(BROKERS)
            self.broker_bounce(b)
            what = f"broker {b} bounce"
        elif r < 0.18 and cids:
            cid = rng.choice(cids)
            self.kill_controller(cid)
            what = f"kill controller {cid}"
        elif r < 0.22:
            missing = [c for c in CONTROLLERS if c not in self.controllers]
            if missing:
                self.start_controller(rng.choice(missing))
            what = "start a controller"
        elif r < 0.26 and cids:
            cid = rng.choice(cids)
            if cid in self.expired:
                self.reconnect_controller(cid)
                what = f"controller {cid} reconnects"
            else:
                self.expire_controller(cid)
                what = f"controller {cid} session expired"
        elif r < 0.30 and cids:
            cid = rng.choice(cids)
            (self.paused.discard if cid in self.paused else self.paused.add)(cid)
            what = f"controller {cid} {'paused' if cid in self.paused else 'resumed'}"
        elif r < 0.32:
            self.zk.multi(None, f"/rayka/{CLUSTER}", [Op("delete", "/controller")]) \
                if self.admin.get_controller() is not None else None
            what = "/controller deleted"
        elif r < 0.36 and (c := self.active()) is not None:
            self.zk.fail_next_writes(c.store, rng.randint(1, 2))
            what = f"controller {c.id}: next writes fail"
        elif r < 0.48 and parts:
            tp = rng.choice(parts)
            state = self.admin.get_partition_state(*tp)
            c = self.active()
            replicas = list(c.ctx.replicas(tp)) if c else []
            isr = [state.leader] + [x for x in replicas if x != state.leader and rng.random() < 0.6]
            self.alter_isr(tp, isr, stale=rng.random() < 0.1)
            what = f"AlterPartition {tp} → {isr}"
        elif r < 0.58 and parts:
            self.expand_isr(rng.choice(parts))
            what = "ISR expand"
        elif r < 0.66:
            self.create_topic()
            what = "create topic"
        elif r < 0.70 and topics:
            t = rng.choice(topics)
            self.admin_call(self.admin.request_topic_deletion, t)
            what = f"delete topic {t}"
        elif r < 0.76 and parts and self.live_brokers():
            tp = rng.choice(parts)
            live = self.live_brokers()
            target = rng.sample(live, rng.randint(1, min(3, len(live))))
            self.admin_call(self.admin.request_reassignment, {tp: target})
            what = f"reassign {tp} → {target}"
        elif r < 0.80 and parts:
            chosen = rng.sample(parts, min(len(parts), rng.randint(1, 3)))
            self.admin_call(self.admin.request_preferred_election, chosen)
            what = f"preferred election {chosen}"
        elif r < 0.83 and topics:
            t = rng.choice(topics)
            on = rng.random() < 0.5
            self.admin_call(self.admin.set_topic_config, t, {"unclean.leader.election.enable": on})
            what = f"{t} unclean={on}"
        elif r < 0.86 and (c := self.active()) is not None and self.brokers:
            b = rng.choice(self.live_brokers())
            c.loop.put(ev.ControlledShutdown(b, self.broker_epochs[b], reply=lambda _r: None))
            self.settle()
            self.broker_down(b)            # a broker that asked to shut down then stops
            what = f"controlled shutdown of {b}"
        else:
            self.advance(rng.choice((100, 600, 3_100)))
            what = "time passes"
        self.log.append(what)
        self.settle()

    # -- healing --------------------------------------------------------------------------------
    def heal(self, rounds: int = 30) -> None:
        """Undo every fault and let the system converge (brokers expand ISRs as they would)."""
        self.log.append("heal")
        for cid in list(self.paused):
            self.paused.discard(cid)
        for cid in list(self.expired):
            self.reconnect_controller(cid)
        for cid in CONTROLLERS:
            if cid not in self.controllers:
                self.start_controller(cid)
        for b in BROKERS:
            self.broker_up(b)
        for _ in range(rounds):
            self.settle()
            self.advance(1_000)
            self.settle()
            for tp in self.partitions():
                self.expand_isr(tp)
            self.settle()
