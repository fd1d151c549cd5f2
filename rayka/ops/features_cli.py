"""`rayka features describe | upgrade | downgrade`: the cluster's finalized features with
kafka-features.sh's habits, over rayka's Admin (rayka/client/admin.py; ZooKeeper's /feature).

Rules:
- `describe` prints one line per supported feature as kafka-features describe does
  (`Feature: transaction.version  SupportedMinVersion: 0  SupportedMaxVersion: 2
  FinalizedVersionLevel: 2  Epoch: 0`), or `--json`.
- `upgrade --feature NAME=LEVEL` (repeatable) raises levels; `downgrade --feature NAME=LEVEL`
  lowers them (a safe downgrade, `--unsafe` for an unsafe one); `--dry-run` only checks.
  All or none, by Kafka's rules: a refused update is INVALID_UPDATE_VERSION, one line.
"""

from __future__ import annotations

import argparse
import json


def add_parser(sub, command) -> None:
    """`command(name, help)` makes a subcommand with the cluster options (rayka/cli.py)."""
    f = command("features", "the cluster's features: describe, upgrade, downgrade")
    fsub = f.add_subparsers(dest="features_command", required=True, parser_class=type(f))
    p = fsub.add_parser("describe", help="supported and finalized levels")
    p.add_argument("--json", action="store_true")
    for name, text in (("upgrade", "raise finalized levels"),
                       ("downgrade", "lower finalized levels")):
        p = fsub.add_parser(name, help=text)
        p.add_argument("--feature", action="append", required=True, metavar="NAME=LEVEL",
                       type=_name_level)
        p.add_argument("--dry-run", action="store_true")
        if name == "downgrade":
            p.add_argument("--unsafe", action="store_true")


def _name_level(text: str) -> tuple[str, int]:
    name, eq, level = text.partition("=")
    try:
        if not eq or not name.strip():
            raise ValueError
        return name.strip(), int(level)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not NAME=LEVEL: {text!r}") from None


def run(args, cluster) -> int:
    admin = cluster.admin()
    if args.features_command == "describe":
        got = admin.features()
        if args.json:
            print(json.dumps(got, sort_keys=True))
            return 0
        for name, (lo, hi) in sorted(got["supported"].items()):
            print(f"Feature: {name}\tSupportedMinVersion: {lo}\tSupportedMaxVersion: {hi}\t"
                  f"FinalizedVersionLevel: {got['finalized'].get(name, 0)}\t"
                  f"Epoch: {got['epoch']}")
        return 0
    downgrade = None
    if args.features_command == "downgrade":
        downgrade = "unsafe" if args.unsafe else "safe"
    levels = dict(args.feature)
    admin.update_features(levels, downgrade=downgrade, validate_only=args.dry_run)
    for name, level in sorted(levels.items()):
        verb = "could be" if args.dry_run else "was"
        print(f"{name} {verb} {'upgraded' if downgrade is None else 'downgraded'} to {level}.")
    return 0
