"""Kafka's dynamic entity configs in ZooKeeper (users, clients, brokers), pure: their paths,
their JSON, and the client-quota rules of AlterClientQuotas.

Rules (Kafka 3.8: AdminZkClient, ZkData ConfigEntityZNode / ConfigEntityChangeNotification,
ZkAdminManager.alterClientQuotas, DynamicConfig.User / Client, Sanitizer):
- An entity's config is /config/<type>/<name> holding {"version":1,"config":{k: "v"}}
  (strings only); users' quotas and SCRAM credentials share /config/users/<user>, and a
  writer keeps the keys it does not own. User and client-id quotas together live at
  /config/users/<user>/clients/<client-id>; a level's default entity is the name
  `<default>`; user and client names are URL-encoded (Sanitizer.sanitize: UTF-8, only
  [A-Za-z0-9._-] kept, space as %20), so a user literally named "<default>" is
  "%3Cdefault%3E".
- Every write is announced by a sequential /config/changes/config_change_ znode holding
  {"version":2,"entity_path":"<type>/<name>"} (brokers re-read that entity).
- AlterClientQuotas: an entity is a user, a client id or both (an ip entity, Kafka's
  connection-rate quotas, is refused as INVALID_REQUEST here); keys are Kafka's user/client
  quota keys: producer_byte_rate and consumer_byte_rate are LONGs (a value more than 1e-6
  from an integer is INVALID_REQUEST), request_percentage and controller_mutation_rate
  DOUBLEs; an unknown key is INVALID_REQUEST; a removal drops the key. A value <= 0 is
  INVALID_REQUEST (Kafka's ZooKeeper mode stores it and then divides by it).
- Values are written as Kafka writes them: a LONG as its integer, a DOUBLE as Java's
  Double.toString would ("1000.0").
"""

from __future__ import annotations

import json
from urllib.parse import quote, unquote_plus

from protocol.quotas import CONTROLLER_MUTATION, DEFAULT, FETCH, PRODUCE, REQUEST, QuotaEntity

__all__ = ["DEFAULT_NAME", "sanitize", "desanitize", "decode_config", "encode_config",
           "change_notice", "entity_path", "entity_of_path", "QUOTA_KEYS", "quota_value",
           "quota_config_of", "USER", "CLIENT_ID", "IP"]

DEFAULT_NAME = "<default>"
USER, CLIENT_ID, IP = "user", "client-id", "ip"
LONG, DOUBLE = "long", "double"
QUOTA_KEYS = {PRODUCE: LONG, FETCH: LONG, REQUEST: DOUBLE, CONTROLLER_MUTATION: DOUBLE}
EPSILON = 1e-6


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize (URLEncoder, then * → %2A and + → %20)."""
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    """Kafka's Sanitizer.desanitize (URLDecoder: + is a space)."""
    return unquote_plus(name)


def _name(part) -> str:
    return DEFAULT_NAME if part is DEFAULT else sanitize(part)


def _part(name: str):
    return DEFAULT if name == DEFAULT_NAME else desanitize(name)


def entity_path(entity: QuotaEntity) -> str:
    """The entity's path under /config: users/<u>, clients/<c> or users/<u>/clients/<c>."""
    if entity.user is not None and entity.client_id is not None:
        return f"users/{_name(entity.user)}/clients/{_name(entity.client_id)}"
    if entity.user is not None:
        return f"users/{_name(entity.user)}"
    if entity.client_id is not None:
        return f"clients/{_name(entity.client_id)}"
    raise ValueError("a quota entity needs a user or a client id")


def entity_of_path(path: str) -> QuotaEntity | None:
    """The quota entity of a path under /config (None: not a user or client entity)."""
    parts = path.strip("/").split("/")
    if len(parts) == 2 and parts[0] == "users":
        return QuotaEntity(_part(parts[1]), None)
    if len(parts) == 2 and parts[0] == "clients":
        return QuotaEntity(None, _part(parts[1]))
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return QuotaEntity(_part(parts[1]), _part(parts[3]))
    return None


def decode_config(data: bytes | None) -> dict[str, str]:
    """The "config" map of an entity znode; ValueError when it is not Kafka's JSON."""
    if not data:
        return {}
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"entity config is not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("config", {}), dict):
        raise ValueError("entity config is not {\"version\":1,\"config\":{...}}")
    return {str(k): str(v) for k, v in doc.get("config", {}).items()}


def encode_config(config: dict[str, str]) -> bytes:
    """Kafka's compact JSON of an entity config."""
    return json.dumps({"version": 1, "config": {k: str(v) for k, v in config.items()}},
                      separators=(",", ":")).encode()


def change_notice(entity_path_: str) -> bytes:
    return json.dumps({"version": 2, "entity_path": entity_path_},
                      separators=(",", ":")).encode()


def _java_double(value: float) -> str:
    if value == int(value) and abs(value) < 1e7:
        return f"{value:.1f}"
    return repr(float(value))


def quota_value(key: str, value: float) -> str:
    """The text stored for an AlterClientQuotas op; ValueError (INVALID_REQUEST) if Kafka
    refuses it."""
    kind = QUOTA_KEYS.get(key)
    if kind is None:
        raise ValueError(f"Invalid configuration key {key}")
    if not isinstance(value, (int, float)) or value != value or value in (float("inf"),
                                                                           float("-inf")):
        raise ValueError(f"Configuration {key} must be a number")
    if value <= 0:
        raise ValueError(f"Configuration {key} must be positive, got {value}")
    if kind == LONG:
        as_int = int(value + EPSILON)
        if abs(as_int - value) > EPSILON:
            raise ValueError(f"Configuration {key} must be a LONG value")
        return str(as_int)
    return _java_double(float(value))


def quota_config_of(config: dict[str, str]) -> dict[str, float]:
    """The quota keys of an entity's config as numbers (other keys, SCRAM's, left out);
    unreadable values are skipped."""
    out = {}
    for key in QUOTA_KEYS:
        if key in config:
            try:
                out[key] = float(config[key])
            except ValueError:
                continue
    return out
