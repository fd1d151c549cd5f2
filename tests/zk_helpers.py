"""Helpers and fixtures shared by the tests that run against the real ZooKeeper store."""
from __future__ import annotations

import json
import queue
import time

import pytest

from controller.zookeeper import client as zk_client
from controller.layout import LeaderIsrAndControllerEpoch
from controller.zookeeper.store import ZkStore
from rayka.client.admin import wait_for
from replicas.errors import RequestTimedOut

SESSION_S = 4.0


def wait_until(predicate, timeout_s, what):
    """rayka.client.admin.wait_for, failing the test (not raising RequestTimedOut) on timeout."""
    try:
        return wait_for(predicate, timeout_s, what)
    except RequestTimedOut as exc:
        pytest.fail(str(exc))


class Inbox:
    """Collects watch callback values; ``expect`` waits for a value satisfying a predicate."""

    def __init__(self):
        self.q: queue.Queue = queue.Queue()
        self.seen: list = []

    def __call__(self, value):
        self.q.put(value)

    def expect(self, want, timeout_s=10.0):
        pred = want if callable(want) else (lambda v: v == want)
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"no callback value matching {want!r}; saw {self.seen!r}")
            try:
                v = self.q.get(timeout=remaining)
            except queue.Empty:
                continue
            self.seen.append(v)
            if pred(v):
                return v


@pytest.fixture
def cluster(zk_chroot):
    return zk_chroot.lstrip("/")


@pytest.fixture
def stores(zk_server, cluster):
    """Factory of started ZkStores (own kazoo sessions) on one cluster; all closed after."""
    made = []

    def make(**kw):
        kw.setdefault("session_timeout_s", SESSION_S)
        s = ZkStore(zk_server.connect_string, kw.pop("cluster", cluster), **kw).start()
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def raw(zk_client, store, path):
    data, _ = zk_client.get(store.root + path)
    return data


def raw_json(zk_client, store, path):
    return json.loads(raw(zk_client, store, path))


def exists(zk_client, store, path):
    return zk_client.exists(store.root + path) is not None


def expire_session(zk_server, store):
    """A REAL server-side expiry: a second client attaches to the session and closes it."""
    zk_client.expire_session(zk_server.connect_string, *store.client.client_id, timeout_s=15)


def lisr(leader, epoch, isr, ce=1):
    return LeaderIsrAndControllerEpoch(leader, epoch, tuple(isr), ce)
