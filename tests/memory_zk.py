"""An in-memory ZooKeeper ensemble and store for seeded, deterministic controller simulations.

``MemoryZk`` is the ensemble (one shared znode tree, one zxid counter, one FIFO of pending
notifications); ``MemoryZkStore(zk, cluster)`` has the public API of
``controller.zookeeper.store.ZkStore`` and ``fenced(election)`` gives a ``MemoryFencedWriter``
with the API of ``FencedWriter`` (both in ``tests/memory_zk_admin.py``: the store's admin
half and the fenced writer, with their own rules).
``SimLoop`` replaces the controller's threaded ``EventLoop``; ``settle`` alternates them.

Rules:
- No threads, no sleeps, no kazoo: only ``controller.layout`` (paths, JSON codecs, so
  znode bytes are identical to the real store's) and ``controller.store_api`` (exceptions,
  ``ControllerElection``). Nodes are keyed by absolute path (``/rayka/<cluster>/...``);
  every path a caller sees or an outcome error names is relative to the store's chroot.
- ZooKeeper semantics: create gives version 0 and czxid = mzxid = the new zxid; set bumps
  the version; conditional ops compare versions exactly (-1 = any); create needs the
  parent (NoNode), delete needs no children (NotEmpty); sequential names are the prefix
  plus the parent's cversion, 10 digits. A transaction (``MemoryZk.multi``) is atomic and
  takes ONE zxid; a failed one is rolled back and reports the failing op's index.
- Watches and state changes are NEVER run inside a write: they are queued and run, in
  FIFO order, only by ``MemoryZk.deliver()``. A watch is one-shot like ZooKeeper's: while
  a notification is pending more changes coalesce into it; on delivery it reads the
  CURRENT value and calls back only if it changed since the last call (data: mzxid or
  absence; children: parent incarnation and cversion, so a child deleted and re-created
  under the same name still fires, as a real one-shot watch would), so every watch fires once on
  registration and then on changes, always with the full current value. Children
  watches survive deletion and re-creation of their parent (the real store's
  ``_children_watch`` does so; a bare kazoo ChildrenWatch would stop) and report an empty
  value while it is absent.
- Sessions: ``expire(s)`` deletes the session's ephemerals (one transaction), then queues
  "LOST" for its state listeners; its calls raise ZkUnavailable and its watches are
  silent until ``reconnect(s)`` gives it a NEW session id, queues "CONNECTED" and re-reads
  its watches (each fires if its value changed meanwhile, as kazoo's recipes do).
  ``close(s)`` deletes its ephemerals and every later call raises ZkUnavailable. ``s`` is
  a store, a session handle or a session id.
- Faults: ``fail_next_writes(s, n)``: the next n WRITE calls of that session raise
  ZkUnavailable and are NOT applied. Write calls are: register_broker, create_topic,
  request_topic_deletion, set_topic_config, request_reassignment,
  request_preferred_election, create_isr_change_notification, propagate_log_dir_event,
  elect_controller, delete_controller_if_ours/resign and every MemoryFencedWriter method
  except verify.
- register_broker never waits: a node of this session is accepted (its czxid returned),
  one of another session raises BrokerIdInUse at once (the other session is necessarily
  live: an expired or closed session's ephemerals are already gone).
- Timestamps written by the store (/controller, registrations without one) come from
  ``MemoryZk.clock_ms`` (default: a fixed base + the zxid), so a seeded run is
  reproducible byte for byte. Session ids count up from ``first_session_id``.
- Callback exceptions are logged and kept in ``MemoryZk.callback_errors``, never raised.
"""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from controller.events import Expire, Shutdown
from controller.store_api import (BadVersion, BrokerIdInUse, ControllerElection,
                                  ControllerMovedError, NodeExists, NoNode, NotEmpty,
                                  ZkStoreError, ZkUnavailable)
from controller.layout import (BROKER_IDS, CONTROLLER, CONTROLLER_EPOCH, PERSISTENT_PATHS,
                               BrokerRegistration, broker_path, cluster_root,
                               decode_controller_id, decode_epoch, encode_controller,
                               encode_epoch)
