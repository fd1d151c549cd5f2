"""The chaos history: an append-only JSONL file of what clients saw, read back by the checker.

Rules:
- One JSON object per line, with at least "type" (invoke / ok / fail / info), "f" (what
  operation: send, read, fault, final-read, ...) and "time_ms" (a float from the clock given
  to History, default `time.monotonic() * 1000`), plus the caller's fields. The schema of
  each "f" is documented in rayka/chaos/checker.py.
- `record` is thread safe: the clock is read and the line written under one lock, so the
  lines of the file are in time order. Each line is written whole and flushed at once: a
  crash of the recording process keeps everything recorded before it (at most the line
  being written is torn).
- "time_ms" comes from the clock only; passing it as a field is an error, as is a field
  that JSON cannot encode (the history must not silently lose information).
- `load_history` returns the lines as dicts in file order. A torn LAST line (one that does
  not parse, as a crash mid-write leaves) is dropped; a bad line anywhere else, or a line
  that is not a JSON object, raises ValueError naming the line: the checker must not guess.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Callable

RESERVED = frozenset({"type", "f", "time_ms"})


def _monotonic_ms() -> float:
    return time.monotonic() * 1000.0


class History:
    """Thread-safe JSONL writer; see the module rules."""

    def __init__(self, path: str | os.PathLike, clock: Callable[[], float] | None = None):
        self.path = os.fspath(path)
        self._clock = clock or _monotonic_ms
        self._lock = threading.Lock()
        self._file = open(self.path, "a", encoding="utf-8", buffering=1)

    def record(self, type: str, f: str, **fields: Any) -> dict:
        """Append one line {"type", "f", "time_ms", **fields}; returns what was written."""
        clash = RESERVED & fields.keys()
        if clash:
            raise ValueError(f"history fields {sorted(clash)} are reserved")
        with self._lock:
            if self._file.closed:
                raise ValueError(f"history {self.path} is closed")
            entry = {"type": type, "f": f, "time_ms": float(self._clock()), **fields}
            line = json.dumps(entry, ensure_ascii=False, separators=(",", ":"),
                              allow_nan=False)
            self._file.write(line + "\n")
            self._file.flush()
        return entry

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.flush()
                self._file.close()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def __enter__(self) -> "History":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def load_history(path: str | os.PathLike) -> list[dict]:
    """Every line of a history file as a dict, in file order (see the module rules)."""
    with open(path, "rb") as fh:
        lines = fh.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    entries: list[dict] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            if number == len(lines):
                break                     # a torn last line: the writer crashed mid-line
            raise ValueError(f"history {path} line {number}: not JSON ({exc})") from None
        if not isinstance(entry, dict):
            raise ValueError(f"history {path} line {number}: not a JSON object")
        entries.append(entry)
    return entries


def key_of(value: str, keys: int) -> str:
    """The key a workload value `p<i>-<n>` is sent with: itself, or `k<n mod keys>` when the
    run compacts (meta `compact_keys`); shared by the workload and the checker."""
    return f"k{int(value.rsplit('-', 1)[1]) % keys}" if keys else value
