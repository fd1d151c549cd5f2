"""`rayka zookeeper start|stop|status`: the command line of rayka/ops/zookeeper_service.py.

Rules: the parser is added to the `rayka` command's subparsers (rayka/cli.py); every
user error is the service's typed one-line error (ZooKeeperServiceError).
"""

from __future__ import annotations


def add_parser(sub) -> None:
    """`rayka zookeeper start|stop|status`: one ZooKeeper server of a `ray up` deployment."""
    from rayka.ops import zookeeper_service as zs
    zk = sub.add_parser("zookeeper", help="run one ZooKeeper server (standalone or ensemble member)")
    zsub = zk.add_subparsers(dest="zookeeper_command", required=True, parser_class=type(zk))
    p = zsub.add_parser("start", help="start one server (foreground, or --daemon)")
    p.add_argument("--data-dir", required=True, help="snapshots, txn logs, myid, conf/")
    p.add_argument("--client-port", type=int, help=f"default {zs.DEFAULT_CLIENT_PORT}, or the "
                   "client port of this member's host:client:peer:election entry")
    p.add_argument("--bind", default="127.0.0.1",
                   help="client bind address (default 127.0.0.1; 0.0.0.0 = every interface)")
    p.add_argument("--myid", type=int, help="this member's position (1..N) in --servers")
    p.add_argument("--servers", help="ensemble members host[,host...]; an entry may be "
                   "host:peer:election or host:client:peer:election")
    p.add_argument("--peer-port", type=int, default=zs.DEFAULT_PEER_PORT,
                   help="quorum port of bare-host --servers entries")
    p.add_argument("--election-port", type=int, default=zs.DEFAULT_ELECTION_PORT,
                   help="election port of bare-host --servers entries")
    p.add_argument("--tick-time-ms", type=int, default=500,
                   help="ZooKeeper tickTime (sessions may last 2..20 ticks)")
    p.add_argument("--heap-mb", type=int, default=256)
    p.add_argument("--daemon", action="store_true",
                   help="detach (own session) and return once the server answers")
    p.add_argument("--pid-file", help="write the JVM's pid here (required with --daemon)")
    p.add_argument("--log-file", help="server log (default <data-dir>/zookeeper.log)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the server")
    p.add_argument("--require-auth", action="store_true",
                   help="drop every client session that has not authenticated (digest): with "
                        "`rayka start --zookeeper-auth-file`, only rayka talks to this server")
    p = zsub.add_parser("stop", help="stop the server whose pid the pid file holds")
    p.add_argument("--pid-file", required=True)
    p.add_argument("--timeout", type=float, default=30.0, help="seconds before SIGKILL")
    p = zsub.add_parser("status", help="`srvr` mode of every server of a connect string")
    p.add_argument("--zookeeper", default=f"127.0.0.1:{zs.DEFAULT_CLIENT_PORT}",
                   help="host:port[,host:port...]")


def run(args) -> int:
    from rayka.ops import zookeeper_service as zs
    if args.zookeeper_command == "start":
        return zs.start(data_dir=args.data_dir, client_port=args.client_port, bind=args.bind,
                        myid=args.myid, servers=args.servers, peer_port=args.peer_port,
                        election_port=args.election_port, tick_time_ms=args.tick_time_ms,
                        heap_mb=args.heap_mb, daemon=args.daemon, pid_file=args.pid_file,
                        log_file=args.log_file, timeout_s=args.timeout,
                        require_auth=args.require_auth)
    if args.zookeeper_command == "stop":
        return zs.stop(args.pid_file, timeout_s=args.timeout)
    return zs.status(args.zookeeper)
