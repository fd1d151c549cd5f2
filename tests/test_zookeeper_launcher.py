"""Tests of controller.zookeeper.server against the real ZooKeeper 3.8 server (no fakes)."""
from __future__ import annotations

import os
import re
import signal
import socket
import threading

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException

from controller.zookeeper.server import (ZooKeeperLaunchError, ZooKeeperServer, find_java,
                                         zookeeper_classpath)
from rayka.ops.procs import pid_alive
from tests.zk_helpers import wait_until

pytestmark = pytest.mark.zk


def port_refuses(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


class StateLog:
    """Records kazoo session states; listener must not block."""

    def __init__(self, client):
        self.states, self.lock = [], threading.Lock()
        client.add_listener(self)

    def __call__(self, state):
        with self.lock:
            self.states.append(state)

    def snapshot(self):
        with self.lock:
            return list(self.states)


def started_client(hosts, timeout=4.0, **kw):
    client = KazooClient(hosts=hosts, timeout=timeout, **kw)
    client.start(timeout=15)
    return client


def closed(client):
    client.stop()
    client.close()


def negotiated_timeout_ms(server, session_id):
    """The session timeout the server negotiated, read from the `cons` four-letter word."""
    for line in server.four_letter("cons").splitlines():
        m = re.search(r"sid=0x([0-9a-f]+).*?,to=(\d+)", line)
        if m and int(m.group(1), 16) == session_id:
            return int(m.group(2))
    return None


# -- standalone ---------------------------------------------------------------------------

def test_fixture_server_is_real_standalone_and_serves_znodes(zk_server, zk_client, zk_chroot):
    assert zk_server.mode() == "standalone"
    assert zk_server.connect_string == f"127.0.0.1:{zk_server.port}"
    assert zk_server.four_letter("ruok") == "imok"
    zk_client.create(f"{zk_chroot}/a", b"hello", makepath=True)
    data, stat = zk_client.get(f"{zk_chroot}/a")
    assert data == b"hello" and stat.version == 0
    assert "Mode: standalone" in zk_server.four_letter("srvr")


def test_stop_removes_pid_port_and_owned_data_dir():
    server = ZooKeeperServer().start()
    pid, port, data_dir = server.pid, server.port, server.data_dir
    try:
        assert pid_alive(pid) and server.is_running()
        assert (data_dir / "conf" / "zoo.cfg").read_text().count("clientPortAddress=127.0.0.1") == 1
        client = started_client(server.connect_string)
        client.create("/x", b"1")
        assert client.get("/x")[0] == b"1"
        closed(client)
    finally:
        server.stop()
    assert not pid_alive(pid)
    assert port_refuses(port)
    assert not data_dir.exists()
    assert server.pid is None and not server.is_running() and server.mode() is None
    server.stop()  # idempotent


def test_restart_keeps_persistent_znodes_same_port_and_dir():
    server = ZooKeeperServer().start()
    try:
        port, data_dir, pid1 = server.port, server.data_dir, server.pid
        client = started_client(server.connect_string)
        client.create("/persist/me", b"kept", makepath=True)
        closed(client)
        server.restart()
        assert server.pid != pid1 and not pid_alive(pid1)
        assert server.port == port and server.data_dir == data_dir
        assert server.mode() == "standalone"
        client = started_client(server.connect_string)
        assert client.get("/persist/me")[0] == b"kept"
        closed(client)
    finally:
        server.stop()
    assert not data_dir.exists()


def test_caller_supplied_data_dir_is_kept(tmp_path):
    with ZooKeeperServer(data_dir=tmp_path / "zk") as server:
        assert server.mode() == "standalone"
    assert (tmp_path / "zk" / "version-2").is_dir()
    assert (tmp_path / "zk" / "zookeeper.log").stat().st_size > 0


def test_ephemeral_disappears_when_owner_closes(zk_server, zk_client, zk_chroot):
    owner = started_client(zk_server.connect_string)
    path = f"{zk_chroot}/eph"
    owner.create(path, b"", ephemeral=True, makepath=True)
    assert zk_client.exists(path).ephemeralOwner == owner.client_id[0]
    closed(owner)
    assert zk_client.exists(path) is None  # no waiting for a timeout


def test_real_server_side_session_expiry(zk_server, zk_chroot):
    client = started_client(zk_server.connect_string, timeout=4.0)
    try:
        log = StateLog(client)
        path = f"{zk_chroot}/eph"
        client.create(path, b"", ephemeral=True, makepath=True)
        old_session = client.client_id[0]
        # Steal the session with its id+password, then close it: the server expires it.
        thief = started_client(zk_server.connect_string, client_id=client.client_id)
        assert thief.client_id[0] == old_session
        closed(thief)
        wait_until(lambda: KazooState.LOST in log.snapshot(), 15, "LOST")
        wait_until(lambda: client.state == KazooState.CONNECTED
                   and log.snapshot()[-1] == KazooState.CONNECTED, 15, "CONNECTED after LOST")
        assert client.client_id[0] != old_session
        assert client.exists(path) is None
    finally:
        closed(client)


def test_session_timeout_bounds_are_honoured(zk_server):
    # tickTime 200 -> max 20 * 200 = 4000 ms, min 2 * 200 = 400 ms.
    client = started_client(zk_server.connect_string, timeout=60.0)
    try:
        assert negotiated_timeout_ms(zk_server, client.client_id[0]) == 4000
    finally:
        closed(client)
    with ZooKeeperServer(min_session_timeout_ms=1000, max_session_timeout_ms=1500) as server:
        long_, short = (started_client(server.connect_string, timeout=t) for t in (60.0, 0.2))
        try:
            assert negotiated_timeout_ms(server, long_.client_id[0]) == 1500
            assert negotiated_timeout_ms(server, short.client_id[0]) == 1000
        finally:
            closed(long_)
            closed(short)


# -- ensemble -----------------------------------------------------------------------------

def test_ensemble_forms_with_exactly_one_leader(zk_ensemble):
    leader = zk_ensemble.wait_for_quorum(30)
    hosts = zk_ensemble.connect_string.split(",")
    assert len(hosts) == 3 and all(h.startswith("127.0.0.1:") for h in hosts)
    assert len({h.split(":")[1] for h in hosts}) == 3
    modes = zk_ensemble.modes()
    assert sorted(modes) == ["follower", "follower", "leader"]
    assert zk_ensemble.leader() == leader == modes.index("leader")
    for i, s in enumerate(zk_ensemble.servers):
        assert s.myid == i + 1 and (s.data_dir / "myid").read_text().strip() == str(i + 1)


def test_ensemble_leader_kill_elects_new_leader_and_session_survives(zk_ensemble, zk_chroot):
    zk_ensemble.wait_for_quorum(30)
    client = started_client(zk_ensemble.connect_string, timeout=4.0)
    old = zk_ensemble.leader()
    try:
        log = StateLog(client)
        session = client.client_id[0]
        path = f"{zk_chroot}/eph"
        client.create(path, b"", ephemeral=True, makepath=True)
        old_pid = zk_ensemble.servers[old].pid
        zk_ensemble.kill_server(old)
        assert not pid_alive(old_pid)
        new = zk_ensemble.leader(timeout_s=15)
        assert new != old

        def ephemeral_owner():
            try:
                stat = client.exists(path)
            except KazooException:  # ConnectionLoss while reconnecting
                return None
            return stat and stat.ephemeralOwner

        assert wait_until(ephemeral_owner, 15, "ephemeral readable after failover") == session
        assert client.client_id[0] == session
        assert KazooState.LOST not in log.snapshot()
    finally:
        closed(client)
        zk_ensemble.start_server(old)
    assert zk_ensemble.servers[old].mode() == "follower"
    assert zk_ensemble.wait_for_quorum(30) == new


def test_ensemble_follower_stop_and_start_rejoins_as_follower(zk_ensemble, zk_chroot):
    leader = zk_ensemble.wait_for_quorum(30)
    follower = next(i for i in range(3) if i != leader)
    zk_ensemble.stop_server(follower)
    try:
        assert not zk_ensemble.servers[follower].is_running()
        assert zk_ensemble.leader() == leader  # 2 of 3 keep the quorum
        client = started_client(zk_ensemble.connect_string)
        client.create(f"{zk_chroot}/while-down", b"w", makepath=True)
        closed(client)
    finally:
        zk_ensemble.start_server(follower)
    assert zk_ensemble.servers[follower].mode() == "follower"
    direct = started_client(zk_ensemble.servers[follower].connect_string)
    try:
        assert direct.get(f"{zk_chroot}/while-down")[0] == b"w"
    finally:
        closed(direct)
    assert zk_ensemble.wait_for_quorum(30) == leader


# -- errors -------------------------------------------------------------------------------

def test_missing_java_is_a_clear_error(monkeypatch):
    server = ZooKeeperServer(java="/nonexistent/bin/java")
    try:
        with pytest.raises(ZooKeeperLaunchError, match="Java not found.*/nonexistent/bin/java"):
            server.start()
        assert not server.is_running()
    finally:
        server.stop()
    monkeypatch.setenv("JAVA_HOME", "/nonexistent-jdk")
    monkeypatch.setenv("PATH", "/nonexistent-bin")
    with pytest.raises(ZooKeeperLaunchError) as err:
        find_java()
    assert "JAVA_HOME" in str(err.value) and "`java` on PATH" in str(err.value)


def test_missing_jars_are_a_clear_error(monkeypatch):
    server = ZooKeeperServer(classpath="/nonexistent/zookeeper.jar")
    try:
        with pytest.raises(ZooKeeperLaunchError, match="/nonexistent/zookeeper.jar") as err:
            server.start()
        assert "install the Debian package `zookeeper` (make install does this)" in str(err.value)
        assert not server.is_running()
    finally:
        server.stop()
    monkeypatch.setenv("RAYKA_ZK_CLASSPATH", "/nonexistent/zk-env.jar")
    with pytest.raises(ZooKeeperLaunchError, match="jars missing: /nonexistent/zk-env.jar"):
        zookeeper_classpath()


def test_process_exit_during_start_reports_log_tail():
    server = ZooKeeperServer(classpath="/usr/share/java/slf4j-api.jar")  # no ZooKeeper in it
    try:
        with pytest.raises(ZooKeeperLaunchError, match="exited with code") as err:
            server.start()
        assert "QuorumPeerMain" in str(err.value)  # JVM's "could not find main class" line
        assert server.connect_string in str(err.value)
        assert not server.is_running()
    finally:
        server.stop()
    assert not server.data_dir.exists()


def test_start_timeout_reports_address_and_leaves_nothing_running():
    server = ZooKeeperServer(start_timeout_s=0.0)
    try:
        with pytest.raises(ZooKeeperLaunchError, match="did not start serving within") as err:
            server.start()
        assert server.connect_string in str(err.value) and "last lines of" in str(err.value)
        assert not server.is_running() and server.pid is None
        assert port_refuses(server.port)
    finally:
        server.stop()


def test_atexit_stops_a_forgotten_server():
    import subprocess
    import sys
    code = ("from controller.zookeeper.server import ZooKeeperServer\n"
            "s = ZooKeeperServer().start()\n"
            "print(s.pid, s.port, s.data_dir, flush=True)\n")  # exits without stop()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.returncode == 0, out.stderr
    pid, port, data_dir = out.stdout.split()
    assert not pid_alive(int(pid))
    assert port_refuses(int(port))
    assert not os.path.exists(data_dir)


@pytest.mark.parametrize("die_with_parent", [True, False])
def test_a_sigkilled_starter_takes_its_server_along_unless_told_otherwise(die_with_parent):
    """atexit cannot run after SIGKILL: the deathsig is what keeps a killed test run or driver
    from leaving ZooKeeper JVMs behind; a daemon's server (die_with_parent=False) survives."""
    import subprocess
    import sys
    code = ("import time\nfrom controller.zookeeper.server import ZooKeeperServer\n"
            f"s = ZooKeeperServer(die_with_parent={die_with_parent}).start()\n"
            "print(s.pid, s.port, flush=True)\ntime.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            cwd=os.path.dirname(os.path.dirname(__file__)))
    pid = port = None
    try:
        pid, port = map(int, proc.stdout.readline().split())
        assert pid_alive(pid)
        proc.kill()
        proc.wait(10)
        if die_with_parent:
            # the JVM's last threads close its port just after the main one turns zombie
            wait_until(lambda: not pid_alive(pid) and port_refuses(port), 10,
                       "the orphaned ZooKeeper JVM gone and its port closed")
        else:
            assert pid_alive(pid) and not port_refuses(port)
    finally:
        proc.kill()
        if pid is not None and pid_alive(pid):
            os.kill(pid, signal.SIGKILL)    # by pid: the server this test started
