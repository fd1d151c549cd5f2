"""`rayka zookeeper start|stop|status` as `ray up` runs it: separate processes, the real
ZooKeeper 3.8 server, everything on loopback. A standalone daemon serves kazoo and is
stopped by its pid; three `start --daemon --myid i --servers ...` invocations form a real
quorum (one leader); a foreground server stops on SIGTERM; errors are one line, exit 1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from kazoo.client import KazooClient

from rayka.ops import zookeeper_service as zs
from rayka.ops.procs import pid_alive
from controller.zookeeper.server import free_port, free_ports
from tests.zk_helpers import wait_until

RAYKA = os.path.join(os.path.dirname(sys.executable), "rayka")


def run(*args, timeout=90) -> subprocess.CompletedProcess:
    return subprocess.run([RAYKA, *args], capture_output=True, text=True, timeout=timeout)


def one_line_error(proc, code=1) -> str:
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("rayka: ")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def srvr_mode(port: int) -> str | None:
    try:
        text = zs.four_letter("127.0.0.1", port)
    except OSError:
        return None
    return next((ln.split(":", 1)[1].strip() for ln in text.splitlines()
                 if ln.startswith("Mode:")), None)


def port_refuses(port: int) -> bool:
    return not zs._listening("127.0.0.1", port)


@pytest.fixture
def pid_files(tmp_path):
    """Pid files a test's servers write; whatever is still alive at the end is stopped BY PID."""
    files: list = []
    yield files
    for f in files:
        try:
            pid = int(f.read_text())
        except (OSError, ValueError):
            continue
        if pid_alive(pid) and zs._is_zookeeper(pid):
            os.kill(pid, signal.SIGKILL)


def kazoo(hosts: str) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=4.0)
    client.start(timeout=20)
    return client


# -- standalone daemon -----------------------------------------------------------------------------------
@pytest.mark.zk
def test_standalone_daemon_serves_and_stops_by_pid(tmp_path, pid_files):
    port, pid_file, log = free_port(), tmp_path / "run" / "zk.pid", tmp_path / "logs" / "zk.log"
    pid_files.append(pid_file)
    t0 = time.monotonic()
    started = run("zookeeper", "start", "--daemon", "--data-dir", str(tmp_path / "data"),
                  "--client-port", str(port), "--pid-file", str(pid_file), "--log-file", str(log))
    assert started.returncode == 0, started.stderr
    assert time.monotonic() - t0 < 60
    pid = int(pid_file.read_text())
    assert pid_alive(pid) and zs._is_zookeeper(pid) and f"pid {pid}" in started.stdout
    assert os.getsid(pid) == pid != os.getsid(0)          # its own session: detached
    assert srvr_mode(port) == "standalone"                # serving when `start` returned
    cfg = (tmp_path / "data" / "conf" / "zoo.cfg").read_text()
    assert "clientPortAddress=127.0.0.1\n" in cfg and f"clientPort={port}\n" in cfg
    assert log.exists() and log.stat().st_size > 0

    client = kazoo(f"127.0.0.1:{port}")
    try:
        client.create("/rayka-cli-test/a", b"hello", makepath=True)
        assert client.get("/rayka-cli-test/a")[0] == b"hello"
    finally:
        client.stop()
        client.close()

    again = run("zookeeper", "start", "--daemon", "--data-dir", str(tmp_path / "data"),
                "--client-port", str(port), "--pid-file", str(pid_file))
    assert again.returncode == 0 and "already running" in again.stdout, again.stderr
    assert int(pid_file.read_text()) == pid

    status = run("zookeeper", "status", "--zookeeper", f"127.0.0.1:{port}")
    assert status.returncode == 0 and "standalone" in status.stdout, status

    stopped = run("zookeeper", "stop", "--pid-file", str(pid_file))
    assert stopped.returncode == 0, stopped.stderr
    assert not pid_alive(pid) and not pid_file.exists() and port_refuses(port)
    assert "no pid file" in one_line_error(run("zookeeper", "stop", "--pid-file", str(pid_file)))
    assert run("zookeeper", "status", "--zookeeper", f"127.0.0.1:{port}").returncode == 1

    # data survive a restart: same data dir, the znode is still there
    restarted = run("zookeeper", "start", "--daemon", "--data-dir", str(tmp_path / "data"),
                    "--client-port", str(port), "--pid-file", str(pid_file))
    assert restarted.returncode == 0, restarted.stderr
    client = kazoo(f"127.0.0.1:{port}")
    try:
        assert client.get("/rayka-cli-test/a")[0] == b"hello"
    finally:
        client.stop()
        client.close()
    assert run("zookeeper", "stop", "--pid-file", str(pid_file)).returncode == 0


