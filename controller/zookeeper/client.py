"""The ZooKeeper session under the store: connection, reads, watches and the store's errors.

Part of the ZooKeeper store (``controller/zookeeper/store.py`` is its facade; see there for the
module map). Only ``controller/zookeeper/`` imports kazoo (tests/test_import_boundaries.py);
the pure half, paths + records + JSON codecs, is ``controller/layout.py``. Everything
above the store speaks plain Python types and the store's own exceptions (defined here,
re-exported by ``controller.zookeeper.store``); no kazoo type leaks out.

Rules:
- Synchronous and thin: each public method is a few ZooKeeper round trips. Bulk reads of
  small znodes (partition states, broker registrations, offsets, children lists) use
  ZooKeeper's multiRead (server >= 3.6; kazoo 2.11 has no API for it, so ``_MultiRead`` is
  sent through kazoo's request queue), 500 reads per request, pipelined; other bulk reads
  are pipelined ``get_async`` calls. Per request kazoo costs ~150 us of thread hand-off, so
  10,000 single gets take ~1.5 s here and 20 multiReads ~0.2 s. If the server rejects
  multiRead, the session falls back to pipelined gets for good.
- Everything lives under the chroot ``/rayka/<cluster>`` (created on ``start()`` together
  with Kafka's persistent parents ``/brokers/ids``, ``/brokers/topics``, ...). Every path a
  caller sees is relative to it (``_abs`` adds the chroot).
- Watches only FORWARD data (parsed, as plain values) to the caller's callback, from
  kazoo's threads: callbacks must not block (the controller enqueues an event). Each
  callback is called once at registration with the current value, then on changes;
  changes may coalesce, the value is always the full current one. ``ZkWatch.cancel()``
  stops forwarding. Session state changes are forwarded as the strings "CONNECTED",
  "SUSPENDED", "LOST". A failing callback is logged, never propagated into kazoo.
- Connection problems (connection loss, closed/expired session, start timeout) raise
  ``ZkUnavailable`` (public methods are wrapped in ``zk_call``); after one during a write,
  the write's outcome is unknown. A read (wrapped in ``zk_read``) that loses its connection
  is sent again once kazoo has reconnected in the same session, as Kafka's ZooKeeperClient
  resends on CONNECTIONLOSS: a read has no outcome to lose. It waits at most the session
  timeout for the reconnection (past it the server has expired the session), then raises
  ``ZkUnavailable``; an expired or closed session raises at once. So does ``start()``'s
  creation of the chroot and its parents (``ensure_path``: sent again, it finds what the
  lost answer created and changes nothing), so a connection dropped by a busy machine
  while an actor starts does not fail that actor's creation. A call made while kazoo
  reconnects (kazoo queues it until a connection comes) waits for that connection at most
  the session timeout, then raises ``ZkUnavailable``: a ZooKeeper that stays away never
  hangs a caller.
- The store's errors are picklable: all their state is in ``args``.
- Authentication (``auth="user:password"``, ZooKeeper's digest scheme; Kafka's
  ``zookeeper.set.acl``): the session authenticates, and every znode it creates gets
  ``CREATOR_ALL`` (rayka's digest identity may do anything) plus world READ, so a client
  without the credentials can read the cluster but not change it. ``/rayka`` itself stays
  open (other clusters, with other credentials, share the ensemble); a cluster's chroot, once
  secured, is not reopened. Sensitive znodes (the SCRAM credentials, written with
  ``sensitive=True``) get ``private_acl``: no world READ, as Kafka's sensitive paths.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
from collections import namedtuple
from typing import Callable, Self, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import (EXCEPTIONS, BadVersionError, ConnectionClosedError, ConnectionLoss,
                              NodeExistsError, NoNodeError, NotEmptyError,
                              OperationTimeoutError, SessionExpiredError)
from kazoo.handlers.threading import AsyncResult, KazooTimeoutError, SequentialThreadingHandler
from kazoo.protocol.paths import _prefix_root
from kazoo.protocol.serialization import (GetChildren, GetData, MultiHeader, int_struct,
                                          multiheader_struct, read_buffer, read_string,
                                          stat_struct)
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.security import OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, make_digest_acl

from controller.layout import PERSISTENT_PATHS, ROOT_PREFIX, cluster_root

__all__ = [
    "ZkSession", "ZkWatch", "zk_read",
    "ZkStoreError", "ZkUnavailable", "ControllerMovedError", "NodeExists", "NoNode",
    "BadVersion", "NotEmpty", "BrokerIdInUse", "AdminOperationInProgress",
    "MAX_READS_PER_MULTI_READ", "expire_session", "zk_call", "store_error",
]

# One logger for the whole store: a record reads as the store's, whichever part logged it.
log = logging.getLogger("controller.zookeeper.store")

MAX_READS_PER_MULTI_READ = 500    # small znodes only (states, registrations, offsets)


# -- errors ---------------------------------------------------------------------------------
# The store's outcome and error classes are defined once, in the kazoo-free
# controller.store_api, so the pure controller can recognise them.
from controller.store_api import (  # noqa: E402
    AdminOperationInProgress, BadVersion, BrokerIdInUse, ControllerMovedError, NodeExists,
    NoNode, NotEmpty, ZkStoreError, ZkUnavailable)


_OUTCOMES = {NodeExistsError: NodeExists, NoNodeError: NoNode, BadVersionError: BadVersion,
             NotEmptyError: NotEmpty}
_UNAVAILABLE = (ConnectionLoss, SessionExpiredError, ConnectionClosedError, KazooTimeoutError,
                OperationTimeoutError)


def store_error(exc: Exception, path: str) -> ZkStoreError:
    """The store's outcome for kazoo's failure `exc` of an op on `path`."""
    for kz, ours in _OUTCOMES.items():
        if isinstance(exc, kz):
            return ours(path)
    return ZkStoreError(f"{type(exc).__name__} at {path}")


def _unavailable(session, method, e: Exception) -> ZkUnavailable:
    return ZkUnavailable(f"ZooKeeper at {session.hosts} unavailable during "
                         f"{method.__name__}: {type(e).__name__}: {e}")


_store_call = threading.local()     # .depth > 0 on a thread inside a store method


def zk_call(method):
    """Decorator of every public store method: kazoo's connection/session errors become
    ZkUnavailable, and its waits are bounded (``_BoundedResult``)."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        _store_call.depth = depth = getattr(_store_call, "depth", 0) + 1
        try:
            return method(self, *args, **kwargs)
        except _UNAVAILABLE as e:
            raise _unavailable(self, method, e) from e
        finally:
            _store_call.depth = depth - 1
    return wrapper


