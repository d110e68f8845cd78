"""IPython magics: thin layers that parse arguments and call a ``Lab`` method.

Parsing (the ``parse_*`` functions) is separate from the work and testable alone. Any
``AklabError`` prints one line starting with ``aklab:``; bad arguments print the usage;
anything else keeps its traceback.

======================================  ===============================================
``%aklab``                              status of the lab
``%aklab team NAME|PATH``               start the built-in team NAME, or a team file
``%aklab model provider:model``         restart the team on another model (built first:
``      [--base-url URL] [...]``        a bad spec is one line); options: ``parse_model``
``%aklab dashboard``                    the live panels in tabs
``%%ask [@Agent] [--bg] [--timeout S]`` send the cell (``{var}`` expanded) to the team
``      [--out VAR]``                   and show the replies; VAR gets them too
``%stop [@Agent]``                      cancel the runs in flight
``%usage [--by agent|run|model|request]`` tokens and cost as a DataFrame
``       [--live]``                     ... or as a live panel
``%team`` / ``%transcript [@Agent]``    roster / messages sent (by or to @Agent)
``%context [@Agent]``                   context-update blocks delivered
======================================  ===============================================
"""

from __future__ import annotations

import argparse
import math
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from aklab.errors import AklabError

if TYPE_CHECKING:
    from aklab.agent import AgentMessage
    from aklab.lab.session import Lab
    from aklab.llm import ModelConfig

__all__ = [
    "AklabMagics",
    "AskArgs",
    "PendingReplies",
    "UsageError",
    "parse_aklab",
    "parse_ask",
    "parse_member",
    "parse_model",
    "parse_usage",
]


class UsageError(AklabError):
    """Bad magic arguments; the message ends with the usage line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # never sys.exit inside a kernel
        raise UsageError(f"{message}\nusage: {self.format_usage().removeprefix('usage: ').strip()}")


def _member(value: str | None, usage: str) -> str | None:
    if value is not None and not value.startswith("@"):
        raise UsageError(f"expected @Member, got {value!r}\nusage: {usage}")
    return value


@dataclass
class AskArgs:
    agent: str | None
    bg: bool
    timeout: float | None
    out: str | None


def parse_ask(line: str) -> AskArgs:
    p = _Parser(prog="%%ask", add_help=False)
    p.add_argument("agent", nargs="?")
    p.add_argument("--bg", action="store_true")
    p.add_argument("--timeout", type=_seconds, default=None)
    p.add_argument("--out", default=None)
    ns = p.parse_args(shlex.split(line))
    if ns.out is not None and not ns.out.isidentifier():
        raise UsageError(f"--out needs a variable name, got {ns.out!r}\nusage: {p.format_usage()[7:].strip()}")
    return AskArgs(_member(ns.agent, p.format_usage()[7:].strip()), ns.bg, ns.timeout, ns.out)


def _seconds(value: str) -> float:
    """``--timeout S``: a finite positive number, checked before anything is sent."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise UsageError(f"--timeout must be a positive number of seconds, e.g. --timeout 60 (got {value!r})")
    return seconds


def parse_usage(line: str) -> tuple[str, bool]:
    p = _Parser(prog="%usage", add_help=False)
    p.add_argument("--by", choices=["agent", "run", "model", "request"], default="agent")
    p.add_argument("--live", action="store_true")
    ns = p.parse_args(shlex.split(line))
    return str(ns.by), bool(ns.live)


def parse_member(line: str, prog: str) -> str | None:
    p = _Parser(prog=prog, add_help=False)
    p.add_argument("agent", nargs="?")
    return _member(p.parse_args(shlex.split(line)).agent, p.format_usage()[7:].strip())


