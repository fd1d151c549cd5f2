"""Client quotas: a librdkafka producer / consumer at full speed under a byte-rate quota is
slowed to the quota, answers carry throttle_time_ms, nothing is refused or lost.

Setup: ONE local rayka cluster (1 broker actor, 1 controller, embedded ZooKeeper), a topic
of 1 partition, RF 1; 1,000-byte values. Each case sets a quota on its own client id with
Admin.alter_client_quotas (Kafka's /config/clients/<id>, picked up by the broker from the
change notification) and runs a confluent-kafka client flat out for DURATION_S seconds:
- produce at producer_byte_rate 1 MB/s and 4 MB/s: acks=1, linger.ms 5, batch.size 64 KiB
  (requests of 64 KiB: librdkafka's 1 MB default makes each throttle seconds long, the rate
  lumpy), a bounded local queue (queue.buffering.max.kbytes 2048) so the producer runs at
  the rate the broker lets it (produce() blocks on a full queue); every delivery report
  must succeed and the count delivered must equal the count produced;
- consume at consumer_byte_rate 2 MB/s: the topic is first filled without a quota; a
  consumer (assign, offset 0; max.partition.fetch.bytes 256 KiB) reads as fast as it can;
  offsets must come contiguous.
The rate reported is the STEADY rate: bytes acknowledged (or consumed) from STEADY_FROM_S
(12 s) over exactly STEADY_WINDOWS (3) whole quota windows of 11 s. Kafka bounds the bytes
in its sliding 11-sample window, not in every second: a fresh client's first ~10 s carry a
burst allowance of up to 10 s of quota (the `first` extra shows it), and that burst echoes
once per window as its samples expire, so an interval that is not a whole number of
windows reads up to ~20 % high or low. Also kept: the largest throttle_time_ms librdkafka saw
(its statistics' per-broker throttle max) and the ratio measured / quota (the acceptance is
1 ± 0.2).

Output: the JSON (bench/common.py protocol) at --out (default
bench/results/<date>-quota.json), a table on stderr.

    .venv/bin/python bench/quota_bench.py [--quick] [--runs 3] [--out ...]
"""

from __future__ import annotations

import datetime
import json
import time
import uuid

from common import ROOT, arg_parser, emit, figure, local_cluster, machine_facts, say

NAME = "quota"
DEFAULT_OUT = ROOT / "bench" / "results" / f"{datetime.date.today()}-quota.json"
WINDOW_S = 11.0                    # quota.window.num × quota.window.size.seconds
STEADY_FROM_S, STEADY_WINDOWS = 12.0, 3
DURATION_S = STEADY_FROM_S + STEADY_WINDOWS * WINDOW_S
VALUE = b"v" * 1000
CASES = (("produce", 1_000_000), ("produce", 4_000_000), ("consume", 2_000_000))


def _throttle_max(stats: list[str]) -> int:
    out = 0
    for s in stats:
        for b in json.loads(s).get("brokers", {}).values():
            out = max(out, int(b.get("throttle", {}).get("max", 0)))
    return out


def _steady(events: list[tuple[float, int]], t0: float, end: float, start_s: float
            ) -> tuple[float, float]:
    """(steady bytes/s from t0+start_s to end, bytes/s of the first 10 s)."""
    steady = sum(n for t, n in events if t - t0 >= start_s)
    first = sum(n for t, n in events if t - t0 < 10.0)
    return steady / max(end - (t0 + start_s), 1e-9), first / 10.0


def produce_case(bootstrap: str, topic: str, client_id: str, seconds: float) -> dict:
    from confluent_kafka import Producer
    stats, acks, failed = [], [], []
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1,
                  "linger.ms": 5, "queue.buffering.max.kbytes": 2048, "batch.size": 65536,
                  "statistics.interval.ms": 1000, "stats_cb": stats.append})

    def report(err, msg):
        if err is not None:
            failed.append(err)
        else:
            acks.append((time.monotonic(), len(msg.value())))
    produced = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        try:
            p.produce(topic, VALUE, on_delivery=report)
            produced += 1
        except BufferError:
            p.poll(0.005)
        p.poll(0)
    end = time.monotonic()
    left = p.flush(120)
    rate, first = _steady([a for a in acks if a[0] <= end], t0, end, STEADY_FROM_S)
    return {"rate": rate, "first": first, "throttle_max_ms": _throttle_max(stats),
            "produced": produced, "delivered": len(acks), "failed": len(failed),
            "unanswered": left}


