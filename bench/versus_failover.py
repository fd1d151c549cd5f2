"""Failover family of the side-by-side benchmark: how long a 3-broker cluster (topics RF 3,
min.insync.replicas 2) stops acknowledging acks=all writes when a broker or the controller
fails, and what a rolling restart under load costs. The same code runs against rayka and
Kafka (bench/versus.py's protocol); it only acts through bench.systems.System and librdkafka.

Rules:
- Every figure is one sample per run and better = lower. Before each run the cluster is
  healed (system.wait_healed: every broker up, every ISR full); each run uses a fresh topic
  (uuid), deleted once its clients are closed and the cluster is healed again.
- Clients are librdkafka with the same settings on both systems, its defaults otherwise:
  request.timeout.ms 30 s (in librdkafka only the ack timeout the broker enforces),
  socket.timeout.ms 60 s (how long a request in flight is waited for), message.timeout.ms
  300 s. Each system keeps its own default ZooKeeper session timeout (Kafka 18 s, rayka
  3 s): that is what is compared.
- No sleep synchronises anything: waits poll with a deadline; the only sleeps are poll
  intervals and the rolling-restart producer's pacing.
- A write that fails in the broker-kill or pause runs fails the bench (raise); in the
  rolling restart, failures, losses and duplicates are figures (lost has target 0).

Figures:
- failover.broker_kill.first_ack_s (s): a fresh 3-partition topic; a writer thread with an
  idempotent acks=all Producer (linger.ms 0) writes single 100-byte records to partition 0,
  one in flight (produce, then poll until its delivery report, then the next), recording
  (produce() time, delivery-report time, offset) per write. After 20 acknowledgements (5
  with quick) the leader L of partition 0 is killed: its pid asked first (broker_pids():
  asked inside the timed call, rayka's takes ~10 ms of Ray in which L still acknowledges
  writes sent after t_kill), then t_kill = monotonic just before system.kill_broker(L,
  pid=...), which signals at once and returns t_dead (the process gone). Figure = the time
  of the first acknowledgement received after t_dead, minus t_kill; an acknowledgement
  received less than 50 ms after t_dead of a write sent before t_kill is skipped as L's own
  answer sent before it died (no failover here takes under a second), and the next one counts.
  Notes: acknowledgements, the new leader and metadata_leader_moved_s (when the other
  brokers' Metadata, polled every 50 ms, first named another leader: the brokers' side).
- failover.leader_paused.first_ack_s (s): the same, but L is frozen with
  system.pause_broker(L, pid=...) (SIGSTOP; returns t_paused once /proc says stopped):
  the first acknowledgement received after t_paused (same 50 ms rule) minus the time the
  pause call started. L is resumed (SIGCONT) once that acknowledgement came, or on any error. The
  idempotent producer moves to the new leader only once its request in flight to the
  frozen one has timed out (socket.timeout.ms + 1 s, then an ApiVersion timeout on
  reconnecting): with librdkafka's default of 60 s this figure was 61-72 s on both
  systems, the client's alone, so this writer (and only it, on both systems) runs with
  socket.timeout.ms 5000 (PAUSE_CLIENT); the brokers' side is in the notes
  (metadata_leader_moved_s).
- failover.controller_kill.serving_s (s): t0 = monotonic; system.kill_controller(); then,
  until both succeed: CreateTopics of a fresh 1-partition topic with replication factor 2
  (RF 2: on Kafka the killed controller is also a broker and may still be down) through a
  fresh AdminClient per attempt (2 s request/operation timeout, any error retried; a topic
  that already exists counts as created), then an idempotent acks=all produce of one
  100-byte record to it acknowledged (a failed delivery is produced again). Figure = the
  time of that acknowledgement - t0.
  Notes: elected_s, from t0 to the first time system.controller_id() (polled every 50 ms
  by a thread) is >= 0 and differs from the killed id; None when the killed controller,
  restarted, won the election again (rayka: often), so it is not a figure.
- failover.rolling_restart.total_s (s), .lost, .duplicated, .failed_deliveries (records):
  a fresh 6-partition topic; a producer thread (idempotent, acks=all, linger.ms 5) sends
  records numbered 0, 1, 2, ... (value: the number, 12 digits, padded to 100 bytes) paced at
  2,000 records/s (500 with quick; a late send goes out at once); meanwhile
  system.restart_broker(b) for each broker in turn, each followed by system.wait_healed().
  total_s = from the first restart call to the last wait_healed returning. Then the producer
  stops and flushes; the whole topic is read back by a Consumer assigned every partition
  from offset 0 up to the end offsets (get_watermark_offsets). lost = numbers whose delivery
  report succeeded but that were not read; duplicated = reads beyond the first of a number;
  failed_deliveries = delivery reports with an error.

    .venv/bin/python bench/versus_failover.py rayka|kafka [--runs 1] [--quick] [--heap ...]
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import poll_timeout_s  # noqa: E402
from bench.systems import wait_until  # noqa: E402

RECORD = b"f" * 100
TIMEOUT_S = 180.0                       # every wait of a run; the slowest seen is ~72 s (pause)
POLL_S = 0.05                           # poll interval of the loops here
ATTEMPT_S = 2.0                         # one CreateTopics attempt after the controller kill
# an answer received this soon after the fault, to a write sent before it, was sent by the
# old leader before it died or froze: no failover measured here takes under a second
OLD_LEADER_S = 0.05
# the paused-leader runs' client, on both systems: a request in flight to a frozen broker is
# abandoned after socket.timeout.ms, so librdkafka's 60 s default would be all it measured
PAUSE_CLIENT = {"socket.timeout.ms": 5000}


def _producer(system, **extra):
    from confluent_kafka import Producer
    return Producer({"bootstrap.servers": system.bootstrap_servers(), "enable.idempotence": True,
                     "acks": "all", "linger.ms": 0, **extra})


def _r(x: float) -> float:
    return round(x, 4)


class AckWriter:
    """Back-to-back single-record writes to one partition, one in flight; per write
    (produce() time, delivery-report time, offset). Errors are kept, not raised."""

    def __init__(self, system, topic: str, partition: int, **config):
        self.producer = _producer(system, **config)
        self.topic, self.partition = topic, partition
        self.acks: list[tuple[float, float, int]] = []
        self.errors: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._abandon = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="failover-writer")

    def start(self) -> "AckWriter":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            box: list = []
            sent = time.monotonic()
            self.producer.produce(self.topic, RECORD, partition=self.partition,
                                  on_delivery=lambda err, msg: box.append(
                                      (time.monotonic(), err, msg.offset())))
            while not box and not self._abandon.is_set():
                self.producer.poll(0.1)          # returns as soon as the report is served
            if not box:
                return
            t, err, offset = box[0]
            if err is None:
                self.acks.append((sent, t, offset))
            else:
                self.errors.append((t, str(err)))

    def first_new_ack(self, t_call: float, t_fault: float):
        """The first acknowledgement received after t_fault that is not the old leader's
        answer to a write sent before the fault (see OLD_LEADER_S)."""
        for sent, got, offset in list(self.acks):
            if got >= t_fault and not (sent < t_call and got < t_fault + OLD_LEADER_S):
                return sent, got, offset
        return None

    def stop(self) -> None:
        """Ends after the write in flight is answered (or TIMEOUT_S), then closes."""
        self._stop.set()
        self._thread.join(TIMEOUT_S)
        if self._thread.is_alive():
            self._abandon.set()
            self._thread.join(10)
        self.producer.flush(10)
        self.producer.close()


def _broker_id(ask) -> int:
    """ask()'s broker id, -1 when there is none or the asking failed."""
    try:
        got = ask()
    except Exception:   # noqa: BLE001 - a system between leaders answers with errors
        return -1
    return -1 if got is None else got