_RESENDABLE = (ConnectionLoss, OperationTimeoutError)
_RECONNECT_POLL_S = 0.05


def zk_read(method):
    """Decorator of a store method that only reads (or only ensures what a second send
    cannot change): zk_call's errors, but a call whose connection dropped is sent again
    once the session has reconnected (within the session timeout, measured from the first
    loss)."""
    @functools.wraps(method)
    def resending(self, *args, **kwargs):
        deadline = None
        while True:
            try:
                return method(self, *args, **kwargs)
            except _RESENDABLE:
                if deadline is None:
                    deadline = time.monotonic() + self.session_timeout_s
                if not self._await_reconnect(deadline):
                    raise                   # zk_call makes it ZkUnavailable
    wrapper = zk_call(resending)
    wrapper.resends_reads = True
    return wrapper


# -- bounded waits ---------------------------------------------------------------------------


class _BoundedResult(AsyncResult):
    """kazoo's result whose unbounded ``get()``, inside a store method, gives up with
    KazooTimeoutError once the session has been without a connection for the session
    timeout (measured from when this wait first saw it down). kazoo queues a request made
    while it reconnects until a connection comes, which is never while ZooKeeper stays
    away; Kafka's ZooKeeperClient likewise waits a bounded time for a connection before
    each request. A request given up on stays in kazoo's queue: sent if the same session
    reconnects (a write's outcome is unknown, as after a connection loss), failed by kazoo
    if the session has expired. kazoo's own threads (watch recipes) keep unbounded
    waits."""

    def get(self, block=True, timeout=None):
        if block and timeout is None and getattr(_store_call, "depth", 0):
            handler, down_since = self._handler, None
            while not self.wait(_RECONNECT_POLL_S):
                if handler.is_connected():
                    down_since = None
                    continue
                now = time.monotonic()
                if down_since is None:
                    down_since = now
                elif now - down_since >= handler.bound_s:
                    raise KazooTimeoutError(f"no connection to ZooKeeper for "
                                            f"{handler.bound_s:g} s (the session timeout)")
        return super().get(block, timeout)


