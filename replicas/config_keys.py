"""Kafka config keys in their two spellings: dotted as Kafka writes them (`log.retention.ms`)
and underscored as Python names them (`log_retention_ms`: a keyword argument, a dataclass
field).

Rules:
- A key holding a "." is Kafka's spelling and is never rewritten: Kafka's keys carry names
  with "_" of their own, a listener's above all (`listener.name.sasl_ssl.ssl.keystore.location`
  configures the listener SASL_SSL).
- A key without a "." is a Python name, each "_" standing for a "." (`log_retention_ms` is
  `log.retention.ms`). A per-listener key cannot be spelt so (which "_" belongs to the
  listener's name?): `listener_name_...` is refused with InvalidConfig asking for the dotted
  key.
- `dotted_key` gives a key's Kafka spelling, `dotted_keys` every key of a mapping (a later
  duplicate wins). `underscored_key` gives the Python name of a key, to match it against
  fields; it is for comparing only, never a key to pass on.
- Case and every other character stay as given. Pure: the stdlib and replicas' errors only.
"""

from __future__ import annotations

from typing import Mapping

from replicas.errors import InvalidConfig

__all__ = ["dotted_key", "underscored_key", "dotted_keys"]

LISTENER_PREFIX = "listener_name_"


def dotted_key(key: str) -> str:
    """`log_retention_ms` → `log.retention.ms`; a key with a "." as it is."""
    if "." in key:
        return key
    if key.lower().startswith(LISTENER_PREFIX):
        raise InvalidConfig(f"{key}: give per-listener keys dotted, as Kafka spells them "
                            f"(listener.name.<listener>.<key>, e.g. "
                            f"listener.name.sasl_ssl.ssl.keystore.location): a listener's "
                            f"name may hold '_'")
    return key.replace("_", ".")


def underscored_key(key: str) -> str:
    """`log.retention.ms` or `log_retention_ms` → `log_retention_ms` (to compare with a
    field's name)."""
    return key.replace(".", "_")


def dotted_keys(config: Mapping[str, object]) -> dict:
    return {dotted_key(k): v for k, v in config.items()}