def _finish(system, topic: str) -> float:
    """Heal, then delete the run's topic; the seconds healing took."""
    t0 = time.monotonic()
    system.wait_healed(TIMEOUT_S)
    healed = time.monotonic() - t0
    system.delete_topic(topic)
    return healed


# -- broker kill / leader paused ---------------------------------------------------------------
class LeaderWatch:
    """When Metadata first names a leader of partition 0 other than `old` (for the notes:
    the brokers' side of the failover, without the client's). Asked of the other brokers
    only, by a fresh client each time: a client that knows the frozen broker may send its
    Metadata request there and wait on it."""

    def __init__(self, system, topic: str, old: int):
        brokers = system.admin().list_topics(timeout=10).brokers
        self.others = ",".join(f"{b.host}:{b.port}" for i, b in brokers.items() if i != old)
        self.topic, self.old = topic, old
        self.t: float | None = None
        self.leader = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="failover-leader")

    def start(self) -> None:
        self._thread.start()

    def _leader(self) -> int:
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": self.others})
        return admin.list_topics(self.topic, timeout=5).topics[self.topic].partitions[0].leader

    def _run(self) -> None:
        while not self._stop.is_set():
            b = _broker_id(self._leader)
            if b >= 0 and b != self.old:
                self.t, self.leader = time.monotonic(), b
                return
            time.sleep(POLL_S)     # poll interval

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(15)


