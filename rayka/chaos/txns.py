"""The transactional side of a chaos run: writers that commit and abort at random, a
consume-transform-produce pipeline, a live read_committed reader, and the final reads, every
outcome recorded for rayka/chaos/txn_checker.py.

Rules:
- Topics (RF 3, min.insync.replicas 2, the run's partition count): TXN_TOPIC for the
  writers, CTP_IN and CTP_OUT for the pipeline. The brokers get TXN_BROKER_CONFIG: 10
  `__transaction_state` partitions (fewer loads after every broker restart; the coordinator
  is the same), the timed-out-transaction check every second (Kafka: 10 s), a 500 ms delay
  of a new group's first rebalance. Producers ask transaction.timeout.ms
  TRANSACTION_TIMEOUT_MS.
- Labels: a transaction is `<name>.<instance>.<n>` (name `w<i>` or `ctp`; instance: the
  how-manieth Producer of that transactional id `chaos-<name>`, counted from 1; n counts the
  name's transactions); its records are keyed `<label>:<j>`, so a reader names the
  transaction of every record it sees.
- Writers (`writers` threads): begin, send 1-4 records (value = key, murmur2 spreads them),
  then commit, or abort (a quarter at random, or after a send failed). A commit that raises
  is followed by an abort; an end that still raises (fenced, timed out, the producer's state
  broken) retires the producer: the next transaction runs on a NEW instance of the same
  transactional id, whose init_transactions fences the old one and settles its transaction.
  Now and then (ZOMBIE_P, and surely once from a writer's ZOMBIE_AT-th transaction on, so
  every run has one) the writer makes a zombie on purpose: after the sends it starts the next
  instance, then has the old one send one more record (a late write, refused by KIP-890's
  check) and commit; the commit must fail.
- The pipeline reads CTP_IN (fed by an idempotent producer with values `in-<n>`) as the only
  member of group CTP_GROUP, read_committed, no auto-commit; per poll one transaction: each
  input record becomes `out-<value>` on the SAME partition of CTP_OUT, the next offsets go
  in with send_offsets_to_transaction, then commit (a fifth abort at random, and always its
  CTP_ABORT_AT-th transaction). After an abort (a failed commit followed by an abort
  included), or anything unresolved, it seeks back to the group's committed offsets
  (Kafka's EOS habit: a consumer that went on from its position would skip the aborted
  inputs); now and then (CRASH_P, and surely once
  from its CRASH_AT-th transaction on) it "crashes" mid-transaction: producer abandoned with the
  transaction open, consumer closed; a new producer instance (fencing the old) and a new
  consumer restart from the committed offsets.
- History: `txn-init` invoke/ok/info {txid, instance}; `txn-end` invoke {txid, instance, txn,
  action commit|abort, keys, inputs?, offsets?}, then ok {records: [key, partition, offset]
  of the acknowledged ones} or info {error}; `txn-abandon` info {txid, instance, txn, keys,
  inputs}; `ctp-feed` invoke/ok/info; `txn-read` ok (the live reader); after the run
  `ctp-final`, `txn-quiesce`, `txn-stable` ok/fail, `txn-final-read`, `txn-final-hw`,
  `ctp-input-final` (fields: rayka/chaos/txn_checker.py).
- The end (`finish`): the feed stops, the pipeline catches up (the group's committed offsets
  reach CTP_IN's end) and stops; with every transactional client stopped (`txn-quiesce`),
  each partition of TXN_TOPIC and CTP_OUT is polled until its last stable offset reaches its
  high watermark, at most TRANSACTION_TIMEOUT_MS + HANG_BOUND_MS: the time it took is the
  "no transaction hangs" evidence. Then read_committed and read_uncommitted readers read
  every partition to its end (LSO, HW), and CTP_IN is read whole.
- Pacing uses waits on the stop event; waits for events poll with a deadline.
"""

from __future__ import annotations

import random
import threading
import time

import ray

