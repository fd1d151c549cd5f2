"""serve: run the console for a connected cluster until stopped (`rayka console`).

Rules:
- `rayka console` (rayka/cli.py) connects to the cluster and calls `serve(args, cluster)`,
  found through the entry point `serve` of the group `rayka.console` (pyproject.toml):
  rayka never imports the console, which sits above it.
- Bound to 127.0.0.1 unless --host says otherwise; --port 0 takes a free port. The URL is
  printed on one line once the socket listens, and written to --url-file when given (how
  start_local(console=True) learns it).
- Writes are off unless --allow-writes. They go over Kafka's protocol to the brokers'
  --listener (default PLAINTEXT, else the first listener registered) as the principal of
  --command-config (a Kafka properties file: security.protocol, sasl.mechanism,
  sasl.username, sasl.password, ssl.ca.location), so the brokers' ACLs judge them; with
  that file the pages also show only what its principal may describe (console/principal.py).
- With --parent-pid the console stops when that process is gone (a driver that started
  it with start_local(console=True) and exited without shutdown()).
"""

from __future__ import annotations

import logging
import os
import socket
import threading

from console.actions import Actions
from console.app import Console, build_app
from console.pages import Pages
from console.principal import PrincipalView
from console.sampler import Sampler
from console.source import Source
from rayka.errors import InvalidConfig
from rayka.ops.properties import load_properties

log = logging.getLogger(__name__)


def pick_listener(cluster, wanted: str | None) -> str:
    names = [e.split("://", 1)[0] for b in cluster.brokers() for e in b.endpoints]
    if wanted:
        if wanted not in names:
            raise InvalidConfig(f"no broker has a listener named {wanted}; they have "
                                f"{sorted(set(names)) or 'none'}")
        return wanted
    if not names:
        raise InvalidConfig("no live broker registered a Kafka listener")
    return "PLAINTEXT" if "PLAINTEXT" in names else names[0]


def make_console(cluster, args) -> Console:
    client_config = load_properties(args.command_config) if args.command_config else {}
    bootstrap = None
    if args.allow_writes or client_config:
        bootstrap = cluster.bootstrap_servers(pick_listener(cluster, args.listener))
    actions = Actions(bootstrap if args.allow_writes else None, client_config)
    principal = PrincipalView(bootstrap, client_config) if client_config else None
    sampler = Sampler(Source(cluster, principal=principal), interval_s=args.interval_s).start()
    console = Console(cluster.name, sampler, actions, refresh_s=args.interval_s,
                      chaos_dir=args.chaos_dir)
    console.extra = Pages(console)
    return console


def serve(args, cluster) -> int:
    import uvicorn
    console = make_console(cluster, args)
    console.sampler.sweep_once()           # the first page shows a snapshot, not an empty one
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(128)
    host, port = sock.getsockname()[:2]
    url = f"http://{host}:{port}/"
    server = uvicorn.Server(uvicorn.Config(build_app(console), log_level="warning",
                                           access_log=False, timeout_graceful_shutdown=2))
    if args.parent_pid:
        threading.Thread(target=_watch_parent, args=(args.parent_pid, server), daemon=True,
                         name="console-parent").start()
    print(f"rayka console for cluster {cluster.name}: {url}", flush=True)
    if args.url_file:
        with open(args.url_file + ".tmp", "w") as f:
            f.write(url)
        os.replace(args.url_file + ".tmp", args.url_file)
    try:
        server.run(sockets=[sock])
    finally:
        console.sampler.stop()
    return 0


def _watch_parent(pid: int, server) -> None:
    stop = threading.Event()
    while not stop.wait(1.0):             # a poll: no event tells us another process died
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            log.warning("console: parent %s is gone, stopping", pid)
            server.should_exit = True
            return
        except PermissionError:
            pass