def leader_fault_once(system, fault: str, acks_before: int) -> dict:
    """fault "kill" (kill_broker) or "pause" (pause_broker, resumed after the first ack)."""
    topic = system.fresh_topic(f"fo-{fault}", 3, TIMEOUT_S)
    leader = system.leader_of(topic, 0)
    writer = AckWriter(system, topic, 0, **(PAUSE_CLIENT if fault == "pause" else {})).start()
    moved = LeaderWatch(system, topic, leader)
    paused = False
    try:
        wait_until(lambda: len(writer.acks) >= acks_before or writer.errors, TIMEOUT_S,
                   f"{acks_before} acknowledged writes")
        if writer.errors:
            raise RuntimeError(f"writes failed before the fault: {writer.errors[:3]}")
        pid = system.broker_pids()[leader]
        acks_at_fault = len(writer.acks)
        t_call = time.monotonic()
        if fault == "kill":
            t_fault = system.kill_broker(leader, pid=pid)
        else:
            paused = True
            t_fault = system.pause_broker(leader, pid=pid)
        moved.start()
        first = wait_until(lambda: writer.first_new_ack(t_call, t_fault), TIMEOUT_S,
                           f"an acknowledgement after the {fault} of broker {leader}")
    finally:
        if paused:
            system.resume_broker(leader)
        writer.stop()
        moved.stop()
    if writer.errors:
        raise RuntimeError(f"writes failed during the {fault} of broker {leader}: "
                           f"{writer.errors[:3]}")
    any_after = next(a for a in writer.acks if a[1] >= t_fault)
    healed = _finish(system, topic)
    return {"workload": f"leader_{fault}", "victim": leader, "new_leader": moved.leader,
            "acks_before_fault": acks_at_fault, "acks": len(writer.acks),
            "fault_call_s": _r(t_fault - t_call), "first_ack_s": _r(first[1] - t_call),
            "first_ack_offset": first[2],
            "first_ack_write_sent_after_fault": first[0] >= t_fault,
            "old_leader_answer_skipped": any_after != first,
            "metadata_leader_moved_s": _r(moved.t - t_call) if moved.t else None,
            "healed_after_s": _r(healed)}


