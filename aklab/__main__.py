"""``python -m aklab demo``: the main job, offline on the demo model."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aklab", description="aklab command line")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a Human -> Manager -> Developer exchange offline")
    demo.add_argument("message", nargs="?", default="Plan the next sprint for the login page.")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from aklab.lab.console import run_demo

        return run_demo(args.message)
    return 2


if __name__ == "__main__":
    sys.exit(main())
