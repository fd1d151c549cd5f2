"""The chaos workload: concurrent producers and consumers, and samplers, writing a history.

Rules:
- Producers: `producers` threads, each with its OWN idempotent acks=all Producer, send
  unique values `p<process>-<n>` keyed by themselves (murmur2 spreads them over every
  partition), or with `keys` > 0 keyed `k<n mod keys>` (`key_of`: a compacted topic's
  updates, each key overwritten again and again), paced at `rate_per_producer` records/s. Each send is recorded as `invoke`,
  then `ok` (partition, offset) or `info` (indeterminate: the producer gave up, the record
  may or may not be in the log). Nothing is recorded as `fail`: with retries a rayka
  producer cannot know that a failed record was not written.
- Consumers: `consumers` threads subscribed to the topic from the beginning record every
  record they see (`read`): the checker proves none was above the high watermark.
- Samplers record ZooKeeper's partition states and the active controller when they change,
  and every leader's high watermark (`hw-sample`): evidence for invariants 4 and 5 (the
  first `sample_partitions` partitions only: thousands of partitions would swamp them).
- `final_read()` (after healing) reads every partition from its log start to its high
  watermark with a fresh consumer (`final-read`, `final-hw`).
- `client="librdkafka"` drives the same workload through unmodified Kafka clients over the
  brokers' listeners (confluent-kafka: an idempotent acks=all Producer per producer thread,
  delivery reports as `ok`/`info`; a Consumer assigned every partition from offset 0); the
  samplers, the final read and the checker stay the same.
- Pacing uses sleeps: they set a rate, they never wait for an event.
"""

from __future__ import annotations

import threading
import time

import ray

from rayka.chaos.history import key_of
from rayka.client.admin import wait_for
from replicas.errors import KafkaError


CLIENTS = ("native", "librdkafka")


class _WireProducer:
    """A confluent-kafka Producer behind the native producer's close(timeout_s)."""

    def __init__(self, producer):
        self.producer = producer

    def close(self, timeout_s: float) -> None:
        left = self.producer.flush(timeout_s)
        if left:
            raise KafkaError(f"{left} librdkafka sends still unanswered after {timeout_s} s")