from tests.memory_zk_admin import AdminMixin, MemoryFencedWriter

__all__ = ["MemoryZk", "MemoryZkStore", "MemoryFencedWriter", "MemoryWatch", "SimLoop",
           "settle", "Op", "TxnFailed"]

log = logging.getLogger(__name__)
_UNSEEN = object()


@dataclass
class _Node:
    data: bytes
    czxid: int
    mzxid: int
    version: int = 0
    cversion: int = 0
    owner: int | None = None            # ephemeral owner session id
    children: set[str] = field(default_factory=set)

    def copy(self) -> "_Node":
        return replace(self, children=set(self.children))


@dataclass(frozen=True)
class Op:
    kind: str                           # "create" | "set" | "delete" | "check"
    path: str                           # relative to the transaction's root
    data: bytes = b""
    version: int = -1
    ephemeral: bool = False
    sequence: bool = False


class TxnFailed(Exception):
    """A transaction failed at op ``index`` with ``error`` (nothing of it was applied)."""

    def __init__(self, index: int, error: ZkStoreError):
        super().__init__(index, error)
        self.index, self.error = index, error


class _Session:
    """A client handle (kazoo's KazooClient): its session id changes on reconnect."""

    def __init__(self, zk: "MemoryZk"):
        self.zk, self.session_id, self.state = zk, None, "NEW"
        self.listeners: dict[Callable, None] = {}
        self.watches: list[MemoryWatch] = []
        self.fail_writes = 0

    @property
    def connected(self) -> bool:
        return self.state == "CONNECTED"


class MemoryWatch:
    """Handle of one registered watch; ``cancel()`` stops forwarding (idempotent)."""

    def __init__(self, session: _Session, abs_path: str, path: str, kind: str, convert, callback):
        self.path, self.kind = path, kind
        self._session, self._abs, self._convert, self._callback = session, abs_path, convert, callback
        self._last, self._pending, self.cancelled = _UNSEEN, False, False

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self._session.watches.remove(self)
            self._session.zk._watches[self._abs].remove(self)

    def __repr__(self):
        return f"<MemoryWatch {self.kind} {self.path}{' cancelled' if self.cancelled else ''}>"


