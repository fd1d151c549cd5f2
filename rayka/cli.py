"""The `rayka` command: start/stop a cluster, inspect it, manage topics, produce, consume.

Rules:
- Every user error prints ONE line on stderr (`rayka: <KAFKA_NAME> (<code>): <why>`, or the
  launcher's / Ray's reason) and exits 1; argument errors exit 2, also in one line. No
  tracebacks for errors a user can cause.
- `rayka start` uses the Ray cluster given by `--address` (or RAY_ADDRESS) or runs a private
  Ray head it owns (rayka/ops/ray_head.py); every other command finds Ray through the state
  file `rayka start` wrote for `--name` (default "default"), or `--address`.
- `rayka start` takes Kafka's configs from `--config-file` (server.properties) and `--config
  KEY=VALUE`, keys as written (`start_config`); rayka's own warnings (followers an authorizer
  will refuse) go to stderr as `rayka: warning: ...`, one line each. Subcommands take
  `--name` / `--address` before or after their own words.
- `produce` reads lines from stdin (optionally `key<sep>value`) or generates `--count`
  records of `--size` bytes; it reports acknowledged records, and a progress bar on stderr.
- `consume` prints values (or `partition offset key value` with --print-offsets) to stdout
  from the earliest offset (or `--from latest`, or a group's committed offsets) until
  `--max-records` or `--timeout-ms` without new records.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

from controller.store_api import ZkStoreError
from controller.zookeeper.server import ZooKeeperLaunchError
from rayka.chaos.runner import FAULT_KINDS as FAULT_KINDS_DEFAULT
from rayka.chaos.runner import DISK_FAULT_KINDS, GROUP_FAULT_KINDS, TXN_FAULT_KINDS
from rayka.errors import RayUnavailable
from rayka.ops import (features_cli, groups_cli, quotas_cli, ray_head, security_cli,
                       transactions_cli, zookeeper_cli)
from rayka.ops.procs import pid_alive
from rayka.ops.properties import load_properties
from replicas.errors import InvalidRequest, KafkaError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line instead of usage + message
        print(f"rayka: error: {message}", file=sys.stderr)
        sys.exit(2)


def _config_value(value: str):
    return int(value) if value.lstrip("-").isdigit() else value


def _config_pairs(items) -> dict:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"--config wants key=value, got {item!r}")
        out[key] = _config_value(value)
    return out


def start_config(args) -> dict:
    """`rayka start`'s cluster-wide config: --config-file (Kafka's server.properties), then
    each --config over it, then --listeners / --advertised-listeners / --zookeeper-auth-file.
    Keys stay as written: a dotted key is Kafka's and is never rewritten
    (replicas/config_keys.py), so `listener.name.sasl_ssl.*` keeps its listener."""
    config = {}
    if args.config_file:
        try:
            config = {k: _config_value(v) for k, v in load_properties(args.config_file).items()}
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"--config-file {args.config_file}: "
                                             f"{exc.strerror or exc}") from None
    config.update(_config_pairs(args.config))
    for key in ("listeners", "advertised_listeners"):
        if getattr(args, key):
            config[key] = getattr(args, key)
    if args.zookeeper_auth_file:
        with open(args.zookeeper_auth_file) as f:
            config["zookeeper_auth"] = f.readline().strip()
    return config


def _broker_configs(items) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for item in items or []:
        broker, sep, pair = item.partition(":")
        if not sep or not broker.strip().isdigit():
            raise argparse.ArgumentTypeError(
                f"--broker-config wants ID:key=value, got {item!r}")
        out.setdefault(int(broker), {}).update(_config_pairs([pair]))
    return out


def _assignments(items) -> dict[int, list[int]]:
    out = {}
    for item in items or []:
        p, sep, brokers = item.partition("=")
        try:
            out[int(p)] = [int(b) for b in brokers.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"--assignment wants P=B1,B2,..., got {item!r}") from None
        if not sep:
            raise argparse.ArgumentTypeError(f"--assignment wants P=B1,B2,..., got {item!r}")
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rayka", description="A Kafka-style replicated log inside Ray.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    with_cluster = []

    def command(name, help_text):
        p = sub.add_parser(name, help=help_text)
        _cluster_options(p)
        with_cluster.append(p)
        return p

    p = command("start", "start (or re-attach to) a cluster")
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--controllers", type=int, default=2)
    p.add_argument("--zookeeper", help="ZooKeeper connect string (default: embedded server)")
    p.add_argument("--data-dir", help="broker data directory (default: a new temp dir)")
    p.add_argument("--num-cpus", type=int, help="CPUs of a private Ray head")
    p.add_argument("--no-dashboard", action="store_true",
                   help="run a private Ray head without Ray's dashboard (saves a little CPU)")
    p.add_argument("--broker-resource", default="auto",
                   help="Ray custom resource each broker takes one unit of, e.g. one per node "
                        "(auto: rayka_broker if the cluster has it; none: no placement)")
    p.add_argument("--control-resource", default="auto",
                   help="resource for controllers and the cluster host (auto: rayka_control)")
    p.add_argument("--config-file", metavar="FILE",
                   help="broker/controller configs in Kafka's server.properties format")
    p.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="broker/controller config, e.g. min.insync.replicas=2 (repeatable; "
                        "over --config-file)")
    p.add_argument("--broker-config", action="append", metavar="ID:KEY=VALUE",
                   help="one broker's own static config, e.g. 2:broker.rack=rack-b "
                        "(repeatable; over --config for that broker)")
    p.add_argument("--listeners", help="Kafka listeners each broker binds (default "
                   "PLAINTEXT://127.0.0.1:0: a free loopback port; on a cluster e.g. "
                   "PLAINTEXT://0.0.0.0:9092)")
    p.add_argument("--advertised-listeners", help="what brokers tell Kafka clients (default: "
                   "the listeners, a wildcard host replaced by the node's address)")
    p.add_argument("--zookeeper-auth-file", help="a file holding user:password: every rayka "
                   "ZooKeeper session authenticates with it and the cluster's znodes are "
                   "writable by it alone (ZooKeeper digest ACLs)")
    p = command("status", "controller, brokers, under-replicated and offline partitions")
    p.add_argument("--json", action="store_true")
    p = command("bootstrap-servers", "print host:port,... of the brokers' Kafka listeners")
    p.add_argument("--listener", default="PLAINTEXT", help="listener name (default PLAINTEXT)")
    command("stop", "shut the cluster down (and the Ray head rayka started)")
    p = command("restart-brokers", "rolling restart: controlled shutdown, restart, wait for "
                "full ISRs, one broker at a time")
    p.add_argument("--broker", type=int, action="append", help="only these (repeatable)")

    topics = sub.add_parser("topics", help="create, list, describe, delete topics")
    tsub = topics.add_subparsers(dest="topics_command", required=True, parser_class=_Parser)

    def topic_command(name, help_text, with_topic=True):
        p = tsub.add_parser(name, help=help_text)
        p.add_argument("--name", default="default", help="cluster name")
        p.add_argument("--address", default=os.environ.get("RAY_ADDRESS"))
        if with_topic:
            p.add_argument("topic")
        return p
    p = topic_command("create", "create a topic")
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--replication-factor", type=int, default=1)
    p.add_argument("--config", action="append", metavar="KEY=VALUE")
    topic_command("list", "list topics", with_topic=False)
    topic_command("describe", "leaders, replicas and ISR per partition")
    topic_command("delete", "delete a topic")
    p = topic_command("reassign", "move partitions to other brokers (waits until done)")
    p.add_argument("--assignment", action="append", required=True, metavar="P=B1,B2,...",
                   help="partition P onto brokers B1,B2,... (first = preferred leader)")
    p = topic_command("elect-leaders", "preferred-leader election (first replica leads)")
    p.add_argument("--unclean", action="store_true",
                   help="unclean election of partitions without a live leader")
    p.add_argument("--partition", type=int, action="append", help="only these (repeatable)")
    p = topic_command("reassignments", "reassignments in progress (all topics, or --topic)",
                      with_topic=False)
    p.add_argument("--topic")
    p = topic_command("cancel-reassign", "cancel partitions' reassignments (back to the "
                      "replicas they had)")
    p.add_argument("--partition", type=int, action="append", required=True)

    p = command("produce", "produce lines from stdin, or generated records")
    p.add_argument("topic")
    p.add_argument("--count", type=int, help="generate this many records instead of reading stdin")
    p.add_argument("--size", type=int, default=100, help="bytes per generated value")
    p.add_argument("--acks", default="all", choices=["all", "1", "0", "-1"])
    p.add_argument("--partition", type=int)
    p.add_argument("--key-separator", help="split stdin lines into key<sep>value")
    p.add_argument("--no-progress", action="store_true")

    p = command("consume", "print records to stdout")
    p.add_argument("topic")
    p.add_argument("--partition", type=int)
    p.add_argument("--group")
    p.add_argument("--from", dest="start", default="earliest", choices=["earliest", "latest"])
    p.add_argument("--max-records", type=int)
    p.add_argument("--timeout-ms", type=int, help="exit after this long without a record")
    p.add_argument("--print-offsets", action="store_true")
    p.add_argument("--commit", action="store_true",
                   help="with --group: commit the group's offsets (every 5 s while reading, "
                        "and at exit)")

    p = sub.add_parser("chaos", help="run a seeded fault schedule and check the history")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of faults")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--faults", default=",".join(FAULT_KINDS_DEFAULT),
                   help="comma-separated fault kinds (default: all but the disk faults "
                        f"{','.join(DISK_FAULT_KINDS)}, which need FUSE: each broker's log "
                        "directory then sits on its own faultfs mount)")
    p.add_argument("--flush-before-ack", action="store_true",
                   help="log.flush.before.ack=true on every broker: no acks=all produce "
                        "answered before every ISR replica fsynced it (power-loss-all needs it)")
    p.add_argument("--hold-s", type=_hold_seconds, default=None, metavar="S[,MAX]",
                   help="how long a pause or an outage lasts, in seconds, or drawn between "
                        "S and MAX (default 3.5,5)")
    p.add_argument("--min-per-kind", type=int, default=0,
                   help="run past --duration until every kind happened this often")
    p.add_argument("--partitions", type=int, default=6)
    p.add_argument("--rate", type=float, default=150.0, help="records/s per producer (3 producers)")
    p.add_argument("--scenario", default="random",
                   choices=["random", "isr-of-one", "rolling-restart"],
                   help="random: the seeded fault schedule; isr-of-one: Jepsen's loss, scripted")
    p.add_argument("--unsafe", action="store_true",
                   help="unclean election on, min ISR 1: the checker must be able to see loss")
    p.add_argument("--group-members", type=int, default=0,
                   help="also run a consumer group of this many members (joining, leaving, "
                        "dying) over the topic; enables the kill-coordinator and "
                        "pause-coordinator faults")
    p.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic",
                   help="the group's protocol: classic (JoinGroup/SyncGroup) or consumer "
                        "(KIP-848; the member epoch is the checker's generation)")
    p.add_argument("--share-members", type=int, default=0,
                   help="also run a share group (KIP-932) of this many members (joining, "
                        "leaving, dying) reading the topic as a queue; the checker wants "
                        "every acknowledged record accepted exactly once")
    p.add_argument("--compact-keys", type=int, default=0,
                   help="a compacted topic: values sent under this many keys, the cleaners "
                        "running; replicas are compared by their last value per key")
    p.add_argument("--transactions", type=int, default=0,
                   help="also run this many transactional writers (commit and abort at "
                        "random, zombies fenced) and a consume-transform-produce pipeline; "
                        "enables the kill-txn-coordinator and pause-txn-coordinator faults")
    p.add_argument("--client", default="native", choices=["native", "librdkafka"],
                   help="producers and consumers: the native Ray API, or librdkafka "
                        "(confluent-kafka) over the brokers' Kafka listeners")
    p.add_argument("--out", help="output directory (history.jsonl, verdict.json)")
    p.add_argument("--keep-data", action="store_true")

    p = sub.add_parser("demo", help="run the end-to-end demonstration job: clicks → Spark on "
                                    "Ray → page counts, a leader killed mid-read")
    p.add_argument("--records", type=int, default=300_000, help="clicks (records) to produce")
    p.add_argument("--executors", type=int, default=3, help="Spark executors")
    p.add_argument("--log-only", action="store_true",
                   help="the log demo without Spark: acks=all production with a leader "
                        "killed half-way, read back, lost/duplicated counted")
    p.add_argument("--partitions", type=int, default=6, help="with --log-only")
    p.add_argument("--keep", action="store_true", help="keep the data directory")
    p = command("console", "serve the web console (pages and live plots) for a running cluster")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8090, help="port (default 8090; 0: a free one)")
    p.add_argument("--allow-writes", action="store_true",
                   help="allow actions: create/delete topics, alter configs, reset offsets, "
                        "elect leaders, reassign (sent over Kafka's protocol, ACLs apply)")
    p.add_argument("--listener", help="the brokers' listener the writes use (default PLAINTEXT)")
    p.add_argument("--command-config", help="Kafka client properties for the writes "
                   "(security.protocol, sasl.mechanism, sasl.username, sasl.password, ...)")
    p.add_argument("--interval-s", type=float, default=2.0, help="sampling and refresh interval")
    p.add_argument("--chaos-dir", default="chaos-runs", help="where `rayka chaos` keeps runs")
    p.add_argument("--url-file", help=argparse.SUPPRESS)
    p.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)
    zookeeper_cli.add_parser(sub)
    groups_cli.add_parser(sub, command)
    transactions_cli.add_parser(sub, command)
    security_cli.add_parser(sub, command)
    quotas_cli.add_parser(sub, command)
    features_cli.add_parser(sub, command)
    sub.add_parser("version", help="print the version")
    for p in with_cluster:       # `rayka users add u --name c` as well as `rayka users --name c add u`
        for action in p._subparsers._group_actions if p._subparsers else ():
            for child in action.choices.values():
                _cluster_options(child, argparse.SUPPRESS)
    return parser


def _cluster_options(p, default=None) -> None:
    """--name and --address; a subcommand's own (default SUPPRESS) leave its parent's be."""
    p.add_argument("--name", default="default" if default is None else default,
                   help="cluster name (default: default)")
    p.add_argument("--address", default=os.environ.get("RAY_ADDRESS") if default is None
                   else default, help="Ray cluster address (default: the one `rayka start` used)")


# -- connecting ----------------------------------------------------------------------------------------
def _attach(args):
    """Connect this process to the cluster's Ray and return rayka's Cluster."""
    import rayka
    state = ray_head.load_state(args.name)
    if args.address:
        ray_head.connect_ray(args.address, state)
    elif state is not None:
        ray_head.connect_ray(state.ray_address, state)
    else:
        raise ray_head.RayHeadError(
            f"no running rayka cluster {args.name!r} (start one with `rayka start --name "
            f"{args.name}`, or give --address)")
    return rayka.connect(args.name)


def cmd_start(args) -> None:
    import rayka
    config = start_config(args)
    broker_configs = _broker_configs(args.broker_config)
    state = ray_head.load_state(args.name)
    started_head = False
    if args.address:
        state = ray_head.ClusterState(args.name, args.address, owned=False)
    elif state is None or (state.owned and not pid_alive(state.pid)):
        other = ray_head.recorded_head_alive()
        state = ray_head.start_head(args.name, args.num_cpus, dashboard=not args.no_dashboard)
        started_head = True
        if other:
            print(f"rayka: a Ray is already running at {other}: left alone; cluster "
                  f"{args.name!r} gets its own private Ray head at {state.ray_address} "
                  f"(`--address auto` joins that Ray instead)")
    try:
        ray_head.connect_ray(state.ray_address, state)
        if not state.owned:                     # "auto" or a ray:// alias: keep what it is
            state.ray_address = ray_head.connected_address() or state.ray_address
        placement = _placement(args)
        cluster = rayka.start_local(name=args.name, brokers=args.brokers,
                                    controllers=args.controllers, zookeeper=args.zookeeper,
                                    data_dir=args.data_dir, broker_configs=broker_configs,
                                    **placement, **config)
    except BaseException:
        if started_head:
            ray_head.stop_head(state)
            ray_head.remove_state(args.name)
        raise
    from rayka.cluster import dashboard_url
    state.dashboard = dashboard_url() or state.dashboard
    ray_head.save_state(state)
    ctl = cluster.controller()
    print(f"rayka cluster {args.name!r} up: brokers {[b.id for b in cluster.brokers() if b.alive]}, "
          f"controller {ctl.id} (epoch {ctl.epoch}), ZooKeeper {cluster.zookeeper}, "
          f"Ray {state.ray_address}{' (private head)' if state.owned else ''}, "
          f"data {cluster.facts['data_dir']}"
          f"{f', Ray dashboard {state.dashboard}' if state.dashboard else ''}")
    print(f"Kafka bootstrap servers: {cluster.bootstrap_servers() or '(none)'}")


def _placement(args) -> dict:
    """One broker per unit of the broker resource (one per node when each node carries
    one): Ray keeps every incarnation of a broker on a node that has it."""
    import ray
    have = ray.cluster_resources()
    out = {}
    for key, arg, default in (("broker_resources", args.broker_resource, "rayka_broker"),
                              ("control_resources", args.control_resource, "rayka_control")):
        name = default if arg == "auto" else arg
        if arg == "none" or (arg == "auto" and name not in have):
            continue
        if name not in have:
            raise ray_head.RayHeadError(f"the Ray cluster has no resource {name!r}")
        out[key] = {name: 1}
    if "broker_resources" in out:
        name = next(iter(out["broker_resources"]))
        if have[name] < args.brokers:
            raise ray_head.RayHeadError(f"{args.brokers} brokers need {args.brokers} units of "
                                        f"{name!r}; the Ray cluster has {have[name]:g}")
    return out


def status_of(cluster) -> dict:
    import ray
    admin = cluster.admin()
    ctl = admin.controller()
    live = {b.id for b in cluster.brokers() if b.alive}
    topics, under, offline = {}, [], []
    for t in admin.list_topics():
        infos = admin.describe_topic(t)
        topics[t] = len(infos)
        for p in infos:
            if p.leader not in live:
                offline.append(f"{t}-{p.partition}")
            elif len(p.isr) < len(p.replicas):
                under.append(f"{t}-{p.partition}")
    controller_node = None
    if ctl.id is not None:
        try:
            controller_node = ray.get(cluster.controller_actor(ctl.id).node_id.remote(), timeout=10)
        except Exception:  # restarting: its node is unknown for the moment
            pass
    refused = [{"broker": b, "principal": r["principal"], "listener": r["listener"],
                "leader": p["leader"], "error": p["error"], "code": p["code"],
                "message": p["message"], "since_s": p["since_s"],
                "partitions": [f"{t}-{n}" for t, n in p["partitions"]]}
               for b, r in sorted(cluster.replication_problems().items())
               for p in r["fetchers"] if p["refusal"]]
    offline_dirs = [{"broker": b, "path": d["path"], "error": d["error"],
                     "partitions": [f"{t}-{n}" for t, n in d["offline_partitions"]]}
                    for b, dirs in sorted(cluster.log_dirs().items()) for d in dirs
                    if not d["online"]]
    from rayka.cluster import dashboard_url
    return {"cluster": cluster.name, "zookeeper": cluster.zookeeper, "ray_dashboard": dashboard_url(),
            "bootstrap_servers": cluster.bootstrap_servers(),
            "controller": {"id": ctl.id, "epoch": ctl.epoch, "node_id": controller_node},
            "brokers": [{"id": b.id, "alive": b.alive, "node_id": b.node_id,
                         "listeners": list(b.endpoints)} for b in cluster.brokers()],
            "topics": topics, "partitions": sum(topics.values()),
            "under_replicated": under, "offline": offline, "refused_followers": refused,
            "offline_log_dirs": offline_dirs}


def cmd_status(args) -> None:
    s = status_of(_attach(args))
    state = ray_head.load_state(args.name)
    if not s["ray_dashboard"] and state is not None:
        s["ray_dashboard"] = state.dashboard
    if args.json:
        print(json.dumps(s, indent=2))
        return
    c = s["controller"]
    print(f"cluster {s['cluster']}  ZooKeeper {s['zookeeper']}  "
          f"Ray dashboard {s['ray_dashboard'] or '(off)'}")
    print(f"Kafka bootstrap servers {s['bootstrap_servers'] or '-'}")
    print(f"controller {c['id']} epoch {c['epoch']} on node {(c['node_id'] or '?')[:12]}")
    for b in s["brokers"]:
        print(f"broker {b['id']}  {'alive' if b['alive'] else 'DOWN '}  node {(b['node_id'] or '-')[:12]}"
              f"  {' '.join(b['listeners']) or '-'}")
    print(f"topics {len(s['topics'])}  partitions {s['partitions']}  "
          f"under-replicated {len(s['under_replicated'])}  offline {len(s['offline'])}")
    for label in ("under_replicated", "offline"):
        if s[label]:
            print(f"{label.replace('_', '-')}: {' '.join(s[label])}")
    for d in s["offline_log_dirs"]:
        print(f"offline log dir: broker {d['broker']} {d['path']}: {d['error']}; "
              f"{len(d['partitions'])} replicas lost there: {' '.join(d['partitions']) or '-'}")
    for r in s["refused_followers"]:
        code = "" if r["code"] is None else f" ({r['code']})"
        print(f"refused follower: broker {r['broker']} ({r['principal'] or '?'} over "
              f"{r['listener']}) by leader {r['leader']} for {r['since_s']:.0f} s: "
              f"{r['error']}{code} on {' '.join(r['partitions'])}: {r['message']}")


def cmd_bootstrap_servers(args) -> int:
    servers = _attach(args).bootstrap_servers(args.listener.upper())
    if not servers:
        print(f"rayka: no live broker has a {args.listener.upper()} listener", file=sys.stderr)
        return 1
    print(servers)
    return 0


def cmd_restart_brokers(args) -> None:
    cluster = _attach(args)
    t0 = time.monotonic()

    def say(r):
        print(f"broker {r['broker']}: controlled shutdown {r['controlled_shutdown_s']:.2f} s"
              f"{'' if r['completed'] else ' (still leading some partitions)'}, registered "
              f"again after {r['restart_s']:.1f} s, every ISR full {r['isr_full_s']:.1f} s later")
    cluster.rolling_restart(args.broker, say=say)
    print(f"rolling restart done in {time.monotonic() - t0:.1f} s")


def cmd_stop(args) -> None:
    state = ray_head.load_state(args.name)
    try:
        cluster = _attach(args)
    except ray_head.RayHeadError:
        if state is None or not state.owned:
            raise
        cluster = None                      # its Ray is gone already: just clean up the head
    if cluster is not None:
        cluster.shutdown()
        import ray
        ray.shutdown()
    if state is not None:
        ray_head.stop_head(state)
        ray_head.remove_state(args.name)
    print(f"rayka cluster {args.name!r} stopped")


def cmd_topics(args) -> None:
    config = _config_pairs(getattr(args, "config", None))   # bad syntax fails before connecting
    targets = _assignments(getattr(args, "assignment", None))
    admin = _attach(args).admin()
    if args.topics_command == "create":
        infos = admin.create_topic(args.topic, args.partitions, args.replication_factor, config)
        print(f"Created topic {args.topic} ({len(infos)} partitions, "
              f"replication factor {args.replication_factor}).")
    elif args.topics_command == "list":
        for t in admin.list_topics():
            print(t)
    elif args.topics_command == "describe":
        infos = admin.describe_topic(args.topic)
        config = ",".join(f"{k}={v}" for k, v in sorted(admin.topic_config(args.topic).items()))
        print(f"Topic: {args.topic}\tPartitionCount: {len(infos)}\t"
              f"ReplicationFactor: {len(infos[0].replicas)}\tConfigs: {config}")
        for p in infos:
            print(f"\tTopic: {args.topic}\tPartition: {p.partition}\tLeader: {p.leader}\t"
                  f"LeaderEpoch: {p.leader_epoch}\tReplicas: {','.join(map(str, p.replicas))}\t"
                  f"Isr: {','.join(map(str, p.isr))}")
    elif args.topics_command == "delete":
        admin.delete_topic(args.topic)
        print(f"Deleted topic {args.topic}.")
    elif args.topics_command == "reassign":
        infos = admin.reassign_partitions(args.topic, targets)
        for p in infos:
            print(f"{args.topic}-{p.partition}\treplicas {','.join(map(str, p.replicas))}\t"
                  f"leader {p.leader}")
    elif args.topics_command == "elect-leaders":
        parts = args.partition or [p.partition for p in admin.describe_topic(args.topic)]
        results = admin.elect_leaders([(args.topic, p) for p in parts], unclean=args.unclean)
        for tp, r in sorted(results.items()):
            print(f"{tp[0]}-{tp[1]}\t{r if isinstance(r, KafkaError) else f'leader {r}'}")
    elif args.topics_command == "reassignments":
        for tp, (replicas, adding, removing) in sorted(admin.list_reassignments().items()):
            if args.topic is None or tp[0] == args.topic:
                print(f"{tp[0]}-{tp[1]}\treplicas {','.join(map(str, replicas))}\t"
                      f"adding {','.join(map(str, adding)) or '-'}\t"
                      f"removing {','.join(map(str, removing)) or '-'}")
    elif args.topics_command == "cancel-reassign":
        results = admin.alter_reassignments({(args.topic, p): None for p in args.partition})
        for tp, r in sorted(results.items()):
            print(f"{tp[0]}-{tp[1]}\t{r if r is not None else 'cancelled'}")


def cmd_produce(args) -> None:
    from tqdm import tqdm
    cluster = _attach(args)
    producer = cluster.producer(acks=args.acks)
    t0 = time.monotonic()
    acked = 0
    bar = tqdm(total=args.count, unit="rec", unit_scale=True, file=sys.stderr,
               disable=args.no_progress, desc=f"produce {args.topic}")
    try:
        if args.count is not None:
            acked = _produce_generated(producer, args, bar)
        else:
            acked = _produce_stdin(producer, args, bar)
    finally:
        bar.close()
        producer.close(30)
    elapsed = time.monotonic() - t0
    print(f"{acked} records acknowledged (acks={args.acks}) in {elapsed:.2f} s, "
          f"{acked / max(elapsed, 1e-9):,.0f} records/s", file=sys.stderr)


def _produce_generated(producer, args, bar) -> int:
    chunk, acked, sent = 10_000, 0, 0
    pad = max(args.size, 12)
    pending = []
    while sent < args.count:
        n = min(chunk, args.count - sent)
        values = [(b"%012d" % (sent + i)).ljust(pad, b"x")[:args.size] for i in range(n)]
        pending.append(producer.send_batch(args.topic, values, partition=args.partition))
        sent += n
        while len(pending) > 8 or (sent >= args.count and pending):
            got = len(pending.pop(0).result())
            acked += got
            bar.update(got)
    return acked


def _produce_stdin(producer, args, bar) -> int:
    futures, acked = [], 0
    sep = args.key_separator.encode() if args.key_separator else None
    for line in sys.stdin.buffer:
        line = line.rstrip(b"\n")
        key = None
        if sep is not None and sep in line:
            key, line = line.split(sep, 1)
        futures.append(producer.send(args.topic, line, key=key, partition=args.partition))
        if len(futures) >= 10_000:
            acked += _settle(futures, bar)
    acked += _settle(futures, bar)
    return acked


def _settle(futures, bar) -> int:
    for f in futures:
        f.result()
    n = len(futures)
    bar.update(n)
    futures.clear()
    return n


def cmd_consume(args) -> None:
    cluster = _attach(args)
    consumer = cluster.consumer(group_id=args.group, auto_offset_reset=args.start,
                                enable_auto_commit=args.commit)
    if args.partition is not None:
        consumer.assign([(args.topic, args.partition)])
    else:
        consumer.subscribe([args.topic])
    seen, last_record = 0, time.monotonic()
    out = sys.stdout.buffer
    try:
        while args.max_records is None or seen < args.max_records:
            want = None if args.max_records is None else args.max_records - seen
            records = consumer.poll(timeout_ms=500, max_records=want)
            for r in records:
                if args.print_offsets:
                    out.write(b"%d\t%d\t%s\t%s\n" % (r.partition, r.offset, r.key or b"", r.value or b""))
                else:
                    out.write((r.value or b"") + b"\n")
            out.flush()
            seen += len(records)
            if records:
                last_record = time.monotonic()
            elif args.timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= args.timeout_ms:
                break
    finally:
        consumer.close()      # commits (--commit), leaves the group: its partitions move at once
    print(f"{seen} records consumed", file=sys.stderr)


def _interrupt(_signum, _frame):
    raise KeyboardInterrupt


def _hold_seconds(text: str) -> tuple[float, float]:
    """"S" or "S,MAX" (seconds) → (low, high)."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) not in (1, 2) or min(values) < 0 or values[0] > values[-1]:
        raise argparse.ArgumentTypeError(f"--hold-s wants S or S,MAX seconds (S <= MAX), "
                                         f"not {text!r}")
    return values[0], values[-1]