class Workload:
    def __init__(self, cluster, topic: str, history, *, producers: int = 3, consumers: int = 1,
                 rate_per_producer: float = 200.0, delivery_timeout_ms: int = 120_000,
                 sample_partitions: int = 64, client: str = "native", keys: int = 0):
        if client not in CLIENTS:
            raise ValueError(f"client {client!r}: one of {', '.join(CLIENTS)}")
        self.cluster, self.topic, self.history = cluster, topic, history
        self.client, self.keys = client, keys
        self.n_producers, self.n_consumers = producers, consumers
        self.rate = rate_per_producer
        self.sample_partitions = sample_partitions     # samplers watch the first N only
        self.delivery_timeout_ms = delivery_timeout_ms
        self.stop_producing = threading.Event()
        self.stop_all = threading.Event()
        self.threads: list[threading.Thread] = []
        self.producers: list = []
        self.acked = 0
        self.indeterminate = 0
        self._lock = threading.Lock()
        self.errors: list[str] = []

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> None:
        wire = self.client == "librdkafka"
        for i in range(self.n_producers):
            self._spawn(self._produce_wire if wire else self._produce, i, f"chaos-producer-{i}")
        for i in range(self.n_consumers):
            self._spawn(self._consume_wire if wire else self._consume, 100 + i,
                        f"chaos-consumer-{i}")
        self._spawn(self._sample, 0, "chaos-sampler")

    def _spawn(self, target, arg, name) -> None:
        def guarded():
            try:
                target(arg)
            except Exception as exc:  # a dead workload thread must fail the run, not hide
                self.errors.append(f"{name}: {type(exc).__name__}: {exc}")
                raise
        t = threading.Thread(target=guarded, name=name, daemon=True)
        t.start()
        self.threads.append(t)

    def stop(self, timeout_s: float = 180.0) -> None:
        """Stop producing, wait for every outstanding send to be answered, stop the rest."""
        self.stop_producing.set()
        for p in list(self.producers):
            try:
                p.close(timeout_s)
            except KafkaError as exc:   # still unanswered: those sends stay indeterminate
                self.errors.append(f"close: {exc}")
        self.stop_all.set()
        for t in self.threads:
            t.join(30)

    # -- producers ------------------------------------------------------------------------------------
    def _paced(self, process: int, send, after_burst=None) -> None:
        """Unique values `p<process>-<n>`, each recorded `invoke` then handed to `send`,
        in bursts at `rate` records/s until stop_producing; a send that raises is
        indeterminate."""
        burst = max(1, int(self.rate / 20))
        n = 0
        next_t = time.monotonic()
        while not self.stop_producing.is_set():
            for _ in range(burst):
                value = f"p{process}-{n}"
                n += 1
                self.history.record("invoke", "send", process=process, value=value)
                try:
                    send(value)
                except Exception as exc:   # KafkaError, BufferError, a fatal idempotence error
                    self._indeterminate(process, value, exc)
            if after_burst is not None:
                after_burst()
            next_t += burst / self.rate
            delay = next_t - time.monotonic()
            if delay > 0:
                self.stop_producing.wait(delay)   # pacing, not synchronisation
            else:
                next_t = time.monotonic()

    def _produce(self, process: int) -> None:
        producer = self.cluster.producer(acks="all", enable_idempotence=True, linger_ms=2,
                                         delivery_timeout_ms=self.delivery_timeout_ms)
        self.producers.append(producer)

        def send(value: str) -> None:
            future = producer.send(self.topic, value.encode(), key=key_of(value, self.keys).encode())
            future.add_done_callback(lambda f: self._answered(process, value, f))
        self._paced(process, send)

    def _produce_wire(self, process: int) -> None:
        """The same paced sends through librdkafka over the Kafka listeners."""
        from confluent_kafka import Producer
        producer = Producer({"bootstrap.servers": self.cluster.bootstrap_servers(),
                             "enable.idempotence": True, "acks": "all", "linger.ms": 2,
                             "message.timeout.ms": self.delivery_timeout_ms,
                             "partitioner": "murmur2_random", "log_level": 3})
        self.producers.append(_WireProducer(producer))

        def report(err, msg):
            value = msg.value().decode()
            if err is not None:
                self._indeterminate(process, value, RuntimeError(str(err)))
                return
            self.history.record("ok", "send", process=process, value=value,
                                partition=msg.partition(), offset=msg.offset())
            with self._lock:
                self.acked += 1

        def send(value: str) -> None:
            producer.produce(self.topic, value.encode(), key=key_of(value, self.keys).encode(),
                             on_delivery=report)
        self._paced(process, send, after_burst=lambda: producer.poll(0))

    def _answered(self, process: int, value: str, future) -> None:
        exc = future.exception()
        if exc is not None:
            self._indeterminate(process, value, exc)
            return
        meta = future.result()
        self.history.record("ok", "send", process=process, value=value,
                            partition=meta.partition, offset=meta.offset)
        with self._lock:
            self.acked += 1

    def _indeterminate(self, process: int, value: str, exc: BaseException) -> None:
        self.history.record("info", "send", process=process, value=value,
                            error=f"{type(exc).__name__}: {exc}")
        with self._lock:
            self.indeterminate += 1

    # -- consumers ------------------------------------------------------------------------------------
    def _consume(self, process: int) -> None:
        consumer = self.cluster.consumer()
        consumer.subscribe([self.topic])
        consumer.seek_to_beginning()
        while not self.stop_all.is_set():
            try:
                records = consumer.poll(timeout_ms=200)
            except KafkaError:     # a partition without leader right now: next poll
                continue
            for r in records:
                self.history.record("ok", "read", process=process, partition=r.partition,
                                    offset=r.offset, value=r.value.decode())

    def _consume_wire(self, process: int) -> None:
        from confluent_kafka import Consumer, TopicPartition
        consumer = Consumer({"bootstrap.servers": self.cluster.bootstrap_servers(),
                             "group.id": f"chaos-{process}", "enable.auto.commit": False,
                             "log_level": 3})
        try:
            partitions = len(self.cluster.admin().describe_topic(self.topic))
            consumer.assign([TopicPartition(self.topic, p, 0) for p in range(partitions)])
            while not self.stop_all.is_set():
                for m in consumer.consume(num_messages=1000, timeout=0.2):
                    if m.error() is None:
                        self.history.record("ok", "read", process=process,
                                            partition=m.partition(), offset=m.offset(),
                                            value=m.value().decode())
        finally:
            consumer.close()

    # -- samplers -------------------------------------------------------------------------------------
    def _sample(self, _arg) -> None:
        store = self.cluster.store
        last_zk: dict[int, tuple] = {}
        last_hw: dict[tuple, tuple] = {}
        last_controller = None
        while not self.stop_all.wait(0.2):        # the sampling period
            try:
                controller = self._controller_sample(store)
                states = {tp: st for tp, st in store.get_partition_states([self.topic]).items()
                          if tp[1] < self.sample_partitions}
            except Exception:  # ZooKeeper itself is under attack: sample next time
                continue
            if controller != last_controller and controller[0] is not None:
                self.history.record("ok", "controller-sample", controller_id=controller[0],
                                    epoch=controller[1])
                last_controller = controller
            for (_t, p), s in states.items():
                key = (s.leader, s.leader_epoch, tuple(s.isr))
                if last_zk.get(p) != key:
                    self.history.record("ok", "zk-sample", partition=p, leader=s.leader,
                                        leader_epoch=s.leader_epoch, isr=list(s.isr))
                    last_zk[p] = key
            self._sample_high_watermarks(states, last_hw)

    @staticmethod
    def _controller_sample(store) -> tuple:
        """(controller id, epoch) from two reads that agree: the epoch is read before and
        after /controller, so a failover in between cannot pair an id with another epoch."""
        before = store.get_controller_epoch()[0]
        controller = store.get_controller()
        if store.get_controller_epoch()[0] != before:
            return (None, None)
        return (controller, before)

    def _sample_high_watermarks(self, states, last_hw) -> None:
        refs = {}
        for (t, p), s in states.items():
            actor = self.cluster.broker_actor(s.leader) if s.leader >= 0 else None
            if actor is not None:
                refs[(p, s.leader)] = actor.partition_info.remote((t, p))
        for (p, broker), ref in refs.items():
            try:
                info = ray.get(ref, timeout=2)
            except Exception:  # that broker is down or paused: no sample
                continue
            if not info or info["role"] != "leader":
                continue
            key = (info["leader_epoch"], info["high_watermark"])
            if last_hw.get((p, broker)) != key:
                self.history.record("ok", "hw-sample", partition=p, broker=broker,
                                    leader_epoch=info["leader_epoch"],
                                    high_watermark=info["high_watermark"])
                last_hw[(p, broker)] = key

    # -- the end ---------------------------------------------------------------------------------------
    def final_read(self, timeout_s: float = 300.0) -> int:
        """Every partition from log start to HW, recorded; returns the records read."""
        admin = self.cluster.admin()
        infos = admin.describe_topic(self.topic)
        consumer = self.cluster.consumer()
        tps = [(self.topic, p.partition) for p in infos]
        total = 0

        def record(r) -> None:
            nonlocal total
            self.history.record("ok", "final-read", partition=r.partition, offset=r.offset,
                                value=r.value.decode())
            total += 1
        starts, ends = read_to_end(consumer, tps, record, timeout_s,
                                   f"the final read of {self.topic}")
        for p in infos:
            tp = (self.topic, p.partition)
            self.history.record("ok", "final-hw", partition=p.partition,
                                log_start_offset=starts[tp], high_watermark=ends[tp],
                                isr=list(p.isr), leader=p.leader)
        return total


def read_to_end(consumer, tps: list, on_record, timeout_s: float, what: str) -> tuple:
    """Read `tps` from their log start to the end offsets taken at the start, calling
    `on_record` on each record below them; returns (start offsets, end offsets). Records past
    the ends (a writer still at work) are not the read's business."""
    consumer.assign(tps)
    consumer.seek_to_beginning()
    ends = consumer.end_offsets(tps)
    starts = {tp: consumer.position(tp) for tp in tps}

    def done():
        for r in consumer.poll(timeout_ms=200):
            if r.offset < ends[(r.topic, r.partition)]:
                on_record(r)
        return all(consumer.position(tp) >= ends[tp] for tp in tps)
    wait_for(done, timeout_s, what)
    return starts, ends