# -- 3-member ensemble, one `start` per member -----------------------------------------------------------
@pytest.mark.zk
def test_three_member_ensemble_forms_a_quorum(tmp_path, pid_files):
    ports = free_ports(9)
    members = [ports[3 * i:3 * i + 3] for i in range(3)]           # client, peer, election
    servers = ",".join(f"127.0.0.1:{c}:{p}:{e}" for c, p, e in members)
    pids = []
    for i in (1, 2, 3):
        pid_file = tmp_path / f"zk{i}.pid"
        pid_files.append(pid_file)
        got = run("zookeeper", "start", "--daemon", "--myid", str(i), "--servers", servers,
                  "--data-dir", str(tmp_path / f"zk{i}"), "--pid-file", str(pid_file),
                  "--tick-time-ms", "200")
        assert got.returncode == 0, got.stderr
        assert f"member {i} of 3" in got.stdout
        pids.append(int(pid_file.read_text()))
        assert (tmp_path / f"zk{i}" / "myid").read_text().strip() == str(i)
    cfg = (tmp_path / "zk2" / "conf" / "zoo.cfg").read_text()
    for i, (_c, p, e) in enumerate(members, start=1):
        assert f"server.{i}=127.0.0.1:{p}:{e}\n" in cfg

    clients = [c for c, _p, _e in members]
    modes = wait_until(lambda: (m := [srvr_mode(c) for c in clients]) and None not in m and m,
                       60, "all three members serving")
    assert sorted(modes) == ["follower", "follower", "leader"], modes
    connect = ",".join(f"127.0.0.1:{c}" for c in clients)
    status = run("zookeeper", "status", "--zookeeper", connect)
    assert status.returncode == 0 and status.stdout.count("leader") == 1, status

    writer = kazoo(connect)
    reader = kazoo(f"127.0.0.1:{clients[modes.index('follower')]}")
    try:
        writer.create("/rayka-ensemble/x", b"quorum", makepath=True)
        reader.sync("/rayka-ensemble/x")
        assert reader.get("/rayka-ensemble/x")[0] == b"quorum"
    finally:
        for c in (writer, reader):
            c.stop()
            c.close()

    for i, pid in enumerate(pids, start=1):
        stopped = run("zookeeper", "stop", "--pid-file", str(tmp_path / f"zk{i}.pid"))
        assert stopped.returncode == 0, stopped.stderr
        assert not pid_alive(pid)
    assert all(port_refuses(c) for c in clients)


# -- foreground -----------------------------------------------------------------------------------------
@pytest.mark.zk
def test_foreground_server_stops_on_sigterm(tmp_path, pid_files):
    port, pid_file = free_port(), tmp_path / "zk.pid"
    pid_files.append(pid_file)
    proc = subprocess.Popen([RAYKA, "zookeeper", "start", "--data-dir", str(tmp_path / "d"),
                             "--client-port", str(port), "--pid-file", str(pid_file)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: srvr_mode(port) == "standalone", 60, "the foreground server serving")
        jvm = int(wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 10,
                             "the pid file"))
        assert proc.poll() is None and pid_alive(jvm)
        proc.send_signal(signal.SIGTERM)                     # the rayka process, by its pid
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "stopped" in out
    assert not pid_alive(jvm) and not pid_file.exists() and port_refuses(port)