class _BoundedHandler(SequentialThreadingHandler):
    """kazoo's threading handler making ``_BoundedResult``s; ``is_connected`` is set once
    the client exists."""

    def __init__(self, bound_s: float):
        super().__init__()
        self.bound_s = bound_s
        self.is_connected: Callable[[], bool] = lambda: True

    def async_result(self):
        return _BoundedResult(self)


# -- watch handles ---------------------------------------------------------------------------
class ZkWatch:
    """Handle of one registered watch; ``cancel()`` stops forwarding (idempotent)."""

    def __init__(self, store: "ZkSession", path: str, kind: str):
        self.path, self.kind = path, kind
        self._store = store
        self._cancelled = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        self._cancelled.set()
        self._store._forget_watch(self)

    def __repr__(self):
        return f"<ZkWatch {self.kind} {self.path}{' cancelled' if self.cancelled else ''}>"


# -- ZooKeeper's multiRead --------------------------------------------------------------------
class _MultiRead(namedtuple("_MultiRead", "operations")):
    """ZooKeeper's multiRead request (opcode 22, server >= 3.6), which kazoo 2.11 lacks:
    many getData/getChildren in ONE request and response, each op with its own result or
    error (reads are not atomic). Serialized like kazoo's own Transaction."""

    type = 22

    def serialize(self):
        b = bytearray()
        for op in self.operations:
            b.extend(MultiHeader(op.type, False, -1).serialize() + op.serialize())
        return b + multiheader_struct.pack(-1, True, -1)

    @classmethod
    def deserialize(cls, buf, offset):
        results = []
        header, offset = MultiHeader.deserialize(buf, offset)
        while not header.done:
            if header.type == GetData.type:
                data, offset = read_buffer(buf, offset)
                stat = ZnodeStat._make(stat_struct.unpack_from(buf, offset))
                offset += stat_struct.size
                results.append((data or b"", stat))
            elif header.type == GetChildren.type:
                count = int_struct.unpack_from(buf, offset)[0]
                offset += int_struct.size
                children = []
                for _ in range(max(count, 0)):
                    child, offset = read_string(buf, offset)
                    children.append(child)
                results.append(children)
            elif header.type == -1:
                err = int_struct.unpack_from(buf, offset)[0]
                offset += int_struct.size
                results.append(EXCEPTIONS[err]())
            else:
                raise ValueError(f"unexpected multiRead result type {header.type}")
            header, offset = MultiHeader.deserialize(buf, offset)
        return results