# -- controller kill ---------------------------------------------------------------------------
def controller_kill_once(system) -> dict:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic
    topic = f"fo-ctl-{uuid.uuid4().hex[:8]}"
    producer = _producer(system)
    errors: list[str] = []
    elected: list[float] = []
    done = threading.Event()

    def watch(killed: int):
        while not done.is_set():
            c = _broker_id(system.controller_id)
            if c >= 0 and c != killed:
                elected.append(time.monotonic())
                return
            time.sleep(POLL_S)     # poll interval

    t0 = time.monotonic()
    killed, t_dead = system.kill_controller()
    watcher = threading.Thread(target=watch, args=(killed,), daemon=True,
                               name="failover-elected")
    watcher.start()
    deadline = t0 + TIMEOUT_S
    created = False
    attempts = 0
    try:
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no topic served within {TIMEOUT_S:g} s of the controller "
                                   f"kill: {errors[-3:]}")
            if not created:
                attempts += 1
                try:
                    # a fresh client: one that knew the dead controller keeps asking it;
                    # held in a name until the answer (a dropped client fails its futures)
                    admin = AdminClient({"bootstrap.servers": system.bootstrap_servers()})
                    admin.create_topics(
                        [NewTopic(topic, 1, 2, config={"min.insync.replicas": "2"})],
                        request_timeout=ATTEMPT_S, operation_timeout=ATTEMPT_S
                    )[topic].result(ATTEMPT_S + 5)
                    created = True
                except KafkaException as exc:
                    if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                        created = True
                    else:
                        errors.append(f"create: {exc.args[0].str()}")
                except Exception as exc:   # noqa: BLE001 - e.g. the future timing out
                    errors.append(f"create: {exc!r}")
                if not created:
                    time.sleep(0.1)        # poll interval between attempts
                    continue
            box: list = []
            producer.produce(topic, RECORD, on_delivery=lambda err, _m: box.append(
                (time.monotonic(), err)))
            while not box and time.monotonic() < deadline:
                producer.poll(0.1)         # returns as soon as the report is served
            if box and box[0][1] is None:
                t_serving = box[0][0]
                break
            if box:
                errors.append(f"produce: {box[0][1]}")
    finally:
        done.set()
        watcher.join(10)
        producer.flush(10)
        producer.close()
    t0h = time.monotonic()
    system.wait_healed(TIMEOUT_S)
    wait_until(lambda: _broker_id(system.controller_id) >= 0, TIMEOUT_S,
               "a controller")
    healed = time.monotonic() - t0h
    system.delete_topic(topic)
    distinct = sorted(set(errors))
    return {"workload": "controller_kill", "killed": killed, "dead_after_s": _r(t_dead - t0),
            "new_controller": _broker_id(system.controller_id),
            "elected_s": _r(elected[0] - t0) if elected and elected[0] <= t_serving else None,
            "serving_s": _r(t_serving - t0), "create_attempts": attempts,
            "errors": len(errors), "error_kinds": distinct[:6], "healed_after_s": _r(healed)}


