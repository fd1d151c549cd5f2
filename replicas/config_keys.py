"""Kafka config keys in their two spellings: dotted as Kafka writes them (`log.retention.ms`)
and underscored as Python names them (`log_retention_ms`: a keyword argument, a dataclass
field).

Rules:
- `dotted_key` gives Kafka's spelling, `underscored_key` the Python one; each takes either
  spelling, so a caller never needs to know which one it was given. `dotted_keys` and
  `underscored_keys` do the same for every key of a mapping (a later duplicate wins).
- Only "." and "_" are exchanged; case and every other character stay as given.
- Pure: the stdlib only.
"""

from __future__ import annotations

from typing import Mapping

__all__ = ["dotted_key", "underscored_key", "dotted_keys", "underscored_keys"]


def dotted_key(key: str) -> str:
    """`log_retention_ms` or `log.retention.ms` → `log.retention.ms`."""
    return key.replace("_", ".")


def underscored_key(key: str) -> str:
    """`log.retention.ms` or `log_retention_ms` → `log_retention_ms`."""
    return key.replace(".", "_")


def dotted_keys(config: Mapping[str, object]) -> dict:
    return {dotted_key(k): v for k, v in config.items()}


def underscored_keys(config: Mapping[str, object]) -> dict:
    return {underscored_key(k): v for k, v in config.items()}