# -- the session -----------------------------------------------------------------------------
class ZkSession:
    """A kazoo session on the chroot: lifecycle, state listeners, reads and watch plumbing.
    ``ZkStore`` (controller/zookeeper/store.py) builds on it; its docstring describes the
    constructor arguments."""

    def __init__(self, hosts: str | None = None, cluster: str = "default", *,
                 session_timeout_s: float = 6.0, connection_timeout_s: float = 10.0,
                 client: KazooClient | None = None, root: str | None = None,
                 multi_read: bool = True, auth: str | None = None):
        if (hosts is None) == (client is None):
            raise ValueError("give exactly one of hosts= or client=")
        self.cluster = cluster
        self.root = (root.rstrip("/") if root else cluster_root(cluster))
        if not self.root.startswith("/") or self.root == "":
            raise ValueError(f"invalid root {root!r}")
        self.hosts = hosts if hosts is not None else getattr(client, "hosts", "?")
        self.session_timeout_s = session_timeout_s
        self.connection_timeout_s = connection_timeout_s
        self._owns_client = client is None
        self.secure_acl, self.private_acl = _acls(auth)
        if client is None:
            handler = _BoundedHandler(session_timeout_s)
            client = KazooClient(
                hosts=hosts, timeout=session_timeout_s, handler=handler,
                connection_retry={"max_tries": -1, "delay": 0.05, "backoff": 2,
                                  "max_delay": 1.0},
                auth_data=[("digest", auth)] if auth else None, default_acl=self.secure_acl)
            handler.is_connected = lambda: client.connected
        self._client = client
        self._listeners: dict[Callable, Callable] = {}
        self._watches: set[ZkWatch] = set()
        self._lock = threading.Lock()
        self._multi_read_ok = multi_read
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> Self:
        """Connect (if owned) and create the chroot and Kafka's persistent parents."""
        if self._owns_client and not self._client.connected:
            try:
                self._client.start(timeout=self.connection_timeout_s)
            except KazooTimeoutError:
                self._client.stop()
                self._client.close()
                raise ZkUnavailable(f"could not connect to ZooKeeper at {self.hosts} within "
                                    f"{self.connection_timeout_s:g} s") from None
        self._ensure_parents()
        return self

    @zk_read
    def _ensure_parents(self) -> None:
        """The chroot and Kafka's persistent parents."""
        if self.secure_acl is not None and self.root.startswith(ROOT_PREFIX + "/"):
            self._client.ensure_path(ROOT_PREFIX, acl=OPEN_ACL_UNSAFE)
        self._client.ensure_path(self.root)
        for p in PERSISTENT_PATHS:
            self._client.ensure_path(self._abs(p))

    def close(self) -> None:
        """Cancel watches and listeners; stop the session if we own it (ephemerals go now).
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        for w in list(self._watches):
            w.cancel()
        for wrapper in list(self._listeners.values()):
            self._client.remove_listener(wrapper)
        self._listeners.clear()
        if self._owns_client:
            try:
                self._client.stop()
            finally:
                self._client.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def client(self) -> KazooClient:
        """The kazoo client (for tests and tooling; controller code must not use it)."""
        return self._client

    @property
    def session_id(self) -> int | None:
        cid = self._client.client_id
        return cid[0] if cid else None

    @property
    def connected(self) -> bool:
        return bool(self._client.connected)

    def _await_reconnect(self, deadline: float) -> bool:
        """True once the session is connected again before `deadline` (monotonic), False
        if the deadline passes or the session is closed. Polled: kazoo's own connected
        event is private."""
        while not self._closed:
            if self._client.connected:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_RECONNECT_POLL_S)
        return False

    def session_credentials(self) -> tuple[int, bytes]:
        """(session id, password) of the current session, kazoo's ``client_id``: what
        ``expire_session`` needs to force a real server-side expiry (fault injection).
        ZkUnavailable while no session is established."""
        cid = self._client.client_id
        if not cid:
            raise ZkUnavailable(f"no ZooKeeper session (hosts {self.hosts})")
        return int(cid[0]), bytes(cid[1])

    def add_state_listener(self, callback: Callable[[str], None]) -> None:
        """Forward kazoo session states as "CONNECTED" / "SUSPENDED" / "LOST" (from kazoo's
        thread: the callback must not block)."""
        def wrapper(state):
            try:
                callback(str(state))
            except Exception:
                log.exception("state listener %r failed", callback)
            return None  # kazoo removes a listener that returns True
        self._listeners[callback] = wrapper
        self._client.add_listener(wrapper)

    def remove_state_listener(self, callback: Callable[[str], None]) -> None:
        wrapper = self._listeners.pop(callback, None)
        if wrapper is not None:
            self._client.remove_listener(wrapper)

    # -- path helpers ----------------------------------------------------------------------------
    def _abs(self, path: str) -> str:
        return self.root + path

    def _get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        try:
            return self._client.get(self._abs(path))
        except NoNodeError:
            return None

    def _children(self, path: str) -> list[str] | None:
        try:
            return self._client.get_children(self._abs(path))
        except NoNodeError:
            return None

    def _get_many(self, paths: Sequence[str], small: bool = False
                  ) -> list[tuple[bytes, ZnodeStat] | None]:
        """Pipelined reads, None where the node is missing. ``small`` znodes are read in
        batches with ZooKeeper's multiRead (one request per MAX_READS_PER_MULTI_READ);
        otherwise one get_async each (all issued first, then collected)."""
        return self._read_many(GetData, paths, small)

    def _children_many(self, paths: Sequence[str], small: bool = False) -> list[list[str] | None]:
        return self._read_many(GetChildren, paths, small)

    def _read_many(self, request, paths: Sequence[str], small: bool) -> list:
        results = None
        if small and self._multi_read_ok and len(paths) > 1:
            try:
                results = self._multi_read(request, paths)
            except _UNAVAILABLE:
                raise
            except Exception as e:  # the server rejected/garbled multiRead: fall back for good
                log.warning("multiRead unavailable (%s: %s); using pipelined reads",
                            type(e).__name__, e)
                self._multi_read_ok = False
        if results is None:
            call = self._client.get_async if request is GetData else self._client.get_children_async
            pending = [call(self._abs(p)) for p in paths]
            results = []
            for a in pending:
                try:
                    results.append(a.get())
                except NoNodeError as e:
                    results.append(e)
        out = []
        for path, r in zip(paths, results):
            if isinstance(r, NoNodeError):
                out.append(None)
            elif isinstance(r, Exception):
                raise store_error(r, path)
            else:
                out.append(r)
        return out

    def _multi_read(self, request, paths: Sequence[str]) -> list:
        """Raw per-op results (exception instances for failed ops), batches pipelined."""
        chroot, pending = self._client.chroot, []
        it = iter(paths)
        while batch := list(itertools.islice(it, MAX_READS_PER_MULTI_READ)):
            a = self._client.handler.async_result()
            self._client._call(_MultiRead([request(_prefix_root(chroot, self._abs(p)), None)
                                           for p in batch]), a)
            pending.append((len(batch), a))
        out = []
        for n, a in pending:
            results = a.get()
            if len(results) != n:
                raise ValueError(f"multiRead answered {len(results)} results for {n} reads")
            out += results
        return out

    # -- watch plumbing ----------------------------------------------------------------------------
    def _remember(self, w: ZkWatch) -> ZkWatch:
        with self._lock:
            self._watches.add(w)
        return w

    def _forget_watch(self, w: ZkWatch) -> None:
        with self._lock:
            self._watches.discard(w)

    @staticmethod
    def _deliver(callback, value) -> None:
        try:
            callback(value)
        except Exception:
            log.exception("watch callback %r failed", callback)

    @zk_call
    def _data_watch(self, path: str, convert, callback) -> ZkWatch:
        w = self._remember(ZkWatch(self, path, "data"))

        def on_data(data, stat, event=None):  # 3 params: kazoo retries with 2 on TypeError
            if w.cancelled:
                return False
            try:
                value = convert(data, stat)
            except Exception:
                log.exception("cannot parse %s", path)
                return None
            self._deliver(callback, value)
            return None

        DataWatch(self._client, self._abs(path), on_data)
        return w

    @zk_call
    def _children_watch(self, path: str, convert, callback) -> ZkWatch:
        """Children watch that survives the parent being deleted and re-created: a DataWatch
        on the parent (re)starts a kazoo ChildrenWatch for each incarnation (czxid) of it;
        while the parent is absent the callback gets an empty value."""
        w = self._remember(ZkWatch(self, path, "children"))
        state = {"czxid": None, "gen": 0}
        lock = threading.Lock()

        def on_children(gen, children):
            if w.cancelled or gen != state["gen"]:
                return False
            self._deliver(callback, convert(children))
            return None

        def on_parent(data, stat, event=None):
            if w.cancelled:
                return False
            with lock:
                if stat is None:
                    state["czxid"] = None
                    state["gen"] += 1
                    start = None
                elif stat.czxid != state["czxid"]:
                    state["czxid"] = stat.czxid
                    state["gen"] += 1
                    start = state["gen"]
                else:
                    return None
            if start is None:
                self._deliver(callback, convert([]))
            else:
                ChildrenWatch(self._client, self._abs(path), functools.partial(on_children, start))
            return None

        DataWatch(self._client, self._abs(path), on_parent)
        return w


# -- ACLs ----------------------------------------------------------------------------------
def _acls(auth: str | None) -> tuple[list | None, list | None]:
    """(the default ACL of every znode created, the ACL of sensitive ones) for digest
    credentials "user:password"; (None, None) without: kazoo's open default."""
    if not auth:
        return None, None
    user, sep, password = auth.partition(":")
    if not sep or not user or not password:
        raise ValueError("ZooKeeper auth must be 'user:password' (digest scheme)")
    creator = make_digest_acl(user, password, all=True)
    return [creator] + list(READ_ACL_UNSAFE), [creator]


# -- fault injection ---------------------------------------------------------------------------
def expire_session(connect_string: str, session_id: int, password: bytes,
                   timeout_s: float = 10.0) -> None:
    """Force a REAL server-side expiry of the session (session_id, password): a second client
    attaches to it (same client_id) and closes it, so the server ends the session and deletes
    its ephemerals at once; the owner then sees SUSPENDED → LOST and reconnects with a NEW
    session. ``connect_string`` must not carry a chroot (the session is global to the
    server). ZkUnavailable if the server cannot be reached within timeout_s."""
    other = KazooClient(hosts=connect_string, client_id=(session_id, password),
                        timeout=timeout_s)
    try:
        other.start(timeout=timeout_s)   # on a timeout kazoo has stopped and closed it
    except KazooTimeoutError:
        raise ZkUnavailable(f"could not attach to session 0x{session_id:x} at "
                            f"{connect_string} within {timeout_s:g} s") from None
    try:
        other.stop()    # sends closeSession for the attached session: THAT is the expiry
    finally:
        other.close()
