"""IPython magics: thin layers that parse arguments and call a ``Lab`` method.

Parsing is separate from the work (``parse_*`` functions are plain and testable). Any
``AklabError`` is printed as one line starting with ``aklab:``; bad arguments print the
usage; anything else keeps its traceback.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from aklab.errors import AklabError

__all__ = ["AklabMagics", "AskArgs", "UsageError", "parse_ask", "parse_usage"]


class UsageError(AklabError):
    """Bad magic arguments; the message is the usage line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # never sys.exit inside a kernel
        raise UsageError(f"{message}\nusage: {self.format_usage().removeprefix('usage: ').strip()}")


class AskArgs(argparse.Namespace):
    agent: str | None
    timeout: float | None


def _ask_parser() -> _Parser:
    p = _Parser(prog="%%ask", add_help=False)
    p.add_argument("agent", nargs="?", help="@Member to address (default: the entry agent)")
    p.add_argument("--timeout", type=float, default=None)
    return p


def parse_ask(line: str) -> AskArgs:
    args = _ask_parser().parse_args(shlex.split(line), namespace=AskArgs())
    if args.agent is not None and not args.agent.startswith("@"):
        raise UsageError(f"expected @Member, got {args.agent!r}\nusage: %%ask [@Member] [--timeout S]")
    return args


def parse_usage(line: str) -> str:
    p = _Parser(prog="%usage", add_help=False)
    p.add_argument("--by", choices=["agent", "run", "model", "request"], default="agent")
    return str(p.parse_args(shlex.split(line)).by)


@magics_class
class AklabMagics(Magics):
    @cell_magic
    def ask(self, line: str, cell: str) -> None:
        """%%ask [@Member] [--timeout S]: send the cell to the team and show the replies."""
        from aklab.lab import get_lab
        from aklab.lab.session import DEFAULT_TIMEOUT, format_message

        try:
            args = parse_ask(line)
            lab = get_lab()
            seen_errors = len(lab.recorder.errors)
            replies = lab.ask(cell.strip(), to=args.agent, timeout=args.timeout or DEFAULT_TIMEOUT)
        except AklabError as exc:
            print(f"aklab: {exc}")
            return
        for reply in replies:
            print(format_message(reply))
            print()
        for error in lab.errors()[seen_errors:]:
            print(f"aklab: {error}")
        if not replies:
            print("(no reply reached @Human)")

    @line_magic
    def usage(self, line: str) -> Any:
        """%usage [--by agent|run|model|request]: tokens and cost as a DataFrame."""
        from aklab.lab import get_lab

        try:
            return get_lab().usage(by=parse_usage(line))
        except AklabError as exc:
            print(f"aklab: {exc}")
            return None