def cmd_chaos(args) -> int:
    import signal

    from rayka.chaos.runner import ChaosConfig, config_error, run_chaos
    # SIGTERM (e.g. `timeout`) unwinds like Ctrl-C, so the run stops its ZooKeeper and Ray
    signal.signal(signal.SIGTERM, _interrupt)
    kinds = tuple(k.strip() for k in args.faults.split(",") if k.strip())
    known = set(FAULT_KINDS_DEFAULT) | set(DISK_FAULT_KINDS) \
        | (set(GROUP_FAULT_KINDS) if args.group_members else set()) \
        | (set(TXN_FAULT_KINDS) if args.transactions else set())
    unknown = sorted(set(kinds) - known)
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown fault kinds {unknown}; known: {','.join(sorted(known))}"
            + ("" if args.group_members else f" ({','.join(GROUP_FAULT_KINDS)} need "
                                              "--group-members)")
            + ("" if args.transactions else f" ({','.join(TXN_FAULT_KINDS)} need "
                                             "--transactions)"))
    config = ChaosConfig(duration_s=args.duration, seed=args.seed, faults=kinds,
                         min_faults_per_kind=args.min_per_kind, partitions=args.partitions,
                         rate_per_producer=args.rate, unsafe=args.unsafe,
                         scenario=args.scenario, client=args.client,
                         group_members=args.group_members, group_protocol=args.group_protocol,
                         share_members=args.share_members, compact_keys=args.compact_keys,
                         transactions=args.transactions,
                         flush_before_ack=args.flush_before_ack,
                         **({"hold_s": args.hold_s} if args.hold_s else {}),
                         out_dir=args.out or "", keep_data=args.keep_data)
    problem = config_error(config)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    verdict, out = run_chaos(config, say=lambda line: print(line, file=sys.stderr))
    print(verdict.table())
    failures = verdict.stats.get("liveness_failures") or []
    for line in failures:
        print(f"liveness: {line}")
    ok = verdict.ok and not failures
    print(f"{'PASS' if ok else 'FAIL'}: seed {args.seed}, history and verdict in {out}")
    return 0 if ok else 1


