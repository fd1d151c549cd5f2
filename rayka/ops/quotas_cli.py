"""`rayka quotas describe|alter`: Kafka's client quotas with kafka-configs' habits, over
rayka's Admin (rayka/client/admin.py; ZooKeeper's /config/users and /config/clients).

Rules:
- An entity is given as kafka-configs gives it: `--entity-type users|clients` followed by
  `--entity-name NAME` or `--entity-default`, once per part (users and clients together
  name a user+client-id entity).
- `alter` takes `--add-config k=v[,k=v...]` (producer_byte_rate, consumer_byte_rate,
  request_percentage, controller_mutation_rate) and `--delete-config k[,k...]`; a value or
  key Kafka refuses is INVALID_REQUEST, one line.
- `describe` lists the entities with quotas matching the parts given (`--entity-type`
  without a name or default: any entity of that type), not strict unless `--strict`, as
  DescribeClientQuotas; one line per entity, or `--json`.
"""

from __future__ import annotations

import argparse
import json

from protocol.quotas import DEFAULT
from replicas.errors import InvalidRequest

TYPES = {"users": "user", "clients": "client_id"}


class _Part(argparse.Action):
    """Collects (type, name) parts in command-line order, as kafka-configs pairs them."""

    def __call__(self, parser, namespace, values, option_string=None):
        parts = getattr(namespace, "parts", None) or []
        if option_string == "--entity-type":
            parts.append([values, None])
        elif not parts or parts[-1][1] is not None:
            raise InvalidRequest(f"{option_string} must follow an --entity-type")
        else:
            parts[-1][1] = DEFAULT if option_string == "--entity-default" else values
        namespace.parts = parts


def add_parser(sub, command) -> None:
    q = command("quotas", "client quotas (kafka-configs --entity-type users|clients)")
    qsub = q.add_subparsers(dest="quotas_command", required=True, parser_class=type(q))
    for name, text in (("describe", "list the quotas of matching entities"),
                       ("alter", "set or remove quota keys of one entity")):
        p = qsub.add_parser(name, help=text)
        p.add_argument("--entity-type", choices=sorted(TYPES), action=_Part)
        p.add_argument("--entity-name", action=_Part)
        p.add_argument("--entity-default", nargs=0, action=_Part)
        if name == "alter":
            p.add_argument("--add-config", default="")
            p.add_argument("--delete-config", default="")
            p.add_argument("--validate-only", action="store_true")
        else:
            p.add_argument("--strict", action="store_true")
            p.add_argument("--json", action="store_true")


def _name(part) -> str:
    return "<default>" if part is DEFAULT else part


def _entity(args, any_name) -> dict:
    out = {}
    for kind, name in getattr(args, "parts", None) or []:
        key = TYPES[kind]
        if key in out:
            raise InvalidRequest(f"--entity-type {kind} given twice")
        out[key] = any_name if name is None else name
    return out


def run(args, cluster) -> int:
    admin = cluster.admin()
    if args.quotas_command == "alter":
        entity = _entity(args, None)
        if not entity or None in entity.values():
            raise InvalidRequest("alter needs --entity-type with --entity-name or "
                                 "--entity-default")
        add = {}
        for item in filter(None, (s.strip() for s in args.add_config.split(","))):
            key, eq, value = item.partition("=")
            try:
                add[key.strip()] = float(value)
            except ValueError:
                raise InvalidRequest(f"--add-config {item!r}: not key=number") from None
        remove = [k.strip() for k in args.delete_config.split(",") if k.strip()]
        if not add and not remove:
            raise InvalidRequest("alter needs --add-config or --delete-config")
        admin.alter_client_quotas(set=add, remove=remove, validate_only=args.validate_only,
                                  **entity)
        print(("validated" if args.validate_only else "altered") + " quotas of "
              + ", ".join(f"{k}={_name(v)}" for k, v in entity.items()))
        return 0
    found = admin.describe_client_quotas(strict=args.strict, **_entity(args, "*"))
    rows = [({k: _name(v) for k, v in (("user", e.user), ("client-id", e.client_id))
              if v is not None}, values) for e, values in found]
    if args.json:
        print(json.dumps([{"entity": ent, "quotas": vals} for ent, vals in rows], indent=2))
    else:
        for ent, vals in rows:
            print(", ".join(f"{k}={v}" for k, v in ent.items()) + "\t"
                  + ",".join(f"{k}={v:g}" for k, v in sorted(vals.items())))
    return 0