class MemoryZk:
    """The ensemble: the znode tree, sessions and the notification FIFO (module docstring)."""

    def __init__(self, clock_ms: Callable[[], int] | None = None, first_session_id: int = 0x1000):
        self.nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0)}
        self.zxid = 0
        self.pending: collections.deque = collections.deque()
        self.callback_errors: list[tuple[object, Exception]] = []
        self.clock_ms = clock_ms or (lambda: 1_700_000_000_000 + self.zxid)
        self._next_session = first_session_id
        self._sessions: list[_Session] = []
        self._watches: dict[str, list[MemoryWatch]] = collections.defaultdict(list)

    # -- sessions ------------------------------------------------------------------------------
    def _session(self, s) -> _Session:
        if isinstance(s, _Session):
            return s
        if isinstance(s, int):
            for sess in self._sessions:
                if sess.session_id == s:
                    return sess
            raise KeyError(f"no session 0x{s:x}")
        return s._client   # a MemoryZkStore

    def _open(self, sess: _Session) -> None:
        if sess.state == "CLOSED":
            raise ZkUnavailable("session closed")
        if sess not in self._sessions:
            self._sessions.append(sess)
        sess.session_id, self._next_session = self._next_session, self._next_session + 1
        sess.state = "CONNECTED"
        self._queue_state(sess, "CONNECTED")
        for w in list(sess.watches):
            self._queue(w)

    def _drop_ephemerals(self, session_id: int) -> None:
        mine = sorted((n.czxid, p) for p, n in self.nodes.items() if n.owner == session_id)
        if mine:
            self.multi(None, "", [Op("delete", p) for _, p in mine])

    def expire(self, session) -> None:
        sess = self._session(session)
        if not sess.connected:
            raise ValueError(f"session is {sess.state}, cannot expire")
        self._drop_ephemerals(sess.session_id)
        sess.state = "LOST"
        self._queue_state(sess, "LOST")

    def reconnect(self, session) -> int:
        """After ``expire``: a new session id, "CONNECTED", watches re-read. Returns the id."""
        sess = self._session(session)
        if sess.state != "LOST":
            raise ValueError(f"session is {sess.state}, not LOST")
        self._open(sess)
        return sess.session_id

    def close(self, session) -> None:
        sess = self._session(session)
        if sess.state == "CONNECTED":
            self._drop_ephemerals(sess.session_id)
        sess.state = "CLOSED"

    def fail_next_writes(self, session, n: int) -> None:
        self._session(session).fail_writes = int(n)

    # -- notifications ---------------------------------------------------------------------------
    def _queue_state(self, sess: _Session, state: str) -> None:
        """For the listeners registered NOW (and still registered at delivery)."""
        if sess.listeners:
            self.pending.append(("state", sess, (state, tuple(sess.listeners))))

    def _queue(self, w: MemoryWatch) -> None:
        if not w._pending and not w.cancelled and w._session.connected:
            w._pending = True
            self.pending.append(("watch", w, None))

    def _trigger(self, abs_path: str, child_change: bool) -> None:
        for w in self._watches.get(abs_path, ()):
            if not (child_change and w.kind == "data"):
                self._queue(w)

    def _call(self, what, callback, value) -> None:
        try:
            callback(value)
        except Exception as exc:  # like the real store: logged, never propagated
            log.exception("callback %r for %s failed", callback, what)
            self.callback_errors.append((what, exc))

    def deliver(self, limit: int | None = None) -> int:
        """Run queued watch callbacks and state listeners in FIFO order, including those
        queued meanwhile (up to ``limit`` callbacks); return how many callbacks ran."""
        ran = 0
        while self.pending and (limit is None or ran < limit):
            kind, target, arg = self.pending.popleft()
            if kind == "state":
                state, listeners = arg
                for cb in listeners:
                    if cb in target.listeners:
                        ran += 1
                        self._call(state, cb, state)
                continue
            w = target
            w._pending = False
            if w.cancelled or not w._session.connected:
                continue
            node = self.nodes.get(w._abs)
            try:
                if w.kind == "data":
                    obs = None if node is None else node.mzxid
                    value = w._convert(None if node is None else node.data)
                else:
                    names = [] if node is None else sorted(node.children)
                    obs = None if node is None else (node.czxid, node.cversion)
                    value = w._convert(names)
            except Exception as exc:
                log.exception("cannot parse %s", w.path)
                self.callback_errors.append((w, exc))
                continue
            if obs != w._last:
                w._last = obs
                ran += 1
                self._call(w, w._callback, value)
        return ran

    def watch(self, sess: _Session, root: str, path: str, kind: str, convert, callback
              ) -> MemoryWatch:
        w = MemoryWatch(sess, root + path, path, kind, convert, callback)
        sess.watches.append(w)
        self._watches[w._abs].append(w)
        self._queue(w)
        return w

    # -- the tree --------------------------------------------------------------------------------
    def multi(self, sess: _Session | None, root: str, ops: Sequence[Op]) -> list:
        """Apply ``ops`` atomically under one zxid; per op: created path (relative),
        new version (set), True (delete/check). On failure roll back, raise TxnFailed."""
        zxid, undo, touched, results = self.zxid + 1, [], [], []
        for i, op in enumerate(ops):
            try:
                results.append(self._apply(sess, root, op, zxid, undo, touched))
            except ZkStoreError as e:
                for p, old in reversed(undo):
                    if old is None:
                        self.nodes.pop(p, None)
                    else:
                        self.nodes[p] = old
                raise TxnFailed(i, e) from None
        if undo:
            self.zxid = zxid
        for p, child in touched:
            self._trigger(p, child)
        return results

    def _apply(self, sess, root, op: Op, zxid, undo, touched):
        p, nodes = root + op.path, self.nodes
        parent_path, _, name = p.rpartition("/")
        parent_path = parent_path or "/"
        node = nodes.get(p)
        if op.kind == "create":
            parent = nodes.get(parent_path)
            if parent is None:
                raise NoNode(op.path)
            if op.sequence:
                p, name = f"{p}{parent.cversion:010d}", f"{name}{parent.cversion:010d}"
            if p in nodes:
                raise NodeExists(op.path)
            undo += [(p, None), (parent_path, parent.copy())]
            owner = sess.session_id if op.ephemeral else None
            nodes[p] = _Node(bytes(op.data), zxid, zxid, owner=owner)
            parent.children.add(name)
            parent.cversion += 1
            touched += [(p, False), (parent_path, True)]
            return p[len(root):]
        if node is None:
            raise NoNode(op.path)
        if op.version != -1 and op.version != node.version:
            raise BadVersion(op.path)
        if op.kind == "check":
            return True
        undo.append((p, node.copy()))
        if op.kind == "set":
            node.data, node.version, node.mzxid = bytes(op.data), node.version + 1, zxid
            touched.append((p, False))
            return node.version
        if op.kind != "delete":
            raise ValueError(op.kind)
        if node.children:
            raise NotEmpty(op.path)
        parent = nodes[parent_path]
        undo.append((parent_path, parent.copy()))
        del nodes[p]
        parent.children.discard(name)
        parent.cversion += 1
        touched += [(p, False), (parent_path, True)]
        return True

    def ensure_path(self, sess, abs_path: str) -> None:
        parts = [s for s in abs_path.split("/") if s]
        for i in range(1, len(parts) + 1):
            p = "/" + "/".join(parts[:i])
            if p not in self.nodes:
                self.multi(sess, "", [Op("create", p)])

    def dump(self, prefix: str = "/") -> dict[str, bytes]:
        """{absolute path: data} of every node under ``prefix`` (for tests)."""
        return {p: n.data for p, n in sorted(self.nodes.items()) if p.startswith(prefix)}


