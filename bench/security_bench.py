"""The cost of TLS and SASL: librdkafka produce and consume throughput over each kind of listener.

Setup: ONE local rayka cluster (3 broker actors, 2 controllers, embedded ZooKeeper) on the
Ray instance of this process, every broker with four listeners:
PLAINTEXT, SSL, SASL_SSL and SASL_PLAINTEXT (127.0.0.1, free ports). TLS uses throwaway
certificates (trustme: a CA and a server certificate for 127.0.0.1/localhost, PEM keystore;
clients verify the chain and the host name); SASL is SCRAM-SHA-256 (--mechanism) with a
user `bench` added by Admin.add_user (sasl.enabled.mechanisms SCRAM-SHA-256,SCRAM-SHA-512).
No authorizer on that cluster: every listener serves the same requests, only the transport
and the authentication differ. The clients run in this process (librdkafka's threads do the
I/O and the TLS), so on a small machine client and brokers share the same cores.

Measured per listener, one sample per run (after one unkept warm-up round over every
listener: a fresh cluster's first rounds run markedly slower; listener order rotated run by
run; a FRESH topic of 6 partitions, RF 3, min.insync.replicas 2 for every listener and run;
100-byte values):
1. set-up: "connect", Producer() creation to its first Metadata answer (list_topics: one
   connection with its TLS handshake and SASL SCRAM exchange; median of 5 fresh producers
   per run), where a handshake's cost shows; and "first delivery", Producer() creation to
   the first delivery report of the measured producer (bootstrap connection, metadata,
   InitProducerId, connections to the leaders, one acks=all produce). The latter carries
   librdkafka's own ~0.5 s wait on every listener alike (an idempotent producer created
   before any broker is up retries its producer-id request on a 500 ms timer).
2. produce: that idempotent acks=all Producer (linger.ms 5, librdkafka's batch defaults, as
   bench/wire_bench.py) produces N records (500,000; --quick 50,000) with produce() in a
   loop; the clock runs from the first produce() to flush() returning with every delivery
   report in (a failed delivery fails the bench).
3. consume: a Consumer assigned every partition from offset 0 reads the topic to its end
   (consume() batches of up to 10,000, never more than is left: bench/wire_bench.py's last
   consume() waits out its 1 s timeout), with fetch.queue.backoff.ms 10: librdkafka's
   default 1000 ms pauses fetching a partition for a second once its local queue is over
   queued.max.messages.kbytes, and a read's rate then swings between ~155 k and ~210 k
   records/s (one or two pauses) on any listener, even reading the same topic again, hiding
   any transport cost (~600 k records/s at 10 ms on the 2-CPU machine of the first results).
   The clock runs from Consumer() creation, so its connections, TLS and SASL are in the
   rate; its time to the first record is kept too (the consumer's set-up). 3 reads per run,
   a fresh Consumer each, the run's sample their median.
4. CPU per record: the broker processes' CPU (/proc of the 3 broker actors: handlers,
   replication, TLS) and this process's (librdkafka) over the produce and consume phases;
   the brokers' CPU per Produce request (everything the produce phase cost them, over the
   listeners' request counts); records per Produce and per Fetch request (the listener's
   counters).
With --acl, a SECOND cluster afterwards (the authorizer is per broker) with only SASL_SSL and
PLAINTEXT listeners and authorizer.class.name=kafka.security.authorizer.AclAuthorizer, ACLs
allowing User:bench Write and Read on the bench topics (prefixed) and Read on its groups:
the same measurements over SASL_SSL, reported as listener "SASL_SSL+ACL".

Output: the JSON (bench/common.py protocol) at --out (default bench/results/<date>-security.json),
a PNG bar chart beside it (same name, .png), a short table on stderr.

    .venv/bin/python bench/security_bench.py [--quick] [--runs 3] [--records N] [--acl]
        [--mechanism SCRAM-SHA-512] [--out bench/results/<date>-security.json]
"""

from __future__ import annotations

import datetime
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (arg_parser, emit, figure, local_cluster, machine_facts,  # noqa: E402
                          proc_cpu_s, produce_all, replicated_topic, say, self_cpu_s)

