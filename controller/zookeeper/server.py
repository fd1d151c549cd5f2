"""Embedded ZooKeeper launcher: a real ZooKeeper server (or ensemble) as child processes.

Used by the rayka driver (local clusters) and by the tests. Rules:

* Real server only: the Debian ``zookeeper`` 3.8 jars run by ``java`` (QuorumPeerMain).
  No fakes, no in-process mocks; a session expiry here is a real server-side expiry.
* Loopback by default: clientPortAddress, quorum and election ports are on 127.0.0.1;
  the AdminServer (Jetty, port 8080) is disabled. Ports are chosen free unless given.
  A deployed server (``rayka zookeeper start``, rayka/ops/zookeeper_service.py) may pass
  ``client_address`` (bind address) and ``peers`` with a host per member.
* Each JVM runs in its own session (start_new_session=True): a Ctrl-C to the test runner
  does not reach it. It is stopped by ITS pid only (SIGTERM, deadline, then SIGKILL),
  never by name (no pkill/killall). An atexit hook stops whatever this process started.
* A server started from a process's main thread dies with that process
  (``die_with_parent``, Linux PR_SET_PDEATHSIG): a SIGKILLed test run, driver or cluster
  host leaves no ZooKeeper behind (atexit cannot run then). The deathsig follows the
  forking THREAD, so servers started from other threads (chaos restarts) rely on atexit.
  A server meant to outlive its starter (``rayka zookeeper start --daemon``) passes
  ``die_with_parent=False``; ``detach()`` refuses a server started without it.
* No fixed sleeps: readiness is polled with a deadline via the ``srvr`` four-letter word
  (``4lw.commands.whitelist=srvr,ruok,stat,mntr,cons``).
* Files live in the server's data dir: ``zoo.cfg`` and ``log4j.properties`` in ``conf/``,
  the server log in ``zookeeper.log``, JVM stdout/stderr in ``zookeeper.out``, ``myid``
  for ensemble members. A data dir we created (mkdtemp) is removed by ``stop()``; one
  the caller passed is never removed.
* Classpath: ``RAYKA_ZK_CLASSPATH`` (os.pathsep-separated) overrides the default, which is
  Debian's zookeeper.jar (its manifest Class-Path pulls in jute, netty, slf4j-api, ...)
  plus the slf4j-log4j12 binding and log4j 1.2 so the server log is written to a file.
  Java: the ``java=`` argument, else ``$JAVA_HOME/bin/java``, else ``java`` on PATH.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

__all__ = ["ZooKeeperLaunchError", "ZooKeeperServer", "ZooKeeperEnsemble",
           "free_port", "find_java", "zookeeper_classpath"]

JAVA_DIR = Path("/usr/share/java")
DEFAULT_JARS = ("zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar",
                "slf4j-log4j12.jar", "log4j-1.2.jar")
REQUIRED_JARS = ("zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
FOUR_LETTER_WORDS = "srvr,ruok,stat,mntr,cons"
_POLL_S = 0.05
_PR_SET_PDEATHSIG = 1     # linux/prctl.h

_LOG4J = """\
log4j.rootLogger={level}, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=${{zookeeper.log.file}}
log4j.appender.FILE.Append=true
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{{ISO8601}} %-5p [%t:%C{{1}}@%L] - %m%n
"""


class ZooKeeperLaunchError(RuntimeError):
    """The ZooKeeper server could not be found, started, or did not start serving."""


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (bind to port 0, read it, close)."""
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1."""
    socks = []
    try:  # hold all sockets open so the n ports are distinct
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def find_java(java: str | os.PathLike | None = None) -> str:
    """Path of the java executable: ``java`` argument, else $JAVA_HOME/bin/java, else PATH."""
    if java is not None:
        found = shutil.which(str(java))
        if found:
            return found
        raise ZooKeeperLaunchError(f"Java not found: the given java {str(java)!r} is not an "
                                   "executable file or a command on PATH")
    home = os.environ.get("JAVA_HOME")
    cand = Path(home or "/nonexistent") / "bin" / "java"
    if home and cand.is_file() and os.access(cand, os.X_OK):
        return str(cand)
    found = shutil.which("java")
    if found:
        return found
    looked = [f"$JAVA_HOME/bin/java ({cand}: missing)" if home else "$JAVA_HOME (not set)",
              "`java` on PATH (not found)"]
    raise ZooKeeperLaunchError("Java not found: looked for " + ", ".join(looked)
                               + ". Install a Java runtime (make install installs "
                               "openjdk-17-jre-headless) or set JAVA_HOME.")


def zookeeper_classpath(classpath: str | list | None = None) -> list[str]:
    """Classpath entries for the server: ``classpath`` arg, else $RAYKA_ZK_CLASSPATH, else Debian's jars."""
    if classpath is None:
        classpath = os.environ.get("RAYKA_ZK_CLASSPATH") or None
    if classpath is not None:
        entries = classpath.split(os.pathsep) if isinstance(classpath, str) else [str(c) for c in classpath]
        entries = [e for e in entries if e]
        required = entries
    else:
        entries = [str(JAVA_DIR / j) for j in DEFAULT_JARS if (JAVA_DIR / j).exists()]
        required = [str(JAVA_DIR / j) for j in REQUIRED_JARS]
    for e in required:
        probe = e[:-1] if e.endswith("*") else e  # java wildcard dir/*
        if not probe or not Path(probe).exists():
            raise ZooKeeperLaunchError(
                f"ZooKeeper jars missing: {e} does not exist; install the Debian package "
                "`zookeeper` (make install does this) or fix RAYKA_ZK_CLASSPATH.")
    if not entries:
        raise ZooKeeperLaunchError("ZooKeeper jars missing: empty classpath; install the Debian "
                                   "package `zookeeper` (make install does this).")
    return entries


