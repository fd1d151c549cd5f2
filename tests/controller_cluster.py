"""A controller test cluster on the REAL ZooKeeper: controllers with their own sessions,
brokers as plain ZooKeeper sessions (registrations only), an answering channel in place of
the broker actors, and an admin store. Used by the controller integration tests."""

from __future__ import annotations

import threading
import time

import pytest

from controller.controller import Controller, ControllerConfig
from controller.layout import BrokerRegistration
from controller.zookeeper.store import ZkStore
from tests.fakes import AnsweringChannel
from tests.zk_helpers import SESSION_S, wait_until


class Cluster:
    def __init__(self, zk_server, name):
        self.zk, self.name = zk_server, name
        self.stores, self.controllers, self.brokers = [], {}, {}
        self.admin = self.store()
        self.channel = AnsweringChannel()
        self.channel.controllers = self.controllers

    def store(self):
        s = ZkStore(self.zk.connect_string, self.name, session_timeout_s=SESSION_S).start()
        self.stores.append(s)
        return s

    def controller(self, cid, config=ControllerConfig(), store=None):
        c = Controller(cid, store or self.store(), self.channel,
                       lambda: int(time.monotonic() * 1000), config)
        self.controllers[cid] = c.start()
        return c

    def broker(self, bid):
        s = self.store()
        s.register_broker(BrokerRegistration(bid, "127.0.0.1", 9000 + bid, node_id=f"n{bid}",
                                             actor_name=f"broker-{bid}"))
        self.brokers[bid] = s
        return s

    def kill_broker(self, bid):
        self.brokers.pop(bid).close()

    def active(self, timeout_s=10):
        def find():
            for c in self.controllers.values():
                c.loop.idle(1)
            got = [c for c in self.controllers.values() if c.is_active]
            return got[0] if len(got) == 1 else None
        return wait_until(find, timeout_s, "exactly one active controller")

    def settled(self, controller, predicate, what, timeout_s=10):
        def check():
            # Between events only: one event may write several znodes, and an event queued
            # by a watch may start after idle() returned; the predicate counts only when no
            # event ran while it read.
            if not controller.loop.idle(1):
                return False
            before = controller.loop.processed
            got = predicate()
            return got if got and controller.loop.idle(1) \
                and controller.loop.processed == before else None
        return wait_until(check, timeout_s, what)

    def ask(self, controller, event_cls, *args, timeout_s=10, **kw):
        """Put an event carrying a reply callback; wait for and return the reply."""
        answers, done = {}, threading.Event()
        controller.loop.put(event_cls(*args, **kw, reply=lambda r: (answers.update(r=r), done.set())))
        assert done.wait(timeout_s), f"no reply to {event_cls.__name__}"
        return answers["r"]

    def close(self):
        for c in self.controllers.values():
            c.shutdown()
        for s in self.stores:
            s.close()


@pytest.fixture
def cluster(zk_server, zk_chroot):
    c = Cluster(zk_server, zk_chroot.strip("/"))
    yield c
    c.close()


def state(store, topic, p):
    return store.get_partition_state(topic, p)