def parse_aklab(line: str) -> tuple[str, str | None]:
    """``("status", None)``, ``("team", NAME)``, ``("model", SPEC_AND_OPTIONS)`` or ``("dashboard", None)``.

    The model's words are left for :func:`parse_model`.
    """
    words = shlex.split(line)
    usage = "%aklab [team NAME|PATH | model provider:model | dashboard]"
    if not words:
        return "status", None
    if words[0] == "team" and len(words) == 2:
        return words[0], words[1]
    if words[0] == "model" and len(words) >= 2:
        return "model", shlex.join(words[1:])
    if words == ["dashboard"]:
        return "dashboard", None
    raise UsageError(f"unknown arguments {line.strip()!r}\nusage: {usage}")


_MODEL_USAGE = (
    "%(prog)s provider:model [--base-url URL] [--api-key-env VAR] [--temperature T] [--max-tokens N]"
    " [--timeout S] [--retries N] [--output-mode auto|tool|native|prompted|grammar|text] [--context-length N]"
)


def parse_model(line: str) -> ModelConfig:
    """The words after ``%aklab model`` -> a ``ModelConfig``, not built yet.

    ``provider:model [--base-url URL] [--api-key-env VAR] [--temperature T] [--max-tokens N]
    [--timeout S] [--retries N] [--output-mode auto|tool|native|prompted|grammar|text] [--context-length N]``
    """
    from aklab.llm import ModelConfig
    from aklab.llm.config import OUTPUT_MODES

    p = _Parser(prog="%aklab model", add_help=False, usage=_MODEL_USAGE)
    p.add_argument("spec", metavar="provider:model")
    p.add_argument("--base-url", metavar="URL")
    p.add_argument("--api-key-env", metavar="VAR")
    p.add_argument("--temperature", type=float, metavar="T")
    p.add_argument("--max-tokens", type=int, metavar="N")
    p.add_argument("--timeout", type=float, metavar="S")
    p.add_argument("--retries", type=int, metavar="N")
    p.add_argument("--output-mode", choices=OUTPUT_MODES)
    p.add_argument("--context-length", type=int, metavar="N")
    options = vars(p.parse_args(shlex.split(line)))
    return ModelConfig.parse(options.pop("spec"), **options)


class PendingReplies:
    """What ``%%ask --bg --out VAR`` stores: replies that keep arriving."""

    def __init__(self, lab: Lab, start: int) -> None:
        self._lab = lab
        self._start = start

    @property
    def messages(self) -> list[AgentMessage]:
        return self._lab.inbox.messages[self._start :]

    def wait(self, timeout: float | None = None) -> list[AgentMessage]:
        """Block until the team is quiet, then return the replies."""
        self._lab.wait(timeout)
        return self.messages

    def __repr__(self) -> str:
        return f"<PendingReplies: {len(self.messages)} so far>"


class _LiveView:
    """Shows a live panel with a fixed text/plain: its content depends on timing."""

    def __init__(self, panel: Any) -> None:
        self._panel = panel

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle: dict[str, Any] = dict(self._panel._repr_mimebundle_(include, exclude))
        bundle["text/plain"] = "<live transcript>"
        return bundle


def _in_kernel(shell: Any) -> bool:
    return type(shell).__name__ == "ZMQInteractiveShell"


