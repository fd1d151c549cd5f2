"""`rayka zookeeper start|stop|status`: one ZooKeeper server of a deployment (`ray up`).

Rules:
- The server is controller.zookeeper.server.ZooKeeperServer, the launcher local clusters and the tests
  use (the Debian 3.8 jars under java); only the bind address, the member list, the log
  location and slower timings (tickTime 500 ms: sessions of 1..10 s) differ.
- `start` runs ONE server: standalone, or member `--myid` of the ensemble `--servers`
  (the i-th entry is server.i; an entry is `host`, `host:peer:election` or
  `host:client:peer:election`, so several members fit on one host). With a wildcard bind
  (0.0.0.0) the quorum ports listen on every interface too (quorumListenOnAllIPs).
- In the foreground `start` blocks until the JVM exits; SIGTERM/SIGINT stop the JVM.
  With `daemon` it returns once the server answers on its client port (a standalone server
  then serves; an ensemble member serves once a quorum of members runs) and leaves the
  JVM running in its own session, detached from this process.
- The pid file holds the JVM's pid. `stop` signals THAT pid only (SIGTERM + SIGCONT,
  deadline, then SIGKILL), after checking /proc/<pid>/cmdline runs QuorumPeerMain: a
  recycled pid is never signalled. A pid file naming a dead process is removed.
- `start --daemon` is idempotent (a live ZooKeeper in the pid file: "already running",
  success), so `ray up` may re-run its start commands. Foreground `start` refuses then.
- Every error is a ZooKeeperServiceError with a ONE-line message (the CLI prints
  `rayka: ...`, exit 1); the server log and the JVM output file are named in it.
"""
from __future__ import annotations

import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from rayka.ops.procs import pid_alive
from controller.zookeeper.server import ZooKeeperLaunchError, ZooKeeperServer

__all__ = ["ZooKeeperServiceError", "Member", "parse_servers", "build_server", "start", "stop",
           "status", "four_letter", "DEFAULT_CLIENT_PORT", "DEFAULT_PEER_PORT",
           "DEFAULT_ELECTION_PORT"]

DEFAULT_CLIENT_PORT, DEFAULT_PEER_PORT, DEFAULT_ELECTION_PORT = 2181, 2888, 3888
WILDCARDS = ("0.0.0.0", "::", "")
_POLL_S = 0.1


class ZooKeeperServiceError(ZooKeeperLaunchError):
    """A user-facing failure of `rayka zookeeper ...` (one-line message)."""


@dataclass(frozen=True)
class Member:
    myid: int
    host: str
    client_port: int | None      # None: the member's port is not known here (assume ours)
    peer_port: int
    election_port: int