from rayka.chaos.workload import read_to_end
from rayka.client.admin import wait_for
from replicas.errors import KafkaError, RequestTimedOut
from transactions.records import partition_for

TXN_TOPIC, CTP_IN, CTP_OUT = "chaos-txn", "chaos-ctp-in", "chaos-ctp-out"
CTP_GROUP = "chaos-ctp"
TXN_STATE_TOPIC = "__transaction_state"
TXN_BROKER_CONFIG = {"transaction_state_log_num_partitions": 10,
                     "transaction_abort_timed_out_transaction_cleanup_interval_ms": 1000,
                     "group_initial_rebalance_delay_ms": 500}
TRANSACTION_TIMEOUT_MS = 15_000
HANG_BOUND_MS = 30_000          # markers, a coordinator's failover, the 1 s timeout check
INIT_TIMEOUT_S = END_TIMEOUT_S = 30.0
PRODUCER_CONFIG = {"request_timeout_ms": 10_000, "delivery_timeout_ms": 25_000, "linger_ms": 2}
WRITER_PAUSE_S = (0.05, 0.15)
MAX_RECORDS = 4
ABORT_P, ZOMBIE_P, ZOMBIE_AT = 0.25, 0.05, 3
CTP_ABORT_P, CRASH_P, CTP_ABORT_AT, CRASH_AT = 0.2, 0.03, 3, 6
CTP_BATCH = 50
FEED_RATE = 30.0                # records/s into CTP_IN


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class _Instance:
    """One Producer of a transactional id and its number."""

    def __init__(self, producer, number: int):
        self.producer, self.number = producer, number


class _Txn:
    """Drives one transactional id: instances, transactions and their history lines."""

    def __init__(self, tw: "TxnWorkload", name: str, rng: random.Random):
        self.tw, self.name, self.rng = tw, name, rng
        self.txid = f"chaos-{name}"
        self.instances = 0
        self.n = 0
        self.current: _Instance | None = None
        self.in_txn = False
        self.committed = 0
        self.staged = False             # the run's sure zombie (writers) or crash (pipeline)

    def new_instance(self) -> _Instance | None:
        """A new Producer of the id, initialised (fencing every older one), or None."""
        self.instances += 1
        k = self.instances
        h = self.tw.history
        h.record("invoke", "txn-init", txid=self.txid, instance=k)
        producer = self.tw.cluster.producer(transactional_id=self.txid,
                                            transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
                                            **PRODUCER_CONFIG)
        try:
            producer.init_transactions(INIT_TIMEOUT_S)
        except KafkaError as exc:
            h.record("info", "txn-init", txid=self.txid, instance=k, error=_error(exc))
            self.tw.retire(producer)
            return None
        h.record("ok", "txn-init", txid=self.txid, instance=k,
                 producer_id=producer.txn.producer_id, epoch=producer.txn.producer_epoch)
        return _Instance(producer, k)

    def ensure_instance(self) -> bool:
        if self.current is None:
            self.current = self.new_instance()
        return self.current is not None

    def replace(self) -> None:
        """The current instance is given up; the next one will fence it."""
        if self.current is not None:
            self.tw.retire(self.current.producer)
        self.current = None

    def begin(self) -> tuple[_Instance, str] | None:
        """Begin a transaction on the current instance: (instance, label), or None when it
        could not begin (the instance is replaced)."""
        inst = self.current
        label = self.next_label(inst)
        try:
            inst.producer.begin_transaction()
        except KafkaError:
            self.replace()
            return None
        self.in_txn = True
        return inst, label

    def next_label(self, inst: _Instance) -> str:
        self.n += 1
        return f"{self.name}.{inst.number}.{self.n}"

    def end(self, inst: _Instance, label: str, action: str, keys: list, futures: list,
            **extra) -> bool:
        """commit_transaction or abort_transaction, recorded; True when it returned."""
        h = self.tw.history
        h.record("invoke", "txn-end", txid=self.txid, instance=inst.number, txn=label,
                 action=action, keys=keys, **extra)
        try:
            if action == "commit":
                inst.producer.commit_transaction(END_TIMEOUT_S)
            else:
                inst.producer.abort_transaction(END_TIMEOUT_S)
        except KafkaError as exc:
            h.record("info", "txn-end", txid=self.txid, instance=inst.number, txn=label,
                     action=action, error=_error(exc))
            return False
        acked = []
        for key, f in zip(keys, futures):
            if f.done() and f.exception() is None:
                md = f.result()
                acked.append([key, md.partition, md.offset])
        h.record("ok", "txn-end", txid=self.txid, instance=inst.number, txn=label,
                 action=action, records=acked)
        if action == "commit":
            self.committed += 1
        self.tw.count(action)
        return True

    def settle(self, inst: _Instance, label: str, action: str, keys, futures, **extra
               ) -> str | None:
        """End the transaction as asked; a failed commit is followed by an abort. How it
        ended ("commit" / "abort"), None when unresolved."""
        if self.end(inst, label, action, keys, futures, **extra):
            return action
        if action == "commit" and self.end(inst, label, "abort", keys, futures, **extra):
            return "abort"
        self.tw.count("unresolved")
        return None

    def close(self) -> None:
        """At the end: the current instance closes; if it was given up, one more instance
        fences it so nothing stays open (else the coordinator's timeout would end it)."""
        if self.current is None and self.instances:
            self.current = self.new_instance()
        if self.current is not None:
            self.tw.retire(self.current.producer)
            self.current = None


