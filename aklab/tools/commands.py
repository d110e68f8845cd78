"""CommandRegistry: one table of commands, reached as text (``/name args``) or in code.

Choices where the reference is loose:

- Arguments are ``shlex``-split. ``key=value`` binds a keyword only when ``key`` is a
  parameter of the command; otherwise the token stays a positional value.
- Values are coerced to the annotated type (``int``, ``float``, ``bool``, ``str``).
- An unknown command raises :class:`CommandNotRecognized` (so the caller can let the
  text through to the model); any failure once the command is known (bad arguments,
  the body raising) comes back as a result string starting with ``Error``.
- A command returning ``None`` means "handled, nothing to say": ``dispatch`` returns None.
- ``/help`` (or ``/?``) alone, when no card brings a ``help`` command, is answered by
  :meth:`CommandRegistry.help_text`, the public commands with their arguments (an
  optional one in brackets) and first docstring lines; the agent does not record it for
  its model, since it changes nothing.
- A command whose name starts with ``_`` is private: agent code reaches it through
  ``has()`` / ``callable()``, but ``dispatch`` does not recognize it and ``names()`` /
  ``descriptors()`` do not list it, so no human or model can run it as ``/_name``.
"""

from __future__ import annotations

import inspect
import shlex
from collections.abc import Callable
from typing import Any, get_type_hints

from pydantic import BaseModel, field_validator

from aklab.errors import AklabError
from aklab.tools._signature import SignatureCache

__all__ = ["CommandDescriptor", "CommandNotRecognized", "CommandRegistry", "CommandsAnnouncedEvent"]


class CommandNotRecognized(AklabError):
    """The text does not start with a known ``/command``."""


class CommandDescriptor(BaseModel):
    name: str
    description: str
    args: dict[str, str]
    card: str


class CommandsAnnouncedEvent(BaseModel):
    """Emitted once when an agent starts: the commands it obeys."""

    agent: str
    commands: list[CommandDescriptor]

    @field_validator("agent", mode="before")
    @classmethod
    def _agent_name(cls, value: Any) -> Any:
        """An agent's address (as the reference passes ``self.myAddress``) stands for its name."""
        name = getattr(value, "name", None)
        return name if isinstance(name, str) and not isinstance(value, str) else value


def _coerce(value: str, annotation: Any) -> Any:
    if annotation is bool:
        if value.lower() in ("1", "true", "yes", "on"):
            return True
        if value.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected true/false, got {value!r}")
    if annotation in (int, float):
        return annotation(value)
    return value


def render_result(result: Any) -> str:
    """A command's native value as text for a human."""
    if isinstance(result, str):
        return result
    if isinstance(result, list | tuple):
        return "\n".join(render_result(r) for r in result) or "(none)"
    name = getattr(result, "name", None)
    if isinstance(name, str) and hasattr(result, "role"):
        return f"{name} ({result.role})"
    return str(result)


class CommandRegistry:
    def __init__(self) -> None:
        self._commands: dict[str, tuple[Callable[..., Any], str]] = {}

    def register(self, command: Callable[..., Any], *, card: str = "builtin") -> None:
        self._commands[command.__name__] = (command, card)

    def has(self, name: str) -> bool:
        return name in self._commands

    def callable(self, name: str) -> Callable[..., Any]:
        """The command itself, returning its native value."""
        try:
            return self._commands[name][0]
        except KeyError:
            raise CommandNotRecognized(f"no command {name!r}") from None

    def names(self) -> list[str]:
        """The public commands (those reachable as ``/name``)."""
        return sorted(name for name in self._commands if _public(name))

    def descriptors(self) -> list[CommandDescriptor]:
        out = []
        for name, (command, card) in sorted(self._commands.items()):
            if not _public(name):
                continue
            description, args = _described.get(command, _describe)
            out.append(CommandDescriptor(name=name, description=description, args=dict(args), card=card))
        return out

    def asks_for_help(self, text: str) -> bool:
        """Whether ``text`` is a bare ``/help`` or ``/?`` that no card's command answers."""
        return text.strip() in ("/help", "/?") and "help" not in self._commands

    def help_text(self, agent: str) -> str:
        """What ``/help`` answers: each public command as it is typed, and what it does."""
        lines = [f"Commands {agent} obeys, each sent as a message of its own (/name arguments):"]
        for descriptor in self.descriptors():
            params = inspect.signature(self._commands[descriptor.name][0]).parameters
            args = " ".join(_usage(params[arg]) for arg in descriptor.args if arg in params)
            usage = f"/{descriptor.name} {args}" if args else f"/{descriptor.name}"
            lines.append(f"{usage} — {descriptor.description}" if descriptor.description else usage)
        lines.append("Any other text starting with / goes to the model as it is.")
        return "\n".join(lines)

    def dispatch(self, text: str) -> str | None:
        """Run ``/name args`` and render the result; see the module docstring."""
        if not text.startswith("/"):
            raise CommandNotRecognized("not a command")
        head = text[1:].split(maxsplit=1)
        name = head[0] if head else ""
        if name not in self._commands or not _public(name):
            raise CommandNotRecognized(f"no command {name!r}")
        command, _card = self._commands[name]
        try:
            tokens = shlex.split(text[1:])[1:]
            args, kwargs = self._bind(command, tokens)
            result = command(*args, **kwargs)
        except Exception as exc:
            return f"Error in /{name}: {exc}"
        return None if result is None else render_result(result)

    @staticmethod
    def _bind(command: Callable[..., Any], tokens: list[str]) -> tuple[list[Any], dict[str, Any]]:
        sig = inspect.signature(command)
        hints = _hints(command)
        names = list(sig.parameters)
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for token in tokens:
            key, eq, value = token.partition("=")
            if eq and key in sig.parameters:
                kwargs[key] = _coerce(value, hints.get(key))
            else:
                position = len(args)
                target = names[position] if position < len(names) else None
                args.append(_coerce(token, hints.get(target)) if target else token)
        try:
            sig.bind(*args, **kwargs)
        except TypeError as exc:
            usage = " ".join(
                f"[{p}]" if sig.parameters[p].default is not inspect.Parameter.empty else f"<{p}>" for p in names
            )
            raise ValueError(f"{exc}; usage: /{command.__name__} {usage}".rstrip()) from None
        return args, kwargs


def _usage(param: inspect.Parameter) -> str:
    """An argument as ``/help`` shows it: required, ``[optional]``, or ``[any ...]`` for ``*args``."""
    if param.kind is inspect.Parameter.VAR_POSITIONAL:
        return f"[{param.name} ...]"
    return param.name if param.default is inspect.Parameter.empty else f"[{param.name}]"


def _public(name: str) -> bool:
    return not name.startswith("_")


def _describe(command: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """A command's first docstring line and its arguments' type names (built once per command code)."""
    hints = _hints(command)
    params = inspect.signature(command).parameters
    description = (inspect.getdoc(command) or "").split("\n")[0]
    return description, {p: getattr(hints.get(p), "__name__", "str") for p in params}


_described: SignatureCache[tuple[str, dict[str, str]]] = SignatureCache()


def _hints(command: Callable[..., Any]) -> dict[str, Any]:
    try:
        return get_type_hints(command)
    except Exception:
        return {}