def consume_case(bootstrap: str, topic: str, client_id: str, seconds: float) -> dict:
    from confluent_kafka import Consumer, TopicPartition
    stats, events = [], []
    c = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id,
                  "group.id": f"quota-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
                  "statistics.interval.ms": 1000, "stats_cb": stats.append,
                  "fetch.queue.backoff.ms": 10, "max.partition.fetch.bytes": 262144})
    c.assign([TopicPartition(topic, 0, 0)])
    expect, gaps = 0, 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for m in c.consume(1000, 0.2):
            if m.error():
                continue
            gaps += m.offset() != expect
            expect = m.offset() + 1
            events.append((time.monotonic(), len(m.value())))
    end = time.monotonic()
    c.poll(0)
    c.close()
    rate, first = _steady(events, t0, end, STEADY_FROM_S)
    return {"rate": rate, "first": first, "throttle_max_ms": _throttle_max(stats),
            "consumed": len(events), "gaps": gaps}


def fill(bootstrap: str, topic: str, nbytes: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20})
    for _ in range(nbytes // len(VALUE)):
        while True:
            try:
                p.produce(topic, VALUE)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(120):
        raise RuntimeError("fill: records left unanswered")


def run(quick: bool = False, runs: int = 3) -> dict:
    seconds = STEADY_FROM_S + WINDOW_S if quick else DURATION_S
    samples: dict[tuple[str, int], list[dict]] = {case: [] for case in CASES}
    with local_cluster("qb", brokers=1, controllers=1) as (cluster, _):
        admin = cluster.admin()
        bootstrap = cluster.bootstrap_servers()
        source = f"quota-src-{uuid.uuid4().hex[:6]}"
        admin.create_topic(source, 1, 1, timeout_s=60)
        fill(bootstrap, source, int(2_000_000 * seconds * 1.5) * runs)
        for run_i in range(runs):
            for kind, quota in CASES:
                client_id = f"{kind}-{quota}-{run_i}"
                key = "producer_byte_rate" if kind == "produce" else "consumer_byte_rate"
                admin.alter_client_quotas(client_id=client_id, set={key: quota})
                time.sleep(1.0)      # the broker reloads on the change notification
                if kind == "produce":
                    topic = f"quota-{uuid.uuid4().hex[:6]}"
                    admin.create_topic(topic, 1, 1, timeout_s=60)
                    got = produce_case(bootstrap, topic, client_id, seconds)
                    ok = got["failed"] == 0 and got["unanswered"] == 0 \
                        and got["delivered"] == got["produced"]
                else:
                    got = consume_case(bootstrap, source, client_id, seconds)
                    ok = got["gaps"] == 0
                if not ok:
                    raise RuntimeError(f"{kind} at {quota} B/s lost or refused records: {got}")
                samples[(kind, quota)].append(got)
                say(f"run {run_i}: {kind} under {quota / 1e6:g} MB/s: steady "
                    f"{got['rate'] / 1e6:.2f} MB/s ({got['rate'] / quota:.2f}x), first 10 s "
                    f"{got['first'] / 1e6:.2f} MB/s, throttle max {got['throttle_max_ms']} ms")
    figures = []
    for (kind, quota), got in samples.items():
        params = {"quota_bytes_per_s": quota, "client": "librdkafka", "value_bytes": len(VALUE),
                  "steady_from_s": STEADY_FROM_S, "duration_s": seconds}
        base = f"quota.{kind}.{quota // 1_000_000}mb"
        figures += [
            figure(f"{base}.steady_mb_per_s", "MB/s", [g["rate"] / 1e6 for g in got], **params),
            figure(f"{base}.ratio_to_quota", "x", [g["rate"] / quota for g in got],
                   better="lower", **params),
            figure(f"{base}.throttle_max_ms", "ms", [g["throttle_max_ms"] for g in got],
                   better="lower", **params)]
    return {"bench": NAME, "machine": machine_facts(),
            "setup": {"brokers": 1, "controllers": 1, "partitions": 1, "replication_factor": 1,
                      "value_bytes": len(VALUE), "duration_s": seconds, "runs": runs,
                      "quick": quick},
            "figures": figures,
            "extra": {f"{k}.{q}": got for (k, q), got in samples.items()}}


def main(argv=None) -> dict:
    args = arg_parser(__doc__, DEFAULT_OUT, "one steady window (23 s) per case").parse_args(argv)
    return emit(run(quick=args.quick, runs=args.runs), args.out)


if __name__ == "__main__":
    main()
