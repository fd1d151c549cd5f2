"""The log lifecycle: disk use under retention, cleaner throughput, and compression codecs.

Setup: one local rayka cluster (3 brokers, 2 controllers, embedded ZooKeeper), RF 3, acks=all,
the idempotent native producer; brokers check retention every second and run the cleaner
every second (log.retention.check.interval.ms, log.cleaner.backoff.ms = 1000).

Measured (one sample per run):
1. retention soak: a 3-partition topic with retention.bytes 1 MiB and segment.bytes 256 KiB
   per partition receives 100-byte records in bulk for `--soak-s` seconds (default 600, the
   issue's ten minutes; --quick 30). The bytes under the brokers' data directories for that
   topic are sampled every 2 s: lifecycle.retention.disk_mib_last_half_max (the largest
   sample of the second half: flat means it stays near 3 partitions x 3 replicas x (1 MiB
   + one segment)) and .disk_growth_ratio (last-half max / first-half max; 1.0 = flat).
   The series goes to "extra" and to a plot.
2. cleaner: a compacted topic (1 partition, segment.bytes 1 MiB, min.cleanable.dirty.ratio
   0.01) receives 40 MiB of updates to 1,000 keys (--quick 4 MiB); the cleaners' own
   rounds (bytes read and seconds, per broker) give lifecycle.cleaner.mib_per_s (all rounds'
   bytes / their seconds) and the bytes on disk after cleaning.
3. codecs: for none, gzip, snappy, lz4 and zstd, a fresh 1-partition topic receives 200,000
   JSON-like 100-byte records (--quick 20,000) by send_batch: lifecycle.codec.<c>.
   records_per_s (first send to last ack) and .disk_bytes_per_record (the leader's log).

The soak runs once, the other parts every run (`--runs 0`: the soak alone). Standalone, not in run_all's suite:
its ten-minute soak alone is half the suite's 20-minute budget.

    .venv/bin/python bench/lifecycle_bench.py [--quick] [--runs 3] [--soak-s 600] [--plot P]
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import arg_parser, emit, figure, local_cluster, machine_facts, say  # noqa: E402

NAME = "lifecycle"
DEFAULT_OUT = Path(__file__).resolve().parent / "out" / f"{NAME}.json"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TIMEOUT_S = 300.0


def topic_bytes(data_dir: str, topic: str) -> int:
    """Bytes of the topic's files on every broker; files that retention deletes while they
    are listed count as gone."""
    total = 0
    for broker in Path(data_dir).glob("broker-*"):
        for part in broker.glob(f"{topic}-*"):
            for f in part.iterdir():
                try:
                    total += f.stat().st_size
                except FileNotFoundError:
                    pass
    return total


def json_like(i: int) -> bytes:
    return (b'{"user":%d,"page":"/items/%d","ok":true,"ms":%d}' % (i % 977, i % 131, i % 50)
            ).ljust(100, b" ")


def soak(cluster, data_dir: str, seconds: float) -> list:
    """(seconds, bytes of the topic on disk) samples while producing for `seconds`."""
    topic = f"soak-{uuid.uuid4().hex[:6]}"
    cluster.admin().create_topic(topic, 3, 3, {"retention.bytes": 1 << 20,
                                               "segment.bytes": 256 << 10})
    stop, series = threading.Event(), []

    def sample():
        t0 = time.monotonic()
        while not stop.wait(2.0):
            series.append((round(time.monotonic() - t0, 1), topic_bytes(data_dir, topic)))
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    producer = cluster.producer(acks="all")
    value = b"s" * 100
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for p in range(3):
            producer.send_batch(topic, [value] * 2000, partition=p)
        producer.flush(TIMEOUT_S)
    producer.close()
    stop.set()
    sampler.join(10)
    return series


def cleaner_round(cluster, data_dir: str, mib: int) -> dict:
    import ray
    topic = f"cmp-{uuid.uuid4().hex[:6]}"
    cluster.admin().create_topic(topic, 1, 3, {"cleanup.policy": "compact",
                                               "segment.bytes": 1 << 20,
                                               "min.cleanable.dirty.ratio": 0.01})
    producer = cluster.producer(acks="all")
    n = mib * (1 << 20) // 100
    for start in range(0, n, 5000):
        producer.send_batch(topic, [json_like(i) for i in range(start, min(n, start + 5000))],
                            keys=[b"key-%04d" % (i % 1000) for i in range(start, min(n, start + 5000))],
                            partition=0)
    producer.flush(TIMEOUT_S)
    producer.close()
    written = topic_bytes(data_dir, topic)

    def rounds():
        per_broker = [[r for r in ray.get(b.cleaner_rounds.remote())
                       if r["tp"][0] == topic and r["swapped"]] for b in cluster.broker_actors()]
        done = all(per_broker) and topic_bytes(data_dir, topic) < written / 2
        return [r for rs in per_broker for r in rs] if done else None
    deadline = time.monotonic() + TIMEOUT_S
    got = None
    while time.monotonic() < deadline and got is None:
        got = rounds()
        time.sleep(1.0)                      # poll interval: cleaners run every second
    if got is None:
        raise TimeoutError("the cleaners did not clean the topic")
    read = sum(r["bytes_read"] for r in got)
    secs = sum(r["seconds"] for r in got)
    return {"mib_per_s": read / secs / (1 << 20), "written_bytes": written,
            "after_bytes": topic_bytes(data_dir, topic), "rounds": len(got)}


def codec_round(cluster, codec: str, n: int) -> tuple[float, float]:
    import ray
    topic = f"z-{codec}-{uuid.uuid4().hex[:6]}"
    cluster.admin().create_topic(topic, 1, 3)
    producer = cluster.producer(acks="all", compression_type=codec)
    values = [json_like(i) for i in range(n)]
    t0 = time.monotonic()
    for start in range(0, n, 10_000):
        producer.send_batch(topic, values[start:start + 10_000], partition=0)
    producer.flush(TIMEOUT_S)
    rate = n / (time.monotonic() - t0)
    producer.close()
    leader = cluster.admin().describe_topic(topic)[0].leader
    info = ray.get(cluster.broker_actor(leader).partition_info.remote((topic, 0)))
    return rate, info["size_bytes"] / n


def run(quick: bool = False, runs: int = 1, soak_s: float | None = None) -> dict:
    soak_s = soak_s if soak_s is not None else (30.0 if quick else 600.0)
    n_codec = 20_000 if quick else 200_000
    clean_mib = 4 if quick else 40
    samples: dict = {"disk_max": [], "growth": [], "cleaner": [], "cleaner_after": []}
    codec_rate = {c: [] for c in CODECS}
    codec_bytes = {c: [] for c in CODECS}
    with local_cluster("lc", log_retention_check_interval_ms=1000,
                       log_cleaner_backoff_ms=1000) as (cluster, data_dir):
        series = soak(cluster, data_dir, soak_s)
        half = len(series) // 2
        first = max(b for _, b in series[:half]) if half else 0
        last = max(b for _, b in series[half:])
        samples["disk_max"].append(last / (1 << 20))
        samples["growth"].append(last / first if first else float("nan"))
        say(f"soak {soak_s:.0f} s: disk max first half {first / 2**20:.1f} MiB, "
            f"second half {last / 2**20:.1f} MiB")
        for run_i in range(runs):
            c = cleaner_round(cluster, data_dir, clean_mib)
            samples["cleaner"].append(c["mib_per_s"])
            samples["cleaner_after"].append(c["after_bytes"])
            say(f"run {run_i}: cleaner {c['mib_per_s']:.1f} MiB/s over {c['rounds']} rounds; "
                f"{c['written_bytes'] / 2**20:.1f} MiB written -> {c['after_bytes'] / 2**20:.2f} MiB")
            for codec in CODECS:
                rate, per = codec_round(cluster, codec, n_codec)
                codec_rate[codec].append(rate)
                codec_bytes[codec].append(per)
                say(f"run {run_i}: {codec}: {rate:,.0f} rec/s, {per:.1f} B/record on disk")
    figures = [f for f in [
        figure("lifecycle.retention.disk_mib_last_half_max", "MiB", samples["disk_max"], None,
               "lower", soak_s=soak_s, partitions=3, rf=3, retention_bytes=1 << 20,
               segment_bytes=256 << 10),
        figure("lifecycle.retention.disk_growth_ratio", "ratio", samples["growth"], None,
               "lower", soak_s=soak_s),
        figure("lifecycle.cleaner.mib_per_s", "MiB/s", samples["cleaner"], None,
               written_mib=clean_mib, keys=1000),
        figure("lifecycle.cleaner.bytes_after", "bytes", samples["cleaner_after"], None, "lower",
               written_mib=clean_mib, keys=1000, replicas=3),
    ] if f["samples"]]
    for codec in CODECS if runs else ():
        figures += [
            figure(f"lifecycle.codec.{codec}.records_per_s", "records/s", codec_rate[codec],
                   None, records=n_codec, value_bytes=100),
            figure(f"lifecycle.codec.{codec}.disk_bytes_per_record", "bytes",
                   codec_bytes[codec], None, "lower", records=n_codec),
        ]
    setup = {"brokers": 3, "controllers": 2, "rf": 3, "acks": "all", "quick": quick,
             "runs": runs, "soak_s": soak_s, "machine": machine_facts()}
    return {"bench": NAME, "setup": setup, "figures": figures,
            "extra": {"soak_series_bytes": series}}


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    series = result["extra"]["soak_series_bytes"]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot([t for t, _ in series], [b / 2**20 for _, b in series])
    ax.set_xlabel("seconds of produce")
    ax.set_ylabel("MiB on disk (3 partitions x RF 3)")
    ax.set_title("retention.bytes 1 MiB, segment.bytes 256 KiB")
    ax.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path)


def main(argv=None) -> dict:
    parser = arg_parser(__doc__, DEFAULT_OUT, "30 s soak, 1/10 the data")
    parser.add_argument("--soak-s", type=float, default=None)
    parser.add_argument("--plot", type=Path, default=None)
    args = parser.parse_args(argv)
    result = run(quick=args.quick, runs=args.runs, soak_s=args.soak_s)
    if args.plot:
        plot(result, args.plot)
    return emit(result, args.out)


if __name__ == "__main__":
    main()