class _Writer(_Txn):
    def run(self) -> None:
        stop = self.tw.stop_writers
        while not stop.is_set():
            if not self.ensure_instance():
                stop.wait(0.5)           # pacing the next init attempt
                continue
            self.transaction()
            stop.wait(self.rng.uniform(*WRITER_PAUSE_S))
        self.close()

    def transaction(self) -> None:
        begun = self.begin()
        if begun is None:
            return
        inst, label = begun
        p = inst.producer
        keys, futures, failed = [], [], False
        for j in range(self.rng.randint(1, MAX_RECORDS)):
            key = f"{label}:{j}"
            try:
                futures.append(p.send(TXN_TOPIC, key.encode(), key=key.encode()))
                keys.append(key)
            except KafkaError:
                failed = True
                break
        successor = None
        if not failed and (self.rng.random() < ZOMBIE_P or
                           (not self.staged and self.n >= ZOMBIE_AT)):
            successor = self.new_instance()      # inst is a zombie from here on
            if successor is not None:
                self.staged = True
                key = f"{label}:{len(keys)}"
                try:
                    futures.append(p.send(TXN_TOPIC, key.encode(), key=key.encode()))
                    keys.append(key)
                except KafkaError:
                    pass
        action = "abort" if failed or (successor is None and self.rng.random() < ABORT_P) \
            else "commit"
        ended = self.settle(inst, label, action, keys, futures)
        self.in_txn = False
        if successor is not None:
            self.tw.retire(p)
            self.current = successor
        elif ended is None:
            self.replace()