# -- one-line errors -------------------------------------------------------------------------------------
@pytest.mark.zk
def test_errors_are_one_line(tmp_path):
    d = str(tmp_path / "d")
    assert "--myid and --servers" in one_line_error(
        run("zookeeper", "start", "--data-dir", d, "--myid", "1"))
    assert "--daemon needs --pid-file" in one_line_error(
        run("zookeeper", "start", "--data-dir", d, "--daemon"))
    assert "not in 1..3" in one_line_error(
        run("zookeeper", "start", "--data-dir", d, "--myid", "4", "--servers", "a,b,c"))
    assert "want host" in one_line_error(
        run("zookeeper", "start", "--data-dir", d, "--myid", "1", "--servers", "a:1,b,c"))

    with socketserver_on_free_port() as port:                # the client port is taken
        assert "already listens" in one_line_error(
            run("zookeeper", "start", "--data-dir", d, "--client-port", str(port)))

    # a pid file naming a process that is not ZooKeeper: refused, the process untouched
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        pid_file = tmp_path / "other.pid"
        pid_file.write_text(f"{other.pid}\n")
        assert "not a ZooKeeper server" in one_line_error(
            run("zookeeper", "stop", "--pid-file", str(pid_file)))
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
    garbage = tmp_path / "garbage.pid"
    garbage.write_text("hello")
    assert "does not hold a pid" in one_line_error(run("zookeeper", "stop", "--pid-file", str(garbage)))


class socketserver_on_free_port:
    def __enter__(self):
        import socket
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        return self.sock.getsockname()[1]

    def __exit__(self, *exc):
        self.sock.close()


# -- pure parsing ------------------------------------------------------------------------------------------
@pytest.mark.unit
def test_parse_servers_forms():
    bare = zs.parse_servers("h1,h2,h3")
    assert [(m.myid, m.host, m.client_port, m.peer_port, m.election_port) for m in bare] == [
        (1, "h1", None, 2888, 3888), (2, "h2", None, 2888, 3888), (3, "h3", None, 2888, 3888)]
    mixed = zs.parse_servers("h1:2889:3889, h2:2182:2890:3890", peer_port=1, election_port=2)
    assert mixed == [zs.Member(1, "h1", None, 2889, 3889), zs.Member(2, "h2", 2182, 2890, 3890)]
    for bad in ("", "h1,,h2", "h1:2", "h1:x:3888", ":1:2", "h:1:2:3:4", "h:0:2888:3888"):
        with pytest.raises(zs.ZooKeeperServiceError):
            zs.parse_servers(bad)


@pytest.mark.unit
def test_deployed_member_config_binds_every_interface(tmp_path):
    """What `ray up` runs on node 2 of a 3-host ensemble (config written, nothing started)."""
    server, members = zs.build_server(data_dir=tmp_path / "zk", bind="0.0.0.0", myid=2,
                                      servers="10.0.0.1,10.0.0.2,10.0.0.3",
                                      log_file=tmp_path / "logs" / "zk.log")
    assert [m.host for m in members] == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert server.port == 2181 and server.probe_host == "127.0.0.1"
    cfg = (server._write_config() / "zoo.cfg").read_text().splitlines()
    for line in ("clientPort=2181", "clientPortAddress=0.0.0.0", "quorumListenOnAllIPs=true",
                 "tickTime=500", "server.1=10.0.0.1:2888:3888", "server.2=10.0.0.2:2888:3888",
                 "server.3=10.0.0.3:2888:3888"):
        assert line in cfg, (line, cfg)
    assert (tmp_path / "zk" / "myid").read_text().strip() == "2"
    assert server.log_file == tmp_path / "logs" / "zk.log"
    standalone, none = zs.build_server(data_dir=tmp_path / "s", client_port=2200)
    assert none == [] and standalone.connect_string == "127.0.0.1:2200"
    with pytest.raises(zs.ZooKeeperServiceError, match="contradicts"):
        zs.build_server(data_dir=tmp_path / "x", client_port=2200, myid=1,
                        servers="h:2181:2888:3888,h:2182:2889:3889")