@magics_class
class AklabMagics(Magics):
    def _lab(self) -> Lab:
        from aklab.lab import get_lab

        return get_lab()

    @line_magic
    def aklab(self, line: str) -> Any:
        """%aklab [team NAME|PATH | model provider:model | dashboard]"""
        from aklab.lab import set_lab
        from aklab.lab.session import Lab
        from aklab.llm.profiles import resolve

        try:
            action, value = parse_aklab(line)
            if action == "team":
                set_lab(Lab(value or "dev-team"))
            elif action == "model":
                model_cfg = parse_model(value or "")
                resolve(model_cfg).close()  # a bad spec fails here, before the team restarts
                set_lab(Lab(self._lab().spec, model=model_cfg))
            elif action == "dashboard":
                return self._lab().dashboard()
            print(self._lab().status())
        except AklabError as exc:
            print(f"aklab: {exc}")
        return None

    @cell_magic
    def ask(self, line: str, cell: str) -> None:
        """%%ask [@Agent] [--bg] [--timeout S] [--out VAR]: send the cell to the team."""
        from aklab.lab.session import DEFAULT_TIMEOUT, format_message

        try:
            args = parse_ask(line)
            shell: Any = self.shell
            text = shell.var_expand(cell.strip(), depth=1) if shell is not None else cell.strip()
            lab = self._lab()
            seen_errors = len(lab.recorder.errors)
            start = lab.send(text, to=args.agent)
        except AklabError as exc:
            print(f"aklab: {exc}")
            return
        target = args.agent or lab.entry.name
        if args.bg:
            if args.out:
                shell.user_ns[args.out] = PendingReplies(lab, start)
            print(f"Sent to {target}; the team works in the background. %stop cancels.")
            return
        interrupted: list[str] | None = None
        try:
            if _in_kernel(shell):
                from IPython.display import display

                display(_LiveView(lab.panel("transcript")))  # type: ignore[no-untyped-call]
            done = lab.wait(args.timeout or DEFAULT_TIMEOUT)
        except KeyboardInterrupt:  # the notebook's stop button: cancel, keep what arrived
            interrupted = lab.interrupt()
            done = True
        replies = lab.inbox.messages[start:]
        if args.out:
            shell.user_ns[args.out] = replies
        for reply in replies:
            print(format_message(reply))
            print()
        for error in lab.errors(since=seen_errors):
            print(f"aklab: {error}")
        if interrupted is not None:
            print(f"aklab: interrupted; cancelled the runs of {', '.join(interrupted) or 'nobody'}")
        elif not done:
            print(f"aklab: the team is still working after {args.timeout or DEFAULT_TIMEOUT:g}s; %stop cancels")
        elif not replies:
            print("(no reply reached @Human)")

    @line_magic
    def stop(self, line: str) -> None:
        """%stop [@Agent]: cancel the runs in flight (of @Agent only, if given)."""
        try:
            stopped = self._lab().stop(parse_member(line, "%stop"))
        except AklabError as exc:
            print(f"aklab: {exc}")
            return
        print(f"Cancelling the run of {', '.join(stopped)}." if stopped else "Nothing is running.")

    @line_magic
    def usage(self, line: str) -> Any:
        """%usage [--by agent|run|model|request] [--live]: tokens and cost."""
        try:
            by, live = parse_usage(line)
            lab = self._lab()
            return lab.panel("usage") if live else lab.usage(by=by)
        except AklabError as exc:
            print(f"aklab: {exc}")
            return None

    @line_magic
    def team(self, line: str) -> None:
        """%team: the roster, with busy members marked."""
        lab = self._lab()
        busy = lab.recorder.busy
        for member in lab.team():
            print(f"{member.name} ({member.role}){' busy' if member.name in busy else ''}")

    @line_magic
    def transcript(self, line: str) -> None:
        """%transcript [@Agent]: every message sent (by or to @Agent)."""
        try:
            messages = self._lab().transcript(parse_member(line, "%transcript"))
        except AklabError as exc:
            print(f"aklab: {exc}")
            return
        for message in messages:
            sender = message.sender.name if message.sender else "?"
            recipient = message.recipient.name if message.recipient else "?"
            first = message.content.splitlines()[0] if message.content else ""
            print(f"{sender} → {recipient} ({message.type}): {first}")

    @line_magic
    def context(self, line: str) -> None:
        """%context [@Agent]: the context-update blocks each agent received."""
        try:
            updates = self._lab().context(parse_member(line, "%context"))
        except AklabError as exc:
            print(f"aklab: {exc}")
            return
        for update in updates:
            print(f"── {update.agent}")
            print(update.block)
            print()
        if not updates:
            print("(no context updates yet)")