def log_tail(path: Path, lines: int = 30) -> str:
    """The last `lines` lines of a log file (its last 64 KiB read), for a launch error."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return f"<no {path.name}>"
    return "\n".join(text.splitlines()[-lines:]) or f"<{path.name} empty>"


class ZooKeeperServer:
    """One real ZooKeeper server process on 127.0.0.1 (standalone, or one ensemble member).

    For an ensemble member pass ``myid`` and ``peers`` = {myid: (peer_port, election_port)}
    for every member (ZooKeeperEnsemble does this), or {myid: (host, peer_port,
    election_port)} for members on other hosts; such a member serves only once a quorum
    of its peers is up, so start it with ``start(wait=False)`` or after its peers.
    ``client_address`` is the clientPortAddress (default 127.0.0.1; 0.0.0.0 = every
    interface, probed on 127.0.0.1). ``log_file`` moves the server log (default
    ``<data_dir>/zookeeper.log``).
    """

    def __init__(self, *, port=None, data_dir=None, tick_time_ms=200,
                 min_session_timeout_ms=None, max_session_timeout_ms=None, heap_mb=256,
                 start_timeout_s=30.0, java=None, classpath=None, myid=None, peers=None,
                 init_limit=10, sync_limit=5, log_level="INFO", extra_config=None,
                 client_address="127.0.0.1", log_file=None, die_with_parent=True):
        self._port = port or free_port()
        self.die_with_parent = die_with_parent
        self._owns_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="rayka-zk-"))
        self.tick_time_ms, self.heap_mb, self.start_timeout_s = tick_time_ms, heap_mb, start_timeout_s
        self.min_session_timeout_ms, self.max_session_timeout_ms = min_session_timeout_ms, max_session_timeout_ms
        self.java, self.classpath, self.log_level = java, classpath, log_level
        self.myid, self.peers = myid, dict(peers or {})
        self.init_limit, self.sync_limit = init_limit, sync_limit
        self.extra_config = dict(extra_config or {})
        self.client_address = client_address
        self.log_file = Path(log_file) if log_file else self.data_dir / "zookeeper.log"  # log4j log
        self.out_file = self.data_dir / "zookeeper.out"  # JVM stdout/stderr
        self._proc: subprocess.Popen | None = None
        self._lock = threading.RLock()

    # -- properties -------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._port

    @property
    def probe_host(self) -> str:
        """Where this machine reaches the client port (127.0.0.1 for a wildcard bind)."""
        return "127.0.0.1" if self.client_address in ("0.0.0.0", "", "::") else self.client_address

    @property
    def connect_string(self) -> str:
        return f"{self.probe_host}:{self._port}"

    @property
    def pid(self) -> int | None:
        """pid of the running JVM, None if not started or already stopped/killed (reaped)."""
        return self._proc.pid if self.is_running() else None

    def is_running(self) -> bool:
        """True while the process exists (a paused process counts as running)."""
        return self._proc is not None and self._proc.poll() is None

    def __repr__(self):
        return f"<ZooKeeperServer {self.connect_string} myid={self.myid} pid={self.pid}>"

    # -- config -----------------------------------------------------------------------
    def _write_config(self) -> Path:
        conf = self.data_dir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        cfg = {"tickTime": self.tick_time_ms, "dataDir": str(self.data_dir),
               "clientPort": self._port, "clientPortAddress": self.client_address,
               "admin.enableServer": "false", "4lw.commands.whitelist": FOUR_LETTER_WORDS,
               "maxClientCnxns": 0}
        if self.min_session_timeout_ms is not None:
            cfg["minSessionTimeout"] = self.min_session_timeout_ms
        if self.max_session_timeout_ms is not None:
            cfg["maxSessionTimeout"] = self.max_session_timeout_ms
        if self.peers:
            cfg.update(initLimit=self.init_limit, syncLimit=self.sync_limit)
            for sid, addr in sorted(self.peers.items()):
                host, peer, election = addr if len(addr) == 3 else ("127.0.0.1", *addr)
                cfg[f"server.{sid}"] = f"{host}:{peer}:{election}"
            (self.data_dir / "myid").write_text(f"{self.myid}\n")
        cfg.update(self.extra_config)
        (conf / "zoo.cfg").write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
        (conf / "log4j.properties").write_text(_LOG4J.format(level=self.log_level))
        return conf

    def _command(self) -> list[str]:
        java = find_java(self.java)
        cp = zookeeper_classpath(self.classpath)
        conf = self._write_config()
        return [java, f"-Xmx{self.heap_mb}m", f"-Xms{min(32, self.heap_mb)}m",
                "-XX:+UseSerialGC", "-XX:-UsePerfData", "-Djava.net.preferIPv4Stack=true",
                "-Dzookeeper.jmx.log4j.disable=true",
                f"-Dlog4j.configuration=file:{conf / 'log4j.properties'}",
                f"-Dzookeeper.log.file={self.log_file}",
                "-cp", os.pathsep.join(cp + [str(conf)]), MAIN_CLASS, str(conf / "zoo.cfg")]

    # -- lifecycle --------------------------------------------------------------------
    def start(self, wait: bool = True) -> "ZooKeeperServer":
        """Start the JVM; with wait, block until ``srvr`` reports a Mode (or raise)."""
        with self._lock:
            if self.is_running():
                return self
            self.data_dir.mkdir(parents=True, exist_ok=True)
            cmd = self._command()
            with open(self.out_file, "ab") as out:
                self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                              stderr=subprocess.STDOUT, cwd=self.data_dir,
                                              start_new_session=True,
                                              preexec_fn=self._preexec())
            _register(self)
        if wait:
            self.wait_serving(self.start_timeout_s)
        return self

    def wait_serving(self, timeout_s: float | None = None) -> str:
        """Poll ``srvr`` until it reports a Mode; return the mode. On failure kill and raise."""
        deadline = time.monotonic() + (self.start_timeout_s if timeout_s is None else timeout_s)
        while True:
            mode = self.mode()
            if mode is not None:
                return mode
            exited = self._proc is None or self._proc.poll() is not None
            if exited or time.monotonic() >= deadline:
                code = None if self._proc is None else self._proc.poll()
                self.kill()  # keep the data dir so the logs can be read; stop() removes it
                why = (f"exited with code {code}" if exited else
                       f"did not start serving within {timeout_s or self.start_timeout_s:g} s")
                raise ZooKeeperLaunchError(
                    f"ZooKeeper server at {self.connect_string} (myid={self.myid}) {why}.\n"
                    f"--- last lines of {self.log_file} ---\n{log_tail(self.log_file)}\n"
                    f"--- last lines of {self.out_file} ---\n{log_tail(self.out_file, 10)}")
            time.sleep(_POLL_S)

    def stop(self, timeout_s: float = 10.0, keep_data: bool = False) -> None:
        """SIGTERM our pid, wait up to timeout_s, then SIGKILL. Idempotent.

        Removes the data dir if we created it, unless keep_data."""
        with self._lock:
            proc = self._proc
            if proc is not None and proc.poll() is None:
                self._signal(signal.SIGTERM)
                self._signal(signal.SIGCONT)  # a paused JVM cannot act on SIGTERM
                try:
                    proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    self._signal(signal.SIGKILL)
                    proc.wait(10)
            _unregister(self)
            if self._owns_dir and not keep_data:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    def _preexec(self):
        """The child's last step before exec: die with this process (main thread only)."""
        if not self.die_with_parent or threading.current_thread() is not threading.main_thread():
            return None
        parent = os.getpid()
        prctl = ctypes.CDLL(None, use_errno=True).prctl   # resolved before fork: no locks after

        def set_deathsig():
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:      # the parent died before the line above
                os._exit(1)
        return set_deathsig

    def detach(self) -> int | None:
        """Let the running JVM outlive this process (no atexit stop; data dir kept); its pid."""
        if self.die_with_parent and self.is_running():
            raise ZooKeeperLaunchError("detach() needs a server built with die_with_parent=False")
        with self._lock:
            _unregister(self)
            self._owns_dir = False
            return self.pid

    def kill(self) -> None:
        """SIGKILL now (chaos). Keeps the data dir."""
        with self._lock:
            if self.is_running():
                self._signal(signal.SIGKILL)
                self._proc.wait(10)
            _unregister(self)

    def restart(self, wait: bool = True) -> "ZooKeeperServer":
        """Stop and start again with the same port and data dir."""
        self.stop(keep_data=True)
        return self.start(wait=wait)

    def pause(self) -> None:
        """SIGSTOP: the process freezes (sessions it serves time out, peers see it silent)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, sig) -> None:
        if self.is_running():
            try:
                os.kill(self._proc.pid, sig)  # by pid only
            except ProcessLookupError:
                pass

    # -- probing ----------------------------------------------------------------------
    def four_letter(self, cmd: str, timeout_s: float = 1.0) -> str:
        """Send a four-letter word (srvr, ruok, stat, mntr, cons); raises OSError if no answer."""
        with socket.create_connection((self.probe_host, self._port), timeout=timeout_s) as s:
            s.sendall(cmd.encode("ascii"))
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", "replace")

    def mode(self, timeout_s: float = 1.0) -> str | None:
        """'standalone' | 'leader' | 'follower' | 'observer', or None if not serving."""
        try:
            text = self.four_letter("srvr", timeout_s)
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class ZooKeeperEnsemble:
    """N real ZooKeeper servers on loopback forming one quorum.

    ``servers`` is a list indexed 0..N-1; ``servers[i].myid == i + 1``. Every method that
    takes ``i`` (stop_server, start_server, kill_server) and ``leader()`` use the 0-based index.
    """

    def __init__(self, size: int = 3, *, base_dir=None, tick_time_ms=200, init_limit=10,
                 sync_limit=5, start_timeout_s=30.0, **server_kwargs):
        self._owns_dir = base_dir is None
        self.base_dir = Path(base_dir or tempfile.mkdtemp(prefix="rayka-zk-ensemble-"))
        self.start_timeout_s = start_timeout_s
        ports = free_ports(3 * size)
        peers = {i + 1: (ports[3 * i + 1], ports[3 * i + 2]) for i in range(size)}
        self._servers = [
            ZooKeeperServer(port=ports[3 * i], data_dir=self.base_dir / f"zk{i + 1}", myid=i + 1,
                            peers=peers, tick_time_ms=tick_time_ms, init_limit=init_limit,
                            sync_limit=sync_limit, start_timeout_s=start_timeout_s, **server_kwargs)
            for i in range(size)]

    @property
    def servers(self) -> list[ZooKeeperServer]:
        return list(self._servers)

    @property
    def connect_string(self) -> str:
        return ",".join(s.connect_string for s in self._servers)

    def start(self) -> "ZooKeeperEnsemble":
        """Start all members; wait until all serve and exactly one is leader."""
        _register(self)
        try:
            for s in self._servers:
                s.start(wait=False)
            self.wait_for_quorum(self.start_timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for s in self._servers:
            s.stop()
        _unregister(self)
        if self._owns_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def stop_server(self, i: int, timeout_s: float = 10.0) -> None:
        self._servers[i].stop(timeout_s)

    def kill_server(self, i: int) -> None:
        self._servers[i].kill()

    def start_server(self, i: int, wait: bool = True) -> ZooKeeperServer:
        """(Re)start member i with its ports and data; with wait, until it serves again."""
        return self._servers[i].start(wait=wait)

    def modes(self) -> list[str | None]:
        return [s.mode() if s.is_running() else None for s in self._servers]

    def leader(self, timeout_s: float = 10.0) -> int:
        """0-based index of the member whose ``srvr`` says Mode: leader (polls until one does)."""
        deadline = time.monotonic() + timeout_s
        while True:
            modes = self.modes()
            if modes.count("leader") == 1:
                return modes.index("leader")
            if time.monotonic() >= deadline:
                raise ZooKeeperLaunchError(f"no single leader within {timeout_s:g} s: modes={modes}"
                                           f" ({self.connect_string})")
            time.sleep(_POLL_S)

    def wait_for_quorum(self, timeout_s: float = 30.0) -> int:
        """Wait until every running member serves and exactly one leads; return its index."""
        deadline = time.monotonic() + timeout_s
        while True:
            running = [s for s in self._servers if s.is_running()]
            modes = [s.mode() for s in running]
            if running and None not in modes and modes.count("leader") == 1:
                return self._servers.index(running[modes.index("leader")])
            dead = [s for s in self._servers if s._proc is not None and s._proc.poll() is not None]
            if time.monotonic() >= deadline or (dead and not running):
                tails = "\n".join(f"--- server {s.myid} ({s.connect_string}) {s.log_file} ---\n"
                                  f"{log_tail(s.log_file, 15)}" for s in self._servers)
                raise ZooKeeperLaunchError(
                    f"ZooKeeper ensemble {self.connect_string} did not form a quorum within "
                    f"{timeout_s:g} s: modes={self.modes()}\n{tails}")
            time.sleep(_POLL_S)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


# -- atexit safety net: stop (by pid) whatever this process started and forgot ----------
_live: dict[int, object] = {}
_live_lock = threading.Lock()


def _register(obj) -> None:
    with _live_lock:
        _live[id(obj)] = obj


def _unregister(obj) -> None:
    with _live_lock:
        _live.pop(id(obj), None)


@atexit.register
def _stop_all() -> None:
    with _live_lock:
        objs = list(_live.values())
    for obj in sorted(objs, key=lambda o: not isinstance(o, ZooKeeperEnsemble)):
        try:
            obj.stop()
        except Exception:
            pass