class MemoryZkStore(AdminMixin):
    """``ZkStore``'s public API over a ``MemoryZk`` (see the module docstring)."""

    def __init__(self, zk: MemoryZk, cluster: str = "default", *, root: str | None = None):
        self.zk, self.cluster = zk, cluster
        self.root = root.rstrip("/") if root else cluster_root(cluster)
        self.hosts = "memory"
        self._client = _Session(zk)
        self._closed = False

    # -- lifecycle and session -------------------------------------------------------------------
    def start(self) -> "MemoryZkStore":
        if self._client.state in ("NEW", "CLOSED"):
            self.zk._open(self._client)
        self._check()
        self.zk.ensure_path(self._client, self.root)
        for p in PERSISTENT_PATHS:
            self.zk.ensure_path(self._client, self.root + p)
        return self

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for w in list(self._client.watches):
            w.cancel()
        self._client.listeners.clear()
        self.zk.close(self._client)

    def __enter__(self) -> "MemoryZkStore":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def client(self) -> _Session:
        return self._client

    @property
    def session_id(self) -> int | None:
        return self._client.session_id if self._client.connected else None

    @property
    def connected(self) -> bool:
        return self._client.connected

    def add_state_listener(self, callback: Callable[[str], None]) -> None:
        self._client.listeners[callback] = None

    def remove_state_listener(self, callback: Callable[[str], None]) -> None:
        self._client.listeners.pop(callback, None)

    # -- plumbing ----------------------------------------------------------------------------
    def _check(self, write: bool = False) -> None:
        c = self._client
        if not c.connected:
            raise ZkUnavailable(f"ZooKeeper unavailable: session {c.state} ({self.root})")
        if write and c.fail_writes > 0:
            c.fail_writes -= 1
            raise ZkUnavailable("ZooKeeper unavailable: injected connection loss (not applied)")

    def _node(self, path: str) -> _Node | None:
        return self.zk.nodes.get(self.root + path)

    def _children(self, path: str) -> list[str] | None:
        node = self._node(path)
        return None if node is None else sorted(node.children)

    def _txn(self, ops: Sequence[Op]) -> list:
        return self.zk.multi(self._client, self.root, ops)

    def _do(self, ops: Sequence[Op]) -> list:
        """A transaction whose failure is raised as its outcome error (relative path)."""
        try:
            return self._txn(ops)
        except TxnFailed as f:
            raise f.error from None

    def _try(self, ops: Sequence[Op]):
        """A transaction's last result, or its outcome error as a VALUE."""
        try:
            return self._txn(ops)[-1]
        except TxnFailed as f:
            return f.error

    _op = Op

    def _watch(self, path: str, kind: str, convert, callback) -> MemoryWatch:
        self._check()
        return self.zk.watch(self._client, self.root, path, kind, convert, callback)

    def _data_watch(self, path: str, convert, callback) -> MemoryWatch:
        return self._watch(path, "data", convert, callback)

    def _children_watch(self, path: str, convert, callback) -> MemoryWatch:
        return self._watch(path, "children", convert, callback)

    # -- election ----------------------------------------------------------------------------
    def get_controller_epoch(self) -> tuple[int, int]:
        self._check()
        node = self._node(CONTROLLER_EPOCH)
        return (0, -1) if node is None else (decode_epoch(node.data), node.version)

    def get_controller(self) -> int | None:
        self._check()
        node = self._node(CONTROLLER)
        return None if node is None else decode_controller_id(node.data)

    def elect_controller(self, controller_id: int) -> ControllerElection:
        self._check(write=True)
        if self._node(CONTROLLER_EPOCH) is None:
            self._txn([Op("create", CONTROLLER_EPOCH, encode_epoch(0))])
        epoch = self._node(CONTROLLER_EPOCH)
        new_epoch = decode_epoch(epoch.data) + 1
        try:
            res = self._txn([Op("create", CONTROLLER, encode_controller(
                controller_id, self.zk.clock_ms()), ephemeral=True),
                Op("set", CONTROLLER_EPOCH, encode_epoch(new_epoch), version=epoch.version)])
            return ControllerElection(new_epoch, res[1], controller_id, self.session_id)
        except TxnFailed:
            return self._check_controller_and_epoch(controller_id, new_epoch)

    def _check_controller_and_epoch(self, controller_id: int, new_epoch: int) -> ControllerElection:
        ctl, epoch_node = self._node(CONTROLLER), self._node(CONTROLLER_EPOCH)
        current = None if ctl is None else decode_controller_id(ctl.data)
        epoch = decode_epoch(epoch_node.data)
        if current == controller_id and ctl.owner == self.session_id and epoch == new_epoch:
            return ControllerElection(new_epoch, epoch_node.version, controller_id, self.session_id)
        raise ControllerMovedError(
            f"controller moved: /controller names {current} (epoch {epoch}); "
            f"candidate {controller_id} wanted epoch {new_epoch}", current)

    def watch_controller(self, callback: Callable[[int | None], None]) -> MemoryWatch:
        return self._data_watch(CONTROLLER, lambda d: None if d is None else
                                decode_controller_id(d), callback)

    def delete_controller_if_ours(self) -> bool:
        self._check(write=True)
        node = self._node(CONTROLLER)
        if node is None or node.owner != self.session_id:
            return False
        self._txn([Op("delete", CONTROLLER, version=node.version)])
        return True

    resign = delete_controller_if_ours

    def fenced(self, election: ControllerElection) -> MemoryFencedWriter:
        return MemoryFencedWriter(self, election)

    # -- brokers -----------------------------------------------------------------------------
    def register_broker(self, reg: BrokerRegistration, wait_s: float = 30.0) -> int:
        """Create the ephemeral /brokers/ids/<id>; return its czxid (the broker epoch). A node
        of this session is accepted; one of another (necessarily live) session raises
        BrokerIdInUse at once (an expired session's ephemerals are already gone)."""
        self._check(write=True)
        if not reg.timestamp_ms:
            reg = replace(reg, timestamp_ms=self.zk.clock_ms())
        node = self._node(broker_path(reg.id))
        if node is None:
            self._do([Op("create", broker_path(reg.id), reg.to_json(), ephemeral=True)])
            return self._node(broker_path(reg.id)).czxid
        if node.owner == self.session_id:
            return node.czxid
        raise BrokerIdInUse(f"/brokers/ids/{reg.id} is still held by session "
                            f"0x{node.owner or 0:x} (ours: 0x{self.session_id or 0:x})")

    def get_broker(self, broker_id: int) -> BrokerRegistration | None:
        self._check()
        node = self._node(broker_path(broker_id))
        return None if node is None else BrokerRegistration.from_json(broker_id, node.data,
                                                                      node.czxid)

    def get_broker_ids(self) -> set[int]:
        self._check()
        return {int(c) for c in (self._children(BROKER_IDS) or []) if c.isdigit()}

    def get_brokers(self) -> dict[int, BrokerRegistration]:
        out = {}
        for b in sorted(self.get_broker_ids()):
            node = self._node(broker_path(b))
            out[b] = BrokerRegistration.from_json(b, node.data, node.czxid)
        return out

    def watch_broker_ids(self, callback: Callable[[set[int]], None]) -> MemoryWatch:
        return self._children_watch(BROKER_IDS, lambda cs: {int(c) for c in cs if c.isdigit()},
                                    callback)