# -- rolling restart under load ----------------------------------------------------------------
class PacedProducer:
    """Numbered records at `rate` per second to a topic (librdkafka picks partitions);
    the numbers acknowledged and failed come from the delivery reports."""

    def __init__(self, system, topic: str, rate: float):
        self.producer = _producer(system, **{"linger.ms": 5})
        self.topic, self.interval = topic, 1.0 / rate
        self.sent = 0
        self.acked: set[int] = set()
        self.failed: list[tuple[int, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="failover-paced")

    def _report(self, err, msg) -> None:
        seq = int(msg.value()[:12])
        if err is None:
            self.acked.add(seq)
        else:
            self.failed.append((seq, str(err)))

    def start(self) -> "PacedProducer":
        self.t_start = time.monotonic()
        self._thread.start()
        return self

    def _run(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            value = b"%012d" % self.sent
            value += b"." * (100 - len(value))
            try:
                self.producer.produce(self.topic, value, on_delivery=self._report)
            except BufferError:
                self.producer.poll(0.05)   # local queue full: let reports drain, then again
                continue
            self.sent += 1
            next_t += self.interval
            # the pacing interval; poll serves delivery reports meanwhile
            self.producer.poll(poll_timeout_s(next_t - time.monotonic()))

    def stop(self) -> tuple[int, float]:
        """Stop sending and flush; (reports still missing, seconds the sending lasted)."""
        self._stop.set()
        self._thread.join(30)
        lasted = time.monotonic() - self.t_start
        unanswered = self.producer.flush(TIMEOUT_S)
        self.producer.close()
        return unanswered, lasted


def read_back(system, topic: str, partitions: int) -> dict[int, int]:
    """{number: times read} over every partition from offset 0 to its end offset."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": system.bootstrap_servers(),
                         "group.id": f"fo-read-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        pos = {p: 0 for p in range(partitions)}
        counts: dict[int, int] = {}
        deadline = time.monotonic() + TIMEOUT_S
        while any(pos[p] < ends[p] for p in ends):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: read up to {pos}, end offsets {ends}")
            for m in consumer.consume(10_000, 1.0):
                if m.error() is not None:
                    raise RuntimeError(f"{topic}: consume error {m.error()}")
                pos[m.partition()] = max(pos[m.partition()], m.offset() + 1)
                seq = int(m.value()[:12])
                counts[seq] = counts.get(seq, 0) + 1
        return counts
    finally:
        consumer.close()


def rolling_restart_once(system, rate: float) -> dict:
    partitions = 6
    topic = system.fresh_topic("fo-roll", partitions, TIMEOUT_S)
    load = PacedProducer(system, topic, rate).start()
    restarts = []
    try:
        t0 = time.monotonic()
        for b in system.broker_ids():
            tb = time.monotonic()
            r = system.restart_broker(b, TIMEOUT_S)
            t_back = time.monotonic()
            system.wait_healed(TIMEOUT_S)
            restarts.append({**{k: (_r(v) if isinstance(v, float) else v) for k, v in r.items()},
                             "restart_call_s": _r(t_back - tb),
                             "healed_s": _r(time.monotonic() - t_back)})
        total = time.monotonic() - t0
    finally:
        unanswered, lasted = load.stop()
    counts = read_back(system, topic, partitions)
    lost = sorted(load.acked - counts.keys())
    duplicated = sum(c - 1 for c in counts.values() if c > 1)
    system.wait_healed(TIMEOUT_S)
    system.delete_topic(topic)
    return {"workload": "rolling_restart", "total_s": _r(total), "restarts": restarts,
            "sent": load.sent, "rate_achieved": _r(load.sent / lasted),
            "acked": len(load.acked), "failed": len(load.failed),
            "failed_first": load.failed[:5], "unanswered": unanswered,
            "read": sum(counts.values()), "distinct_read": len(counts),
            "lost": len(lost), "lost_first": lost[:20], "duplicated": duplicated,
            "duplicated_first": sorted(s for s, c in counts.items() if c > 1)[:20]}


# -- the family protocol -----------------------------------------------------------------------
def _note(sheet, run_no: int, r: dict) -> None:
    sheet.note("failover_runs", {"run": run_no, **r})
    print(f"# failover run {run_no}: {r}", file=sys.stderr, flush=True)


def run(system, sheet, runs: int, quick: bool) -> None:
    acks_before = 5 if quick else 20
    rate = 500.0 if quick else 2000.0
    kill = dict(partitions=3, rf=3, min_isr=2, record_bytes=100, acks_before=acks_before)
    for i in range(runs):
        system.wait_healed(TIMEOUT_S)
        r = leader_fault_once(system, "kill", acks_before)
        sheet.add("failover.broker_kill.first_ack_s", r["first_ack_s"], "s", "lower", **kill)
        _note(sheet, i, r)
    for i in range(runs):
        system.wait_healed(TIMEOUT_S)
        r = leader_fault_once(system, "pause", acks_before)
        sheet.add("failover.leader_paused.first_ack_s", r["first_ack_s"], "s", "lower",
                  **kill, **PAUSE_CLIENT)
        _note(sheet, i, r)
    for i in range(runs):
        system.wait_healed(TIMEOUT_S)
        r = controller_kill_once(system)
        sheet.add("failover.controller_kill.serving_s", r["serving_s"], "s", "lower",
                  partitions=1, rf=2, min_isr=2)
        _note(sheet, i, r)
    roll = dict(partitions=6, rf=3, min_isr=2, record_bytes=100, rate_per_s=rate,
                linger_ms=5)
    for i in range(runs):
        system.wait_healed(TIMEOUT_S)
        r = rolling_restart_once(system, rate)
        sheet.add("failover.rolling_restart.total_s", r["total_s"], "s", "lower", **roll)
        sheet.add("failover.rolling_restart.lost", r["lost"], "records", "lower", target=0,
                  **roll)
        sheet.add("failover.rolling_restart.duplicated", r["duplicated"], "records", "lower",
                  **roll)
        sheet.add("failover.rolling_restart.failed_deliveries", r["failed"], "records",
                  "lower", **roll)
        _note(sheet, i, r)


if __name__ == "__main__":
    from bench.versus import family_main
    family_main(run, __doc__, default_runs=1)