def _port(text: str, what: str, entry: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ZooKeeperServiceError(f"--servers entry {entry!r}: {what} port {text!r} is not 1..65535")
    return int(text)


def parse_servers(text: str, peer_port: int = DEFAULT_PEER_PORT,
                  election_port: int = DEFAULT_ELECTION_PORT) -> list[Member]:
    """`host[,host...]`; an entry may be `host:peer:election` or `host:client:peer:election`."""
    entries = [e.strip() for e in text.split(",")]
    if not text.strip() or not all(entries):
        raise ZooKeeperServiceError(f"--servers wants host[,host...], got {text!r}")
    members = []
    for i, entry in enumerate(entries, start=1):
        parts = entry.split(":")
        client = None
        if len(parts) == 1:
            host, peer, election = parts[0], peer_port, election_port
        elif len(parts) == 3:
            host, peer, election = parts[0], _port(parts[1], "peer", entry), _port(parts[2], "election", entry)
        elif len(parts) == 4:
            host, client = parts[0], _port(parts[1], "client", entry)
            peer, election = _port(parts[2], "peer", entry), _port(parts[3], "election", entry)
        else:
            raise ZooKeeperServiceError(f"--servers entry {entry!r}: want host, host:peer:election "
                                        "or host:client:peer:election")
        if not host:
            raise ZooKeeperServiceError(f"--servers entry {entry!r}: empty host")
        members.append(Member(i, host, client, peer, election))
    return members


# -- pids ----------------------------------------------------------------------------------------------
def _is_zookeeper(pid: int) -> bool:
    try:
        return b"QuorumPeerMain" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()   # no procfs: cannot check, trust the pid file
    except OSError:
        return False


def _read_pid(pid_file: Path) -> int:
    try:
        text = pid_file.read_text().strip()
    except FileNotFoundError:
        raise ZooKeeperServiceError(f"no pid file {pid_file} (is ZooKeeper running with that "
                                    "--pid-file?)") from None
    except OSError as exc:
        raise ZooKeeperServiceError(f"cannot read pid file {pid_file}: {exc.strerror}") from None
    if not text.isdigit() or int(text) <= 1:
        raise ZooKeeperServiceError(f"pid file {pid_file} does not hold a pid: {text[:40]!r}")
    return int(text)


def _write_pid(pid_file: Path, pid: int) -> None:
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = pid_file.with_name(pid_file.name + ".tmp")
    tmp.write_text(f"{pid}\n")
    os.replace(tmp, pid_file)


def _remove_pid_file(pid_file: Path, pid: int | None = None) -> None:
    """Remove it (only if it still names ``pid`` when one is given)."""
    try:
        if pid is None or pid_file.read_text().strip() == str(pid):
            pid_file.unlink()
    except OSError:
        pass


def _listening(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1.0).close()
    except OSError:
        return False
    return True


# -- start ---------------------------------------------------------------------------------------------
def build_server(*, data_dir, client_port: int | None = None, bind: str = "127.0.0.1",
                 myid: int | None = None, servers: str | None = None,
                 peer_port: int = DEFAULT_PEER_PORT, election_port: int = DEFAULT_ELECTION_PORT,
                 tick_time_ms: int = 500, heap_mb: int = 256, log_file=None,
                 timeout_s: float = 60.0, daemon: bool = False, require_auth: bool = False
                 ) -> tuple[ZooKeeperServer, list[Member]]:
    """The (not started) server `start` runs, and the ensemble's members ([] standalone).
    A daemon's server outlives this process; a foreground one dies with it."""
    if (myid is None) != (servers is None):
        raise ZooKeeperServiceError("--myid and --servers go together (an ensemble member); "
                                    "give neither for a standalone server")
    members = parse_servers(servers, peer_port, election_port) if servers is not None else []
    port = client_port
    if members:
        if not 1 <= myid <= len(members):
            raise ZooKeeperServiceError(f"--myid {myid} is not in 1..{len(members)} "
                                        f"(the position in --servers)")
        own = members[myid - 1].client_port
        if own is not None and port is not None and own != port:
            raise ZooKeeperServiceError(f"--client-port {port} contradicts --servers entry {myid} "
                                        f"(client port {own})")
        port = port or own
    port = port or DEFAULT_CLIENT_PORT
    extra = {"quorumListenOnAllIPs": "true"} if members and bind in WILDCARDS else {}
    if require_auth:       # ZooKeeper 3.7+: a session that has not authenticated is dropped
        extra.update({"enforce.auth.enabled": "true", "enforce.auth.schemes": "digest"})
    peers = {m.myid: (m.host, m.peer_port, m.election_port) for m in members}
    server = ZooKeeperServer(port=port, data_dir=Path(data_dir).expanduser().absolute(),
                             tick_time_ms=tick_time_ms, heap_mb=heap_mb, start_timeout_s=timeout_s,
                             myid=myid, peers=peers or None, init_limit=20, sync_limit=10,
                             client_address=bind, extra_config=extra,
                             log_file=Path(log_file).expanduser().absolute() if log_file else None,
                             die_with_parent=not daemon)
    return server, members


def start(*, data_dir, client_port: int | None = None, bind: str = "127.0.0.1",
          myid: int | None = None, servers: str | None = None,
          peer_port: int = DEFAULT_PEER_PORT, election_port: int = DEFAULT_ELECTION_PORT,
          tick_time_ms: int = 500, heap_mb: int = 256, daemon: bool = False,
          pid_file=None, log_file=None, timeout_s: float = 60.0, require_auth: bool = False,
          say=print) -> int:
    """Run one ZooKeeper server; returns the process exit code for the CLI."""
    server, members = build_server(data_dir=data_dir, client_port=client_port, bind=bind,
                                   myid=myid, servers=servers, peer_port=peer_port,
                                   election_port=election_port, tick_time_ms=tick_time_ms,
                                   heap_mb=heap_mb, log_file=log_file, timeout_s=timeout_s,
                                   daemon=daemon, require_auth=require_auth)
    port = server.port
    if daemon and pid_file is None:
        raise ZooKeeperServiceError("--daemon needs --pid-file (`rayka zookeeper stop` reads it)")
    pid_file = Path(pid_file).expanduser().absolute() if pid_file else None
    if pid_file is not None and pid_file.exists():
        old = _read_pid(pid_file)
        if pid_alive(old) and _is_zookeeper(old):
            if daemon:
                say(f"ZooKeeper already running (pid {old}, pid file {pid_file})")
                return 0
            raise ZooKeeperServiceError(f"ZooKeeper already running (pid {old}, pid file {pid_file})")
        _remove_pid_file(pid_file, old)        # stale

    if _listening(server.probe_host, port):
        raise ZooKeeperServiceError(f"something already listens on {server.probe_host}:{port} "
                                    "(another ZooKeeper?); choose --client-port")
    if server.log_file.parent != server.data_dir:
        server.log_file.parent.mkdir(parents=True, exist_ok=True)
    try:
        server.start(wait=False)
        mode = _wait_started(server, timeout_s, member=bool(members))
    except ZooKeeperLaunchError as exc:
        server.kill()
        raise ZooKeeperServiceError(f"{str(exc).splitlines()[0]} See {server.log_file} and "
                                    f"{server.out_file}") from None
    except BaseException:
        server.kill()
        raise
    pid = server.pid
    if pid_file is not None:
        _write_pid(pid_file, pid)
    what = (f"member {myid} of {len(members)} (ensemble "
            f"{','.join(f'{m.host}:{m.client_port or port}' for m in members)})"
            if members else "standalone server")
    say(f"ZooKeeper {what} pid {pid} on {bind}:{port} ({mode}); data {server.data_dir}, "
        f"log {server.log_file}" + (f", pid file {pid_file}" if pid_file else ""))
    if daemon:
        server.detach()
        return 0
    return _run_foreground(server, pid_file, say)


def _wait_started(server: ZooKeeperServer, timeout_s: float, member: bool) -> str:
    """Standalone: until it serves. Member: until its client port answers (quorum may lag)."""
    if not member:
        return server.wait_serving(timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:
        mode = server.mode()
        if mode is not None:
            return mode
        try:
            server.four_letter("srvr")
            return "up, waiting for a quorum of members"
        except OSError:
            pass
        if not server.is_running():
            raise ZooKeeperLaunchError(f"ZooKeeper server at {server.connect_string} (myid="
                                       f"{server.myid}) exited before answering.")
        if time.monotonic() >= deadline:
            raise ZooKeeperLaunchError(f"ZooKeeper server at {server.connect_string} (myid="
                                       f"{server.myid}) did not answer within {timeout_s:g} s.")
        time.sleep(_POLL_S)


def _interrupt(_signum, _frame):
    raise KeyboardInterrupt


def _run_foreground(server: ZooKeeperServer, pid_file: Path | None, say) -> int:
    pid = server.pid
    previous = signal.signal(signal.SIGTERM, _interrupt)
    code = None
    try:
        while server.is_running():
            time.sleep(0.2)
        code = server._proc.returncode
    except KeyboardInterrupt:
        say(f"stopping ZooKeeper pid {pid}")
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, previous)
        if pid_file is not None:
            _remove_pid_file(pid_file, pid)
    if code is None or code in (0, 143, -signal.SIGTERM):
        say(f"ZooKeeper pid {pid} stopped")
        return 0
    raise ZooKeeperServiceError(f"ZooKeeper pid {pid} exited with code {code}; see "
                                f"{server.log_file} and {server.out_file}")


# -- stop, status --------------------------------------------------------------------------------------
def stop(pid_file, timeout_s: float = 30.0, say=print) -> int:
    """Stop the ZooKeeper whose pid the pid file holds (that pid only)."""
    pid_file = Path(pid_file).expanduser().absolute()
    pid = _read_pid(pid_file)
    if not pid_alive(pid):
        _remove_pid_file(pid_file, pid)
        say(f"ZooKeeper pid {pid} was not running; removed {pid_file}")
        return 0
    if not _is_zookeeper(pid):
        raise ZooKeeperServiceError(f"pid {pid} from {pid_file} is not a ZooKeeper server "
                                    "(no QuorumPeerMain in its command line); not signalling it")
    for sig in (signal.SIGTERM, signal.SIGCONT):   # a paused JVM cannot act on SIGTERM
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
    if not _wait_gone(pid, timeout_s):
        say(f"ZooKeeper pid {pid} ignored SIGTERM for {timeout_s:g} s: SIGKILL")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if not _wait_gone(pid, 10.0):
            raise ZooKeeperServiceError(f"ZooKeeper pid {pid} survived SIGKILL")
    _remove_pid_file(pid_file, pid)
    say(f"ZooKeeper pid {pid} stopped")
    return 0


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)
    return True


def four_letter(host: str, port: int, cmd: str = "srvr", timeout_s: float = 2.0) -> str:
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        s.sendall(cmd.encode("ascii"))
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def status(connect: str, say=print) -> int:
    """`srvr` each host:port of a connect string; 0 when every server serves."""
    ok = True
    for hostport in [h.strip() for h in connect.split("/")[0].split(",") if h.strip()]:
        host, _, port = hostport.rpartition(":")
        if not host or not port.isdigit():
            raise ZooKeeperServiceError(f"--zookeeper wants host:port[,host:port...], got {hostport!r}")
        try:
            text = four_letter(host, int(port))
        except OSError as exc:
            say(f"{hostport}\tunreachable ({exc.strerror or exc})")
            ok = False
            continue
        mode = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                     if line.startswith("Mode:")), None)
        ok = ok and mode is not None
        say(f"{hostport}\t{mode or 'not serving (no quorum?)'}")
    return 0 if ok else 1