def cmd_demo(args) -> None:
    if args.log_only:
        from rayka.ops import demo
        demo.run(records_total=args.records, partitions=args.partitions, keep=args.keep)
    else:
        from rayka.ops.demo import main_job
        main_job()(clicks_total=args.records, executors=args.executors, keep=args.keep)


def cmd_console(args) -> int:
    """The console package registers `serve` in the entry point group `rayka.console`
    (rayka never imports console/, which sits above it)."""
    from importlib.metadata import entry_points
    found = entry_points(group="rayka.console", name="serve")
    if not found:
        raise InvalidRequest("the console is not installed (entry point group rayka.console); "
                             "run `make install`")
    if args.interval_s <= 0:
        raise InvalidRequest(f"--interval-s must be positive, not {args.interval_s}")
    return next(iter(found)).load()(args, _attach(args))


COMMANDS = {"start": cmd_start, "console": cmd_console, "status": cmd_status, "stop": cmd_stop,
            "bootstrap-servers": cmd_bootstrap_servers,
            "restart-brokers": cmd_restart_brokers, "topics": cmd_topics,
            "produce": cmd_produce, "consume": cmd_consume, "demo": cmd_demo, "chaos": cmd_chaos,
            "zookeeper": lambda args: zookeeper_cli.run(args),
            "groups": lambda args: groups_cli.run(args, _attach(args)),
            "transactions": lambda args: transactions_cli.run(args, _attach(args)),
            "users": lambda args: security_cli.run_users(args, _attach(args)),
            "acls": lambda args: security_cli.run_acls(args, _attach(args)),
            "quotas": lambda args: quotas_cli.run(args, _attach(args)),
            "features": lambda args: features_cli.run(args, _attach(args))}


def _say_warnings() -> None:
    """rayka's own warnings (e.g. followers an authorizer will refuse, rayka/cluster.py) as
    one line each on stderr, like the CLI's errors."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("rayka: warning: %(message)s"))
    logger = logging.getLogger("rayka")
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logger.propagate = False


def main(argv: list[str] | None = None) -> int:
    _say_warnings()
    try:
        args = build_parser().parse_args(argv)
        if args.command == "version":
            from rayka import __version__
            print(__version__)
            return 0
        return COMMANDS[args.command](args) or 0
    except (KafkaError, ZkStoreError, ZooKeeperLaunchError, RayUnavailable,
            argparse.ArgumentTypeError) as exc:
        print(f"rayka: {exc}", file=sys.stderr)
    except BrokenPipeError:                    # `rayka consume ... | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130
    return 1


if __name__ == "__main__":
    sys.exit(main())