class _Pipeline(_Txn):
    """Consume-transform-produce: CTP_IN → out-<value> on CTP_OUT, offsets in the transaction."""

    def __init__(self, tw: "TxnWorkload", rng: random.Random):
        super().__init__(tw, "ctp", rng)
        self.consumer = None
        self.consumers = 0

    def new_consumer(self):
        consumer = self.tw.cluster.consumer(group_id=CTP_GROUP, enable_auto_commit=False,
                                            isolation_level="read_committed",
                                            session_timeout_ms=6000, heartbeat_interval_ms=1000)
        consumer.subscribe([CTP_IN])
        self.consumers += 1
        self.tw.history.record("info", "ctp-consumer", number=self.consumers)
        return consumer

    def drop_consumer(self) -> None:
        if self.consumer is not None:
            try:
                self.consumer.close(timeout_ms=10_000)
            except Exception as exc:  # closing a consumer whose coordinator is down: go on
                self.tw.history.record("info", "ctp-consumer-close", error=_error(exc))
            self.consumer = None

    def run(self) -> None:
        stop = self.tw.stop_pipeline
        while not stop.is_set():
            if not self.ensure_instance():     # the producer first: it settles the old txn
                stop.wait(0.5)                 # pacing the next init attempt
                continue
            if self.consumer is None:
                self.consumer = self.new_consumer()
            try:
                records = self.consumer.poll(timeout_ms=200, max_records=CTP_BATCH)
            except KafkaError:
                continue
            if records:
                self.transaction(records)
        self.drop_consumer()
        self.close()

    def transaction(self, records) -> None:
        begun = self.begin()
        if begun is None:
            self.rewind()
            return
        inst, label = begun
        p = inst.producer
        keys, futures, inputs, offsets = [], [], [], {}
        failed = False
        try:
            for j, r in enumerate(records):
                key = f"{label}:{j}"
                futures.append(p.send(CTP_OUT, b"out-" + r.value, key=key.encode(),
                                      partition=r.partition))
                keys.append(key)
                inputs.append([r.partition, r.offset, r.value.decode()])
                offsets[(r.topic, r.partition)] = max(offsets.get((r.topic, r.partition), 0),
                                                      r.offset + 1)
            p.send_offsets_to_transaction(offsets, self.consumer.group_metadata(),
                                          END_TIMEOUT_S)
        except KafkaError:
            failed = True
        extra = {"inputs": inputs, "offsets": {str(tp[1]): o for tp, o in offsets.items()}}
        crash = self.rng.random() < CRASH_P or (not self.staged and self.n >= CRASH_AT)
        if crash and not failed:
            self.staged = True
            self.tw.history.record("info", "txn-abandon", txid=self.txid, instance=inst.number,
                                   txn=label, keys=keys, **extra)
            self.in_txn = False
            self.current = None            # left open: the next instance fences it
            self.tw.retire(p)
            self.drop_consumer()
            return
        action = "abort" if failed or self.rng.random() < CTP_ABORT_P or \
            self.n == CTP_ABORT_AT else "commit"
        ended = self.settle(inst, label, action, keys, futures, **extra)
        self.in_txn = False
        if ended is None:
            self.replace()
            if not self.ensure_instance():
                self.drop_consumer()       # restarts from the committed offsets
                return
        if ended != "commit":              # aborted (a failed commit too) or unresolved
            self.rewind()

    def rewind(self) -> None:
        """Seek back to the group's committed offsets (a new consumer if that fails)."""
        consumer = self.consumer
        if consumer is None:
            return
        try:
            tps = consumer.assignment()
            committed = consumer.committed(tps) if tps else {}
            for tp in tps:
                if committed.get(tp) is None:
                    consumer.seek_to_beginning([tp])
                else:
                    consumer.seek(tp, committed[tp])
        except KafkaError:
            self.drop_consumer()


