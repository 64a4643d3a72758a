"""Entry point of the ``rankwise`` command: sub-commands are registered here."""
from __future__ import annotations

import argparse
import sys

from rankwise.errors import RankwiseError


def _cmd_demo(args) -> int:
    from rankwise.cli.demo import run_demo

    return run_demo(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rankwise", description="Learning to rank: train, predict, evaluate.")
    parser.add_argument("--debug", action="store_true", help="show a traceback on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser("demo", help="train and evaluate on a built-in synthetic data set")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.set_defaults(func=_cmd_demo)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except RankwiseError as exc:
        if args.debug:
            raise
        print(f"rankwise: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
