"""The `rayka` command.

Rules: every user error prints ONE line (`rayka: <Kafka error name> (<code>): <why>`, or
the launcher's message) and exits non-zero; no tracebacks for errors a user can cause.
"""

from __future__ import annotations

import argparse
import sys

from replicas.errors import KafkaError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rayka", description="A Kafka-style log inside Ray.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the demonstration job")
    demo.add_argument("--records", type=int, default=300_000)
    demo.add_argument("--keep", action="store_true", help="keep the data directory")
    sub.add_parser("version", help="print the version")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "demo":
            from rayka import demo
            demo.run(records_total=args.records, keep=args.keep)
        elif args.command == "version":
            from rayka import __version__
            print(__version__)
        return 0
    except KafkaError as exc:
        print(f"rayka: {exc}", file=sys.stderr)
    except Exception as exc:  # launcher and environment errors: one line, not a traceback
        if type(exc).__name__ not in {"ZooKeeperLaunchError"}:
            raise
        print(f"rayka: {exc}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
