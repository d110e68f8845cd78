"""Argument parsing for the magics, apart from the work (each ``parse_*`` is testable alone).

One member-name rule everywhere: ``@Developer`` and ``Developer`` name the same member
(as ``lab.member`` / ``lab.context`` accept). Only the one-line ``%ask`` needs the ``@``,
since the words after it are the question.
"""

from __future__ import annotations

import argparse
import math
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aklab.errors import AklabError

if TYPE_CHECKING:
    from aklab.llm import ModelConfig

__all__ = [
    "FORMATS",
    "HELP_WORDS",
    "SUBCOMMANDS",
    "AskArgs",
    "UsageError",
    "expand",
    "member_name",
    "parse_aklab",
    "parse_ask",
    "parse_ask_line",
    "parse_member",
    "parse_member_last",
    "parse_model",
    "parse_usage",
    "wants_help",
]

FORMATS = ("markdown", "text", "json")
USAGE_BY = ("agent", "run", "model", "ask", "request")
SUBCOMMANDS = ("team", "model", "dashboard", "list", "teams", "resume", "forget", "recover", "batch", "help")
HELP_WORDS = ("-h", "--help")


class UsageError(AklabError):
    """Bad magic arguments; the message ends with the usage line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # never sys.exit inside a kernel
        raise UsageError(f"{message}\nusage: {self.usage_line()}")

    def usage_line(self) -> str:
        return self.format_usage().removeprefix("usage: ").strip()


def wants_help(line: str) -> bool:
    """``-h`` or ``--help`` among the words of a magic's line."""
    try:
        words = shlex.split(line)
    except ValueError:
        words = line.split()
    return any(w in HELP_WORDS for w in words)


def member_name(value: str) -> str:
    """``Developer`` or ``@Developer`` -> ``@Developer`` (refusing what cannot be a name)."""
    name = value.removeprefix("@")
    if not name or not re.fullmatch(r"[\w.-]+", name):
        raise UsageError(f"expected a member name like @Developer, got {value!r}")
    return f"@{name}"


@dataclass
class AskArgs:
    agent: str | None
    bg: bool
    timeout: float | None
    out: str | None
    format: str | None = None


