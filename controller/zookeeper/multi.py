"""The ZooKeeper store's multi-op engine: units of ops committed in checked, re-committed multis.

Part of the ZooKeeper store (``controller/zookeeper/store.py`` is its facade; see there for the
module map). Both the fenced controller writes (``controller/zookeeper/fenced.py``) and the
unfenced admin writes of ``ZkStore`` go through it.

Rules:
- ``transaction.commit()`` does NOT raise on failure: it returns one item per op, and a
  failed multi has RolledBackError before the failing op, the real error at it and
  RuntimeInconsistency after it. Every result list is checked item by item
  (``all_ok`` / ``first_failure``).
- A ``Unit`` is ops that must land together (e.g. a partition node and its state); its
  outcome is the result of its LAST op, or a ZkStoreError (``NodeExists``, ``NoNode``,
  ``BadVersion``, ``NotEmpty``) as a VALUE. An op may ``tolerate`` errors meaning "already
  so": it is dropped and the rest of its unit retried.
- Batching semantics of bulk writes (Kafka's ``updateLeaderAndIsr`` reports per
  partition): units are packed into multis of at most ``MAX_OPS_PER_MULTI`` ops (incl. the
  epoch check, if fenced) / ``MAX_BYTES_PER_MULTI`` bytes; independent multis are
  pipelined. A multi that fails on an item (BadVersion, NodeExists, NoNode) writes
  nothing, so the engine records that item's outcome and re-commits the rest of the multi
  without it (a few times, then one multi per item, pipelined). Result: exact per-item
  outcomes.
- Fenced runs (``fence`` = the /controller_epoch zk version) start every multi with
  check(/controller_epoch, fence); a failed check raises ``on_moved()`` (a
  ``ControllerMovedError``) and that multi wrote nothing. Atomicity is per multi, not per
  call: earlier multis of the same call stay written.
- The limits are read through ``_multi_limits()``; ``ZkStore`` reads them from
  ``controller.zookeeper.store`` at call time, so that module's ``MAX_OPS_PER_MULTI`` /
  ``MAX_BYTES_PER_MULTI`` stay the knobs (tests patch them there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from kazoo.exceptions import RolledBackError

from controller.zookeeper.client import ControllerMovedError, ZkSession, ZkStoreError, store_error
from controller.layout import CONTROLLER_EPOCH

__all__ = ["ZkMultiSession", "Op", "Unit", "all_ok", "first_failure", "is_error",
           "MAX_OPS_PER_MULTI", "MAX_BYTES_PER_MULTI"]

MAX_OPS_PER_MULTI = 1000          # including the epoch check
MAX_BYTES_PER_MULTI = 512 * 1024  # well under ZooKeeper's jute.maxbuffer (1 MiB)
_CHUNK_RETRIES = 3                # whole-multi re-commits before one multi per item
_OP_OVERHEAD = 48                 # bytes per op besides path and data (estimate)


# -- the batching engine's units --------------------------------------------------------------
@dataclass
class Op:
    kind: str                      # "create" | "set" | "delete" | "check"
    path: str                      # relative to the chroot
    data: bytes = b""
    version: int = -1
    ephemeral: bool = False
    sequence: bool = False
    tolerate: tuple = ()           # kazoo errors meaning "already so": drop op, retry the unit

    def size(self) -> int:
        return len(self.path) + len(self.data) + _OP_OVERHEAD


@dataclass
class Unit:
    """Ops that must land together (e.g. a partition node and its state). The unit's outcome
    is the result of its LAST op (ZnodeStat for set, path for create, True for delete or
    when every op was dropped as already done), or a ZkStoreError."""

    key: object
    ops: list[Op] = field(default_factory=list)

    def size(self) -> int:
        return sum(op.size() for op in self.ops)


def is_error(r) -> bool:
    return isinstance(r, Exception)


def all_ok(results) -> bool:
    return not any(is_error(r) for r in results)


def first_failure(results, start: int) -> tuple[int, Exception]:
    for i in range(start, len(results)):
        r = results[i]
        if is_error(r) and not isinstance(r, RolledBackError):
            return i, r
    raise ZkStoreError(f"multi failed without a failing op: {results!r}")


def _epoch_check_failed() -> ControllerMovedError:
    return ControllerMovedError("controller epoch check failed")


# -- the engine --------------------------------------------------------------------------------
class ZkMultiSession(ZkSession):
    """``ZkSession`` plus the multi-op engine (see the module docstring)."""

    def _multi_limits(self) -> tuple[int, int]:
        """(max ops incl. the epoch check, max bytes) per multi, read at call time."""
        return MAX_OPS_PER_MULTI, MAX_BYTES_PER_MULTI

    def _txn_async(self, ops: Iterable[Op], fence: int | None):
        t = self._client.transaction()
        if fence is not None:
            t.check(self._abs(CONTROLLER_EPOCH), fence)
        for op in ops:
            p = self._abs(op.path)
            if op.kind == "create":
                t.create(p, op.data, ephemeral=op.ephemeral, sequence=op.sequence)
            elif op.kind == "set":
                t.set_data(p, op.data, version=op.version)
            elif op.kind == "delete":
                t.delete(p, version=op.version)
            elif op.kind == "check":
                t.check(p, op.version)
            else:
                raise ValueError(op.kind)
        return t.commit_async()

    def _chunks(self, units: list[Unit], reserve: int) -> list[list[Unit]]:
        max_ops, max_bytes = self._multi_limits()
        chunks, cur, n_ops, n_bytes = [], [], 0, 0
        for u in units:
            k, b = len(u.ops), u.size()
            if cur and (n_ops + k + reserve > max_ops or n_bytes + b > max_bytes):
                chunks.append(cur)
                cur, n_ops, n_bytes = [], 0, 0
            cur.append(u)
            n_ops, n_bytes = n_ops + k, n_bytes + b
        if cur:
            chunks.append(cur)
        return chunks

    @staticmethod
    def _assign(chunk: list[Unit], results: list, offset: int, out: dict) -> None:
        i = offset
        for u in chunk:
            n = len(u.ops)
            out[u.key] = results[i + n - 1] if n else True
            i += n

    @staticmethod
    def _apply_failure(units: list[Unit], results: list, offset: int, out: dict) -> list[Unit]:
        """Record the failing op of a failed multi; return the units still to commit."""
        idx, exc = first_failure(results, offset)
        i = offset
        for u in units:
            if idx < i + len(u.ops):
                op = u.ops[idx - i]
                if op.tolerate and isinstance(exc, op.tolerate):
                    del u.ops[idx - i]
                    if not u.ops:
                        out[u.key] = True
                else:
                    out[u.key] = store_error(exc, op.path)
                    u.ops = []
                break
            i += len(u.ops)
        return [u for u in units if u.ops]

    def _run_units(self, units: list[Unit], fence: int | None, *, pipeline: bool = True,
                   on_moved: Callable[[], Exception] | None = None) -> dict:
        """Commit units in multis (see this module's docstring); return {key: outcome}.

        With ``fence`` each multi starts with check(/controller_epoch, fence) and a failed
        check raises ``on_moved()``. ``pipeline=False`` when later units depend on earlier
        ones (deletes of parents after children)."""
        make_moved = on_moved or _epoch_check_failed
        out: dict = {u.key: True for u in units if not u.ops}
        offset = 1 if fence is not None else 0
        chunks = self._chunks([u for u in units if u.ops], offset)

        def fenced_out(results) -> bool:
            return (offset == 1 and is_error(results[0])
                    and not isinstance(results[0], RolledBackError))

        if pipeline:
            sent = [(c, self._txn_async(self._flat(c), fence)) for c in chunks]
        else:
            sent = [(c, None) for c in chunks]
        failed, moved = [], False
        for chunk, pending in sent:
            results = (pending or self._txn_async(self._flat(chunk), fence)).get()
            if all_ok(results):
                self._assign(chunk, results, offset, out)
            elif fenced_out(results):
                moved = True
                if not pipeline:
                    break
            elif pipeline:
                failed.append((chunk, results))
            else:
                self._settle(chunk, results, fence, offset, out, fenced_out, make_moved)
        if moved:
            raise make_moved()
        for chunk, results in failed:
            self._settle(chunk, results, fence, offset, out, fenced_out, make_moved)
        return out

    @staticmethod
    def _flat(units: list[Unit]) -> list[Op]:
        return [op for u in units for op in u.ops]

    def _settle(self, chunk, results, fence, offset, out, fenced_out, moved) -> None:
        """A multi failed on an item: record it, re-commit the rest (then one per item)."""
        pending = chunk
        for _ in range(_CHUNK_RETRIES):
            pending = self._apply_failure(pending, results, offset, out)
            if not pending:
                return
            results = self._txn_async(self._flat(pending), fence).get()
            if all_ok(results):
                self._assign(pending, results, offset, out)
                return
            if fenced_out(results):
                raise moved()
        pending = self._apply_failure(pending, results, offset, out)
        while pending:  # one multi per unit, pipelined, until every unit has an outcome
            sent = [(u, self._txn_async(u.ops, fence)) for u in pending]
            pending, was_moved = [], False
            for u, a in sent:
                res = a.get()
                if all_ok(res):
                    self._assign([u], res, offset, out)
                elif fenced_out(res):
                    was_moved = True
                else:
                    pending += self._apply_failure([u], res, offset, out)
            if was_moved:
                raise moved()