# -- the controller's event loop, without a thread ----------------------------------------------
class SimLoop:
    """``controller.event_loop.EventLoop``'s API without a thread: ``run()`` processes the
    queue until empty (returns how many); ``idle()`` is always True; a processor exception
    is logged and kept in ``errors``; after Shutdown the queue is dropped."""

    def __init__(self, process: Callable[[object], None], name: str = "sim-loop"):
        self._process, self.name = process, name
        self._queue: collections.deque = collections.deque()
        self._stopped = False
        self.processed = 0
        self.errors: list[tuple[object, Exception]] = []

    def start(self) -> "SimLoop":
        return self

    def put(self, event) -> None:
        if not self._stopped:
            self._queue.append(event)

    def expire(self) -> None:
        self._queue.clear()
        self._queue.append(Expire())

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self.put(Shutdown())
        self.run()

    def idle(self, timeout_s: float = 10.0) -> bool:
        return True

    def queue_size(self) -> int:
        return len(self._queue)

    def run(self, limit: int | None = None) -> int:
        n = 0
        while self._queue and (limit is None or n < limit):
            event = self._queue.popleft()
            try:
                self._process(event)
            except Exception as exc:
                log.exception("%s: error processing %s", self.name, type(event).__name__)
                self.errors.append((event, exc))
            self.processed += 1
            n += 1
            if isinstance(event, Shutdown):
                self._stopped = True
                self._queue.clear()
        return n


def registered_broker(zk: MemoryZk, cluster: str, b: int) -> "MemoryZkStore":
    """Broker `b`'s own session, registered as the unit tests' brokers are (127.0.0.1,
    port 9000 + b, Ray node n<b>, actor broker-<b>)."""
    store = MemoryZkStore(zk, cluster).start()
    store.register_broker(BrokerRegistration(b, "127.0.0.1", 9000 + b, node_id=f"n{b}",
                                             actor_name=f"broker-{b}"))
    return store


def settle(zk: MemoryZk, *loops: SimLoop, max_rounds: int = 10_000) -> int:
    """Alternate ``zk.deliver()`` and each loop's ``run()`` until all are quiet; return the
    number of callbacks + events processed. RuntimeError if still busy after max_rounds."""
    total = 0
    for _ in range(max_rounds):
        n = zk.deliver() + sum(loop.run() for loop in loops)
        if n == 0 and not zk.pending:
            return total
        total += n
    raise RuntimeError(f"not quiet after {max_rounds} rounds")