class TxnWorkload:
    def __init__(self, cluster, history, rng: random.Random, *, writers: int = 2,
                 partitions: int = 3):
        self.cluster, self.history = cluster, history
        self.partitions = partitions
        self.writers = [_Writer(self, f"w{i}", random.Random(rng.random()))
                        for i in range(writers)]
        self.pipeline = _Pipeline(self, random.Random(rng.random()))
        self.rng = random.Random(rng.random())         # coordinator fault targets
        self.stop_writers, self.stop_pipeline = threading.Event(), threading.Event()
        self.stop_all = threading.Event()
        self.threads: dict[str, threading.Thread] = {}
        self.retired: list = []
        self.feed = None
        self.counts: dict[str, int] = {}
        self.fed = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()

    # -- setup ------------------------------------------------------------------------------------
    def create_topics(self) -> None:
        admin = self.cluster.admin()
        for topic in (TXN_TOPIC, CTP_IN, CTP_OUT):
            admin.create_topic(topic, self.partitions, 3, {"min.insync.replicas": 2})
        self.history.record("info", "txn-meta", writers=[w.txid for w in self.writers],
                            pipeline=self.pipeline.txid, txn_topic=TXN_TOPIC, ctp_in=CTP_IN,
                            ctp_out=CTP_OUT, ctp_group=CTP_GROUP, partitions=self.partitions,
                            transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
                            hang_bound_ms=HANG_BOUND_MS)

    def start(self) -> None:
        for w in self.writers:
            self._spawn(w.run, f"chaos-txn-{w.name}")
        self._spawn(self.pipeline.run, "chaos-ctp")
        self._spawn(self._feed, "chaos-ctp-feed")
        self._spawn(self._live_read, "chaos-txn-reader")

    def _spawn(self, target, name: str) -> None:
        def guarded():
            try:
                target()
            except Exception as exc:  # a dead workload thread must fail the run, not hide
                self.errors.append(f"{name}: {_error(exc)}")
                raise
        t = threading.Thread(target=guarded, name=name, daemon=True)
        t.start()
        self.threads[name] = t

    def count(self, what: str) -> None:
        with self._lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def retire(self, producer) -> None:
        """Close a producer given up; one that does not close in time is kept to close at
        the end (its batches may still be in flight)."""
        try:
            producer.close(5.0)
        except Exception:  # still sending (a paused leader): closed again in stop()
            self.retired.append(producer)

    @property
    def started(self) -> bool:
        """Every writer and the pipeline committed at least once."""
        return all(w.committed for w in self.writers) and self.pipeline.committed > 0

    def health_topics(self) -> list[str]:
        return [TXN_TOPIC, CTP_IN, CTP_OUT] + (
            [TXN_STATE_TOPIC] if TXN_STATE_TOPIC in self.cluster.admin().list_topics() else [])

    # -- the feed and the live reader ---------------------------------------------------------------
    def _feed(self) -> None:
        producer = self.cluster.producer(acks="all", enable_idempotence=True, linger_ms=2)
        self.feed = producer
        n = 0
        while not self.stop_writers.wait(1 / FEED_RATE):     # pacing
            value = f"in-{n}"
            n += 1
            self.history.record("invoke", "ctp-feed", value=value)
            try:
                producer.send(CTP_IN, value.encode(), key=value.encode()).add_done_callback(
                    lambda f, v=value: self._fed(v, f))
            except KafkaError as exc:
                self.history.record("info", "ctp-feed", value=value, error=_error(exc))

    def _fed(self, value: str, future) -> None:
        exc = future.exception()
        if exc is not None:
            self.history.record("info", "ctp-feed", value=value, error=_error(exc))
            return
        md = future.result()
        self.history.record("ok", "ctp-feed", value=value, partition=md.partition,
                            offset=md.offset)
        with self._lock:
            self.fed += 1

    def _live_read(self) -> None:
        consumer = self.cluster.consumer(isolation_level="read_committed")
        consumer.assign([(t, p) for t in (TXN_TOPIC, CTP_OUT) for p in range(self.partitions)])
        for tp in consumer.assignment():
            consumer.seek(tp, 0)
        while not self.stop_all.is_set():
            try:
                records = consumer.poll(timeout_ms=200)
            except KafkaError:    # a partition without leader right now: next poll
                continue
            for r in records:
                self.history.record("ok", "txn-read", isolation="read_committed",
                                    topic=r.topic, partition=r.partition, offset=r.offset,
                                    key=r.key.decode(), value=r.value.decode())

    # -- coordinator faults -----------------------------------------------------------------------
    def coordinator(self, txid: str) -> int:
        """The broker leading the transactional id's `__transaction_state` partition."""
        parts = self.cluster.admin().describe_topic(TXN_STATE_TOPIC)
        return parts[partition_for(txid, len(parts))].leader

    def _target(self) -> tuple[_Txn, int]:
        """A transactional id (a writer or the pipeline), once it is inside a transaction
        (so the fault lands mid-transaction), and its coordinator's broker."""
        who = self.rng.choice(self.writers + [self.pipeline])
        try:
            wait_for(lambda: who.in_txn, 5, f"{who.txid} inside a transaction")
        except RequestTimedOut:
            pass                        # it is between transactions: attack anyway
        broker = self.coordinator(who.txid)
        if broker < 0:
            broker = self.rng.choice(self.cluster.facts["brokers"])
        return who, broker

    def kill_coordinator(self, injector) -> dict:
        who, broker = self._target()
        injector.kill_broker(broker, restart=True)
        return {"kind": "kill-txn-coordinator", "target": f"broker-{broker}", "partition": None,
                "broker": broker, "txid": who.txid}

    def pause_coordinator(self, injector) -> dict:
        who, broker = self._target()
        pid = ray.get(self.cluster.broker_actor(broker).pid.remote(), timeout=30)
        return dict(injector.pause_pid(pid, f"broker-{broker}"), kind="pause-txn-coordinator",
                    partition=None, broker=broker, txid=who.txid)

    # -- the end ---------------------------------------------------------------------------------
    def stop_writing(self) -> None:
        """The writers end their transaction and stop; the feed stops."""
        self.stop_writers.set()
        for name, t in self.threads.items():
            if name.startswith("chaos-txn-w"):
                t.join(2 * END_TIMEOUT_S + INIT_TIMEOUT_S)
        if self.feed is not None:
            try:
                self.feed.close(120.0)
            except KafkaError as exc:   # still unanswered: those feeds stay indeterminate
                self.errors.append(f"feed close: {exc}")
        self.threads["chaos-ctp-feed"].join(30)

    def finish(self, timeout_s: float = 180.0) -> None:
        """The pipeline catches up and stops; LSO = HW is awaited; the final reads."""
        self._catch_up(timeout_s)
        self.history.record("info", "txn-quiesce")
        self._wait_stable((TRANSACTION_TIMEOUT_MS + HANG_BOUND_MS) / 1000)
        for topic in (TXN_TOPIC, CTP_OUT):
            for isolation in ("read_committed", "read_uncommitted"):
                self._read_all(topic, isolation, timeout_s)
        self._read_all(CTP_IN, "read_uncommitted", timeout_s)
        self._final_hw()

    def _catch_up(self, timeout_s: float) -> None:
        tps = [(CTP_IN, p) for p in range(self.partitions)]
        reader = self.cluster.consumer()
        ends = reader.end_offsets(tps)
        reader.close()
        admin = self.cluster.admin()

        def caught_up():
            try:
                committed = admin.committed_offsets(CTP_GROUP, CTP_IN)
            except KafkaError:
                return False
            return all(committed.get(tp, 0) >= end for tp, end in ends.items())
        try:
            wait_for(caught_up, timeout_s, "the pipeline consumed and committed CTP_IN")
        except RequestTimedOut as exc:
            self.errors.append(f"ctp: {exc}")
        finally:
            self.stop_pipeline.set()
            self.threads["chaos-ctp"].join(2 * END_TIMEOUT_S + INIT_TIMEOUT_S)
        # require_stable: the pipeline's last offsets are in once its markers are
        fresh = self.cluster.consumer(group_id=CTP_GROUP, enable_auto_commit=False,
                                      isolation_level="read_committed")
        committed = wait_for(lambda: self._committed(fresh, tps), 60,
                             "the pipeline's committed offsets")
        fresh.close()
        self.history.record("ok", "ctp-final", committed={str(p): o for (_, p), o in
                                                          committed.items()},
                            ends={str(p): o for (_, p), o in ends.items()})

    @staticmethod
    def _committed(consumer, tps) -> dict | None:
        try:
            found = consumer.committed(tps)
        except KafkaError:
            return None
        return {tp: (-1 if o is None else o) for tp, o in found.items()}

    def _leader_info(self, topic: str) -> dict[int, dict | None]:
        """partition → its leader's partition_info (None: no answer)."""
        out: dict[int, dict | None] = {}
        try:
            parts = self.cluster.admin().describe_topic(topic)
        except Exception:  # ZooKeeper busy: nothing this round
            return out
        for p in parts:
            actor = self.cluster.broker_actor(p.leader) if p.leader >= 0 else None
            try:
                info = ray.get(actor.partition_info.remote((topic, p.partition)), timeout=5) \
                    if actor is not None else None
            except Exception:  # the leader is moving
                info = None
            out[p.partition] = dict(info, leader=p.leader, isr=list(p.isr)) \
                if info and info["role"] == "leader" else None
        return out

    def _wait_stable(self, limit_s: float) -> None:
        """Per partition of TXN_TOPIC and CTP_OUT, until LSO = HW (recorded with the time it
        took), at most `limit_s`."""
        t0 = time.monotonic()
        pending = {(t, p) for t in (TXN_TOPIC, CTP_OUT) for p in range(self.partitions)}
        last: dict[tuple, dict] = {}
        while pending and time.monotonic() - t0 < limit_s:
            for topic in (TXN_TOPIC, CTP_OUT):
                for p, info in self._leader_info(topic).items():
                    if (topic, p) not in pending or info is None:
                        continue
                    last[(topic, p)] = info
                    lso, hw = info["last_stable_offset"], info["high_watermark"]
                    if lso is not None and lso >= hw:
                        pending.discard((topic, p))
                        self.history.record("ok", "txn-stable", topic=topic, partition=p,
                                            waited_ms=round((time.monotonic() - t0) * 1000, 1),
                                            last_stable_offset=lso, high_watermark=hw)
            if pending:
                time.sleep(0.1)          # polled: the coordinators write their markers
        for topic, p in sorted(pending):
            info = last.get((topic, p)) or {}
            self.history.record("fail", "txn-stable", topic=topic, partition=p,
                                waited_ms=round((time.monotonic() - t0) * 1000, 1),
                                last_stable_offset=info.get("last_stable_offset"),
                                high_watermark=info.get("high_watermark"))

    def _read_all(self, topic: str, isolation: str, timeout_s: float) -> None:
        consumer = self.cluster.consumer(isolation_level=isolation)
        tps = [(topic, p) for p in range(self.partitions)]
        f = "ctp-input-final" if topic == CTP_IN else "txn-final-read"

        def record(r) -> None:
            fields = {"partition": r.partition, "offset": r.offset, "value": r.value.decode()}
            if f == "txn-final-read":
                fields.update(isolation=isolation, topic=topic, key=r.key.decode())
            self.history.record("ok", f, **fields)
        try:
            read_to_end(consumer, tps, record, timeout_s, f"the final {isolation} read of {topic}")
        finally:
            consumer.close()

    def _final_hw(self) -> None:
        for topic in (TXN_TOPIC, CTP_OUT, CTP_IN):
            infos = wait_for(lambda t=topic: (i := self._leader_info(t)) and
                             len(i) == self.partitions and all(i.values()) and i, 60,
                             f"the leaders of {topic}")
            for p, info in sorted(infos.items()):
                self.history.record("ok", "txn-final-hw", topic=topic, partition=p,
                                    log_start_offset=info["log_start_offset"],
                                    high_watermark=info["high_watermark"],
                                    last_stable_offset=info["last_stable_offset"],
                                    isr=info["isr"], leader=info["leader"])

    def stop(self) -> None:
        """Everything stops (the run ends, finished or not)."""
        self.stop_writers.set()
        self.stop_pipeline.set()
        self.stop_all.set()
        for producer in self.retired:
            try:
                producer.close(1.0)
            except Exception:  # nothing more to do for it: the process ends
                pass