def _ask_parser(prog: str) -> _Parser:
    p = _Parser(prog=prog, add_help=False)
    p.add_argument("agent", nargs="?")
    p.add_argument("--bg", action="store_true")
    p.add_argument("--timeout", type=_seconds, default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--format", choices=FORMATS, default=None)
    return p


def parse_ask(line: str) -> AskArgs:
    """``%%ask [@Agent] [--bg] [--timeout S] [--out VAR] [--format markdown|text|json]``."""
    p = _ask_parser("%%ask")
    ns = p.parse_args(shlex.split(line))
    if ns.out is not None and not ns.out.isidentifier():
        raise UsageError(f"--out needs a variable name, got {ns.out!r}\nusage: {p.usage_line()}")
    agent = member_name(ns.agent) if ns.agent is not None else None
    return AskArgs(agent, ns.bg, ns.timeout, ns.out, ns.format)


_VALUED = {"--timeout", "--out", "--format"}
_WORD = re.compile(r"\s*(\S+)")


def parse_ask_line(line: str) -> tuple[AskArgs, str]:
    """``%ask [options] [@Agent] question...``: the leading options and ``@Agent``, then the
    question (the rest of the line, as typed)."""
    words: list[str] = []
    pos = 0
    agent_seen = False
    while m := _WORD.match(line, pos):
        word = m.group(1)
        if word in _VALUED:
            value = _WORD.match(line, m.end())
            if value is None:
                break  # let the parser say the value is missing
            words += [word, value.group(1)]
            pos = value.end()
        elif word == "--bg" or (word.startswith("@") and not agent_seen):
            agent_seen = agent_seen or word.startswith("@")
            words.append(word)
            pos = m.end()
        else:
            break
    p = _ask_parser("%ask")
    ns = p.parse_args(words)
    if ns.out is not None and not ns.out.isidentifier():
        raise UsageError(f"--out needs a variable name, got {ns.out!r}\nusage: {p.usage_line()}")
    agent = member_name(ns.agent) if ns.agent is not None else None
    return AskArgs(agent, ns.bg, ns.timeout, ns.out, ns.format), line[pos:].strip()


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
    p.add_argument("--by", choices=USAGE_BY, default="agent")
    p.add_argument("--live", action="store_true")
    ns = p.parse_args(shlex.split(line))
    return str(ns.by), bool(ns.live)


def parse_member_last(line: str, prog: str) -> tuple[str | None, int | None]:
    """``%transcript`` / ``%context [@Agent] [--last N]``: the member (``@Name``) and N (None: not given)."""
    p = _Parser(prog=prog, add_help=False)
    p.add_argument("agent", nargs="?")
    p.add_argument("--last", type=_positive, metavar="N")
    ns = p.parse_args(shlex.split(line))
    return (member_name(ns.agent) if ns.agent is not None else None), ns.last


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number of messages >= 1, not {text!r}")
    return value


def parse_member(line: str, prog: str) -> str | None:
    """An optional member, ``@Name`` or ``Name``, normalised to ``@Name``."""
    p = _Parser(prog=prog, add_help=False)
    p.add_argument("agent", nargs="?")
    agent = p.parse_args(shlex.split(line)).agent
    return member_name(agent) if agent is not None else None


AKLAB_USAGE = (
    "%aklab [team NAME|PATH | model provider:model [options] | dashboard | list | teams | resume [TEAM] [--model SPEC]"
    " | forget TEAM"
    " | recover | batch FILE [options] | help]"
)


def parse_aklab(line: str) -> tuple[str, str | None]:
    """``("status", None)``, ``("team", NAME)``, ``("model", SPEC_AND_OPTIONS)``,
    ``("dashboard", None)``, ``("list", None)``, ``("teams", None or "--all")``, ``("resume", TEAM or None)``,
    ``("forget", TEAM)``, ``("recover", None)``, ``("help", None)`` (every magic) or
    ``("usage", None)`` (``-h``: this magic's own help).

    The model's words are left for :func:`parse_model`.
    """
    words = shlex.split(line)
    if not words:
        return "status", None
    if words[0] == "help":
        return "help", None
    if words[0] in HELP_WORDS:
        return "usage", None
    if words[0] == "team" and len(words) == 2:
        return words[0], words[1]
    if words[0] == "model" and len(words) >= 2:
        return "model", shlex.join(words[1:])
    if words in (["dashboard"], ["list"], ["teams"], ["resume"], ["recover"]):
        return words[0], None
    if words == ["teams", "--all"]:
        return "teams", "--all"
    if words == ["forget"]:
        raise UsageError("%aklab forget TEAM: name the team to delete, by id or name (%aklab teams lists them)")
    if words[0] == "forget" and len(words) == 2:
        return words[0], words[1]
    if words[0] == "resume":
        parse_resume(shlex.join(words[1:]))  # a mistake is told here, as for the other actions
        return "resume", shlex.join(words[1:])
    if words[0] == "batch" and len(words) >= 2:
        return "batch", shlex.join(words[1:])
    raise UsageError(f"unknown arguments {line.strip()!r}\nusage: {AKLAB_USAGE}")


def parse_resume(rest: str) -> tuple[str | None, str | None]:
    """The words after ``%aklab resume`` -> (team or None, model spec or None):
    ``[TEAM] [--model provider:model]``."""
    words = shlex.split(rest)
    team: str | None = None
    model: str | None = None
    while words:
        word = words.pop(0)
        if word == "--model":
            if not words or words[0].startswith("-"):
                raise UsageError("%aklab resume [TEAM] --model provider:model: name the model to resume the team on")
            model = words.pop(0)
        elif word.startswith("-") or team is not None:
            raise UsageError(
                f"unknown arguments {rest.strip()!r}\nusage: %aklab resume [TEAM] [--model provider:model]"
            )
        else:
            team = word
    return team, model


_MODEL_USAGE = (
    "%(prog)s provider:model [--base-url URL] [--api-key-env VAR] [--temperature T] [--max-tokens N]"
    " [--timeout S] [--retries N] [--output-mode auto|tool|native|prompted|grammar|text] [--context-length N]"
)
MODEL_OPTIONS = (
    "--base-url",
    "--api-key-env",
    "--temperature",
    "--max-tokens",
    "--timeout",
    "--retries",
    "--output-mode",
    "--context-length",
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


_BRACES = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(text: str, namespace: Mapping[str, Any]) -> str:
    """Replace ``{name}`` by ``str(namespace[name])`` where ``name`` is defined; ``{{`` and
    ``}}`` give literal braces; every other brace (JSON, code, an undefined name) stays."""

    def one(m: re.Match[str]) -> str:
        whole, name = m.group(0), m.group(1)
        if name is None:
            return whole[0]
        return str(namespace[name]) if name in namespace else whole

    return _BRACES.sub(one, text)


@dataclass
class BatchArgs:
    path: str
    engine: str
    concurrency: int
    retries: int
    timeout: float
    team: str | None
    model: str | None


def parse_batch(line: str) -> BatchArgs:
    """``FILE [--engine local|process|ray] [--concurrency N] [--retries N] [--timeout S] [--team T] [--model M]``."""
    p = _Parser(prog="%aklab batch", add_help=False)
    p.add_argument("path")
    p.add_argument("--engine", choices=("local", "process", "ray"), default="local")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--retries", type=int, default=0)
    p.add_argument("--timeout", type=_seconds, default=300.0)
    p.add_argument("--team", default=None)
    p.add_argument("--model", default=None)
    ns = p.parse_args(shlex.split(line))
    return BatchArgs(ns.path, ns.engine, ns.concurrency, ns.retries, ns.timeout, ns.team, ns.model)