NAME = "security"
RESULTS = Path(__file__).resolve().parent / "results"
BROKERS, CONTROLLERS, PARTITIONS, VALUE = 3, 2, 6, 100
RECORDS = 500_000
QUICK_RECORDS = 50_000
TIMEOUT_S = 300.0
PROBE_S = 60.0
CONNECTS = 5
CONSUME_READS = 3
# librdkafka's default 1000 ms: a partition whose local queue passed queued.max.messages.kbytes
# is not fetched for a second, and a 500,000-record read then swings between ~155 k and ~210 k
# records/s (one or two such pauses) whatever the listener; at 10 ms it runs at ~600 k/s.
FETCH_QUEUE_BACKOFF_MS = 10
USER, PASSWORD = "bench", "bench-secret"
MECHANISM = "SCRAM-SHA-256"
TOPIC_PREFIX, GROUP_PREFIX = "sec-", "secg-"
LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT")
ACL_LISTENER = "SASL_SSL+ACL"


# ---------------------------------------------------------------- certificates, configs


def make_certs(directory: Path) -> dict[str, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1/localhost, as PEM files
    (the same recipe as tests/certs.py): {"ca": CA certificate, "server": key + chain}."""
    import trustme
    ca = trustme.CA(organization_name="rayka bench")
    server = ca.issue_cert("127.0.0.1", "localhost", common_name="127.0.0.1")
    paths = {"ca": directory / "ca.pem", "server": directory / "server.pem"}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    server.private_key_and_cert_chain_pem.write_to_path(str(paths["server"]))
    for p in paths.values():
        p.chmod(0o600)
    return paths


def broker_config(certs: dict, listeners, acl: bool = False) -> dict:
    config = {"listeners": ",".join(f"{name}://127.0.0.1:0" for name in listeners),
              "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs["server"]),
              "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}
    if acl:
        config["authorizer.class.name"] = "kafka.security.authorizer.AclAuthorizer"
    return config


def client_config(cluster, listener: str, certs: dict, mechanism: str) -> dict:
    """librdkafka settings to reach `listener` (SASL_SSL+ACL is SASL_SSL on the ACL cluster)."""
    protocol = listener.split("+")[0]
    config = {"bootstrap.servers": cluster.bootstrap_servers(protocol),
              "security.protocol": protocol}
    if "SSL" in protocol:
        config.update({"ssl.ca.location": str(certs["ca"]),
                       "ssl.endpoint.identification.algorithm": "https"})
    if protocol.startswith("SASL"):
        config.update({"sasl.mechanisms": mechanism, "sasl.username": USER,
                       "sasl.password": PASSWORD})
    return config


def allow_bench_user(admin) -> None:
    """ACLs for User:bench: Write and Read on topics "sec-*", Read on groups "secg-*"."""
    from protocol.security import acl as a

    def binding(rtype, name, op):
        return a.AclBinding(a.ResourcePattern(rtype, name, a.PatternType.PREFIXED),
                            a.AccessControlEntry(f"User:{USER}", "*", op,
                                                 a.AclPermissionType.ALLOW))
    got = admin.create_acls([binding(a.ResourceType.TOPIC, TOPIC_PREFIX, a.AclOperation.WRITE),
                             binding(a.ResourceType.TOPIC, TOPIC_PREFIX, a.AclOperation.READ),
                             binding(a.ResourceType.GROUP, GROUP_PREFIX, a.AclOperation.READ)])
    if any(code for code, _ in got):
        raise RuntimeError(f"create_acls: {got}")


# ---------------------------------------------------------------- CPU accounting


def broker_pids(cluster) -> list[int]:
    import ray
    return ray.get([b.pid.remote() for b in cluster.broker_actors()])


def handler_stats(cluster, listener: str, api: str) -> int:
    """Requests of `api` on `listener`, summed over the brokers."""
    import ray
    n = 0
    for stats in ray.get([b.kafka_stats.remote() for b in cluster.broker_actors()]):
        s = stats.get(listener, {}).get(api)
        if s:
            n += s["requests"]
    return n


class Meter:
    """CPU of the brokers and of this process, and one listener's request count."""

    def __init__(self, cluster, listener: str, api: str):
        self.cluster, self.listener, self.api = cluster, listener.split("+")[0], api
        self.pids = broker_pids(cluster)

    def __enter__(self):
        self.b0, self.c0 = proc_cpu_s(self.pids), self_cpu_s()
        self.h0 = handler_stats(self.cluster, self.listener, self.api)
        return self

    def __exit__(self, *exc):
        self.broker_s = proc_cpu_s(self.pids) - self.b0
        self.client_s = self_cpu_s() - self.c0
        self.requests = handler_stats(self.cluster, self.listener, self.api) - self.h0
        return False


# ---------------------------------------------------------------- clients


def new_topic(cluster) -> str:
    return replicated_topic(cluster, TOPIC_PREFIX, PARTITIONS, TIMEOUT_S)


def connect_once(config: dict, topic: str, times: int = CONNECTS) -> float:
    """Median seconds from Producer() creation to its first Metadata answer (one connection:
    TCP, TLS handshake, SASL exchange, Metadata), over `times` fresh producers."""
    from confluent_kafka import Producer
    took = []
    for _ in range(times):
        t_new = time.perf_counter()
        p = Producer(config)
        p.list_topics(topic, timeout=TIMEOUT_S)
        took.append(time.perf_counter() - t_new)
        del p                                # closes its connections
    return statistics.median(took)


def produce_once(config: dict, topic: str, n: int, meter: Meter) -> tuple[float, float]:
    """(set-up s, produce s): Producer() to the first delivery report, then n records."""
    from confluent_kafka import Producer
    first = []
    t_new = time.perf_counter()
    p = Producer({**config, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                  "queue.buffering.max.messages": 1_000_000})
    p.produce(topic, b"warm-up",
              on_delivery=lambda err, _m: first.append((time.perf_counter(), err)))
    p.flush(TIMEOUT_S)
    if not first or first[0][1] is not None:
        raise RuntimeError(f"first produce over {config['security.protocol']}: "
                           f"{first[0][1] if first else 'no delivery report'}")
    setup = first[0][0] - t_new
    with meter:
        elapsed = produce_all(p, topic, n, b"v" * VALUE, TIMEOUT_S)
    return setup, elapsed


def read_all(c, expected: int, deadline: float) -> float:
    """Consume `expected` records from the consumer's assignment; when the first arrived."""
    n, first = 0, None
    while n < expected:
        # never more than is left: consume() waits its whole timeout for num_messages
        msgs = c.consume(num_messages=min(10_000, expected - n), timeout=1.0)
        for m in msgs:
            if m.error() is not None:
                raise RuntimeError(f"consume: {m.error()}")
        n += len(msgs)
        if first is None and n:
            first = time.perf_counter()
        if time.perf_counter() > deadline:
            raise TimeoutError(f"consumer read {n} of {expected}")
    return first


def consume_once(config: dict, topic: str, expected: int, meter: Meter) -> tuple[float, float]:
    """(first record s, records/s): a Consumer assigned every partition from offset 0 reads
    the topic to its end; the clock runs from Consumer() creation (its connections, TLS and
    SASL are in the rate, a few tens of ms of a multi-second read), the time to the first
    record is kept apart as the consumer's set-up."""
    from confluent_kafka import Consumer, TopicPartition
    with meter:
        t_new = time.perf_counter()
        c = Consumer({**config, "group.id": f"{GROUP_PREFIX}{uuid.uuid4().hex[:6]}",
                      "enable.auto.commit": False, "enable.partition.eof": False,
                      "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS})
        try:
            c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
            first = read_all(c, expected, t_new + TIMEOUT_S)
            rate = expected / (time.perf_counter() - t_new)
        finally:
            c.close()
    return first - t_new, rate


def probe(cluster, listener: str, certs: dict, mechanism: str) -> float:
    """Wait until `listener` serves a produce (the SCRAM user and the ACLs reach the brokers
    by ZooKeeper notification); seconds it took. Also warms the listener up."""
    from confluent_kafka import Producer
    topic = new_topic(cluster)
    t0, errors = time.monotonic(), []
    try:
        while True:
            got = []
            p = Producer({**client_config(cluster, listener, certs, mechanism),
                          "message.timeout.ms": 10_000, "error_cb": errors.append})
            p.produce(topic, b"probe", on_delivery=lambda err, _m: got.append(err))
            p.flush(15)
            if got and got[0] is None:
                return time.monotonic() - t0
            if time.monotonic() - t0 > PROBE_S:
                raise RuntimeError(f"{listener} does not serve: {got[:1]} {errors[-1:]}")
            time.sleep(0.5)                  # pause between probes, not a sync
    finally:
        cluster.admin().delete_topic(topic, timeout_s=60)


def one_run(cluster, listener: str, certs: dict, mechanism: str, n: int) -> dict:
    """One sample of every KINDS key over `listener`, on a fresh topic (deleted after)."""
    config = client_config(cluster, listener, certs, mechanism)
    topic = new_topic(cluster)
    try:
        pm = Meter(cluster, listener, "PRODUCE")
        setup, elapsed = produce_once(config, topic, n, pm)
        reads = []                           # (first record s, records/s, meter) per read
        for _ in range(CONSUME_READS):
            cm = Meter(cluster, listener, "FETCH")
            reads.append((*consume_once(config, topic, n + 1, cm), cm))
        connect = connect_once(config, topic)    # not just after create_topic: settled
    finally:
        cluster.admin().delete_topic(topic, timeout_s=60)
    read = (n + 1) * len(reads)
    return {"produce": n / elapsed, "consume": statistics.median(r[1] for r in reads),
            "connect_s": connect, "setup_s": setup,
            "consume_setup_s": statistics.median(r[0] for r in reads),
            "produce_broker_cpu_us": 1e6 * pm.broker_s / n,
            "produce_client_cpu_us": 1e6 * pm.client_s / n,
            "produce_broker_us": 1e6 * pm.broker_s / max(pm.requests, 1),
            "produce_records_per_request": n / max(pm.requests, 1),
            "consume_broker_cpu_us": 1e6 * sum(r[2].broker_s for r in reads) / read,
            "consume_client_cpu_us": 1e6 * sum(r[2].client_s for r in reads) / read,
            "consume_records_per_fetch": read / max(sum(r[2].requests for r in reads), 1)}


def measure(cluster, listeners, certs, mechanism, n, runs, samples) -> None:
    """A warm-up round (not kept: the first rounds on a fresh cluster are markedly slower),
    then `runs` rounds over `listeners` (order rotated per round) into samples[listener]."""
    for listener in listeners:
        say(f"{listener}: ready after {probe(cluster, listener, certs, mechanism):.2f} s")
    for run_i in range(-1, runs):
        shift = max(run_i, 0) % len(listeners)
        for listener in listeners[shift:] + listeners[:shift]:
            got = one_run(cluster, listener, certs, mechanism, n)
            label = "warm-up" if run_i < 0 else f"run {run_i}"
            say(f"{label:>7} {listener:>15}: produce {got['produce']:>9,.0f} rec/s (connect "
                f"{1000 * got['connect_s']:5.1f} ms, first delivery {1000 * got['setup_s']:5.1f} "
                f"ms, broker {got['produce_broker_cpu_us']:.1f} + client "
                f"{got['produce_client_cpu_us']:.1f} µs CPU/rec), consume "
                f"{got['consume']:>9,.0f} rec/s (first record "
                f"{1000 * got['consume_setup_s']:.0f} ms, {got['consume_records_per_fetch']:,.0f}"
                f" rec/fetch)")
            if run_i >= 0:
                for key, value in got.items():
                    samples[listener][key].append(value)


# ---------------------------------------------------------------- the bench


KINDS = {  # sample key -> (figure suffix, unit, better)
    "produce": ("produce.records_per_s", "records/s", "higher"),
    "consume": ("consume.records_per_s", "records/s", "higher"),
    "connect_s": ("produce.connect_s", "s", "lower"),
    "setup_s": ("produce.setup_s", "s", "lower"),
    "consume_setup_s": ("consume.first_record_s", "s", "lower"),
    "produce_broker_cpu_us": ("produce.broker_cpu_us_per_record", "µs", "lower"),
    "produce_client_cpu_us": ("produce.client_cpu_us_per_record", "µs", "lower"),
    "produce_broker_us": ("produce.broker_cpu_us_per_request", "µs", "lower"),
    "produce_records_per_request": ("produce.records_per_request", "records", "higher"),
    "consume_broker_cpu_us": ("consume.broker_cpu_us_per_record", "µs", "lower"),
    "consume_client_cpu_us": ("consume.client_cpu_us_per_record", "µs", "lower"),
    "consume_records_per_fetch": ("consume.records_per_fetch", "records", "higher"),
}


def run(quick: bool = False, runs: int = 3, records: int | None = None, acl: bool = False,
        mechanism: str = MECHANISM) -> dict:
    import confluent_kafka
    n = records or (QUICK_RECORDS if quick else RECORDS)
    listeners = list(LISTENERS) + ([ACL_LISTENER] if acl else [])
    samples = {name: {k: [] for k in KINDS} for name in listeners}
    cert_dir = Path(tempfile.mkdtemp(prefix="rayka-security-bench-certs-"))
    try:
        certs = make_certs(cert_dir)
        with local_cluster("security", brokers=BROKERS, controllers=CONTROLLERS,
                           **broker_config(certs, LISTENERS)) as (cluster, _):
            cluster.admin().add_user(USER, PASSWORD)
            measure(cluster, list(LISTENERS), certs, mechanism, n, runs, samples)
        if acl:
            with local_cluster("secacl", brokers=BROKERS, controllers=CONTROLLERS,
                               **broker_config(certs, ("PLAINTEXT", "SASL_SSL"), acl=True)) \
                    as (cluster, _):
                admin = cluster.admin()
                admin.add_user(USER, PASSWORD)
                allow_bench_user(admin)
                measure(cluster, [ACL_LISTENER], certs, mechanism, n, runs, samples)
    finally:
        shutil.rmtree(cert_dir, ignore_errors=True)

    client = (f"confluent-kafka {confluent_kafka.version()} "
              f"(librdkafka {confluent_kafka.libversion()[0]})")
    params = dict(acks="all", idempotent=True, replication_factor=3, value_bytes=VALUE,
                  partitions=PARTITIONS, records=n, linger_ms=5)
    figures = []
    for listener in listeners:
        lp = dict(params, listener=listener,
                  sasl_mechanism=mechanism if listener.startswith("SASL") else None,
                  authorizer="AclAuthorizer" if listener == ACL_LISTENER else None)
        for key, (suffix, unit, better) in KINDS.items():
            tag = listener.lower().replace("+", "_")
            figures.append(figure(f"security.{tag}.{suffix}", unit, samples[listener][key],
                                  None, better, **lp))
    def med(listener, key):
        return statistics.median(samples[listener][key]) if samples[listener][key] else None
    relative = {listener: {k: (med(listener, k) / med("PLAINTEXT", k)
                               if med(listener, k) and med("PLAINTEXT", k) else None)
                           for k in ("produce", "consume", "connect_s", "setup_s")}
                for listener in listeners}
    setup = {"brokers": BROKERS, "controllers": CONTROLLERS, "zookeeper": "embedded",
             "listeners": list(LISTENERS), "acl_cluster": acl,
             "sasl": {"mechanism": mechanism, "enabled": "SCRAM-SHA-256,SCRAM-SHA-512",
                      "user": USER},
             "tls": "trustme CA + server certificate (PEM keystore), client verifies host name",
             "partitions_per_topic": PARTITIONS, "min_insync_replicas": 2, "records": n,
             "producer": {"acks": "all", "enable.idempotence": True, "linger.ms": 5,
                          "queue.buffering.max.messages": 1_000_000},
             "consumer": {"fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
                          "reads_per_run": CONSUME_READS},
             "connects_per_run": CONNECTS,
             "client": f"{client}, in this process", "quick": quick, "runs": runs,
             "machine": machine_facts()}
    return {"bench": NAME, "setup": setup, "figures": figures,
            "extra": {"relative_to_plaintext_median": relative,
                      "samples": {listener: samples[listener] for listener in listeners}}}


# ---------------------------------------------------------------- report


def medians(result: dict) -> dict[str, dict[str, dict]]:
    """listener -> sample key -> figure."""
    by_suffix = {suffix: key for key, (suffix, _, _) in KINDS.items()}
    out: dict[str, dict] = {}
    for f in result["figures"]:
        out.setdefault(f["params"]["listener"], {})[by_suffix[f["name"].split(".", 2)[2]]] = f
    return out


TABLE = [  # (header, sample key, scale, format; None: % vs PLAINTEXT of the column before)
    ("produce rec/s", "produce", 1, "{:,.0f}"), ("vs PT", None, 0, ""),
    ("consume rec/s", "consume", 1, "{:,.0f}"), ("vs PT", None, 0, ""),
    ("connect ms", "connect_s", 1e3, "{:.1f}"), ("1st dlv ms", "setup_s", 1e3, "{:.0f}"),
    ("1st rec ms", "consume_setup_s", 1e3, "{:.0f}"),
    ("brk µs/rec", "produce_broker_cpu_us", 1, "{:.2f}"),
    ("cli µs/rec", "produce_client_cpu_us", 1, "{:.2f}"),
    ("brk µs/req", "produce_broker_us", 1, "{:.0f}"),
]


def table(result: dict) -> str:
    """Medians per listener: throughput (and its change vs PLAINTEXT), set-up, CPU."""
    rows = medians(result)
    lines = [f"{'listener':<15}" + "".join(f" {h:>{max(len(h), 8)}}" for h, *_ in TABLE)]
    for listener, f in rows.items():
        cells, last = [], None
        for header, key, scale, fmt in TABLE:
            if key is None:
                change = f[last]["median"] / rows["PLAINTEXT"][last]["median"] - 1
                cells.append(f" {100 * change:>+{max(len(header), 8) - 1}.0f}%")
            else:
                cells.append(f" {fmt.format(scale * f[key]['median']):>{max(len(header), 8)}}")
                last = key
        lines.append(f"{listener:<15}" + "".join(cells))
    return "\n".join(lines)


def _bars(ax, x, rows, names, series, scale: float, fmt: str) -> None:
    """Grouped bars: one per (key, label, color) of `series` per listener; median, min–max."""
    import numpy as np
    width = 0.8 / len(series)
    for i, (key, label, color) in enumerate(series):
        fs = [rows[nm][key] for nm in names]
        med = np.array([scale * f["median"] for f in fs])
        lo, hi = np.array([scale * f["min"] for f in fs]), np.array([scale * f["max"] for f in fs])
        pos = x + (i - (len(series) - 1) / 2) * width
        ax.bar(pos, med, width, yerr=[med - lo, hi - med], capsize=3, color=color, label=label)
        for xi, m, top in zip(pos, med, hi):       # above the error bar, readable
            ax.annotate(fmt.format(m), (xi, top), textcoords="offset points", xytext=(0, 2),
                        ha="center", fontsize=7)
    ax.set_xticks(x, names, fontsize=7, rotation=15)
    ax.margins(y=0.1)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=len(series),
              frameon=False)


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    rows = medians(result)
    names = list(rows)
    x = np.arange(len(names))
    setup = result["setup"]
    fig, (ax, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4.8),
                                       gridspec_kw={"width_ratios": [2, 1, 1]})
    _bars(ax, x, rows, names,
          [("produce", "produce (acks=all, idempotent, linger 5 ms)", "#3b6ea5"),
           ("consume", "consume (fetch.queue.backoff.ms 10; median of 3 reads a run)",
            "#e67e22")],
          1e-3, "{:,.0f} k")
    ax.set_ylabel("records/s (median of runs, min–max)")
    ax.set_title(f"throughput: {setup['records']:,} × {VALUE} B per run, 6 partitions, RF 3, "
                 f"{setup['runs']} run(s)", fontsize=9)
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f} k"))
    _bars(ax2, x, rows, names, [("connect_s", "Producer() → first Metadata answer", "#16a085")],
          1e3, "{:.1f}")
    ax2.set_ylabel("ms (median, min–max)")
    ax2.set_title("connect: TCP + TLS + SASL + Metadata", fontsize=9)
    _bars(ax3, x, rows, names, [("setup_s", "Producer() → first delivery", "#7f8c8d"),
                                ("consume_setup_s", "Consumer() → first record", "#c39bd3")],
          1e3, "{:.0f}")
    ax3.set_ylabel("ms (median, min–max)")
    ax3.set_title("client set-up (producer: librdkafka's ~0.5 s PID timer)", fontsize=9)
    fig.suptitle(f"rayka: cost of TLS and SASL ({setup['sasl']['mechanism']}) with librdkafka — "
                 f"{setup['machine']['cpus']} CPUs, clients and 3 brokers on one machine",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> dict:
    default_out = RESULTS / f"{datetime.date.today().isoformat()}-{NAME}.json"
    parser = arg_parser(__doc__, default_out, f"{QUICK_RECORDS:,} records instead of {RECORDS:,}")
    parser.add_argument("--records", type=int, default=None,
                        help=f"records per listener and run (default {RECORDS:,}; --quick "
                             f"{QUICK_RECORDS:,})")
    parser.add_argument("--acl", action="store_true",
                        help="also SASL_SSL with an AclAuthorizer (a second cluster)")
    parser.add_argument("--mechanism", default=MECHANISM,
                        choices=("SCRAM-SHA-256", "SCRAM-SHA-512"))
    args = parser.parse_args(argv)
    result = run(quick=args.quick, runs=args.runs, records=args.records, acl=args.acl,
                 mechanism=args.mechanism)
    emit(result, args.out)
    png = args.out.with_suffix(".png")
    plot(result, png)
    print(table(result), file=sys.stderr)
    print(f"wrote {args.out} and {png}", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
