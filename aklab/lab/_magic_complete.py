"""Tab completion for the magics: ``@members``, subcommands and option values.

One IPython matcher (API v2, ``IPCompleter.custom_matchers``) that answers only on the
line of one of aklab's magics, after its name: ``%%ask @De<Tab>`` offers ``@Developer``
(members of the running lab and the roles it can hire), ``%aklab <Tab>`` the subcommands,
``%aklab team <Tab>`` the built-in teams, ``%aklab model <Tab>`` the providers (and after
``ollama:`` the models the Ollama server lists),
``%aklab resume|forget <Tab>`` the stored teams' short ids and names (read from the store,
never creating one), ``--format <Tab>`` the formats. When it has completions it suppresses the others (Jedi
would offer ``DeprecationWarning`` for ``@De``). It never starts a lab to complete.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from aklab.lab._magic_args import FORMATS, HELP_WORDS, MODEL_OPTIONS, SUBCOMMANDS, USAGE_BY

__all__ = ["aklab_matcher", "complete_words", "install_completer"]

_ASK_OPTIONS = ("--bg", "--timeout", "--out", "--format", *HELP_WORDS)
_LINE = re.compile(r"^\s*(%%?)(aklab|ask|stop|usage|team|transcript|context)\s+(.*)$")


def _members() -> list[str]:
    """``@Name`` of the running lab's agents and of the roles it can hire (never @Human)."""
    import aklab.lab

    lab = aklab.lab._lab
    names: list[str] = []
    if lab is None:  # no team yet: the roles of the one the first magic would start
        from aklab.lab._settings import settings
        from aklab.lab.teams import BUILTIN_TEAMS, builtin_team

        team = settings().default_team
        cards = builtin_team(team).cards if team in BUILTIN_TEAMS else []
    else:
        try:
            names += [a.name for a in lab.team() if not a.is_user_proxy]
        except Exception:  # a lab closing under us: offer the roles only
            pass
        cards = lab.spec.cards
    names += [str(card.config.name) for card in cards if str(card.config.name).startswith("@")]
    return list(dict.fromkeys(names))


def _providers() -> list[str]:
    from aklab.llm.profiles import FAMILY_MODULES

    return [f"{name}:" for name in FAMILY_MODULES]


def _stored_teams() -> list[str]:
    """Short ids (latest first) and names of the teams in the event store; none if there
    is no store here, it is off, or it cannot be read (a completion never fails)."""
    from aklab.lab.persist import store_off
    from aklab.store import open_store

    if store_off():
        return []
    try:
        with open_store(create=False, verify=False) as store:  # a Tab must not check the whole file
            teams = store.teams()
    except Exception:
        return []
    return list(dict.fromkeys([t.team_id[:8] for t in teams] + [t.name for t in teams]))


def _teams() -> list[str]:
    from aklab.lab.teams import BUILTIN_TEAMS

    return list(BUILTIN_TEAMS)


def complete_words(magic: str, cell: bool, before: list[str], fragment: str) -> list[str]:
    """What may follow ``before`` (the words typed after the magic's name), starting with ``fragment``."""
    previous = before[-1] if before else None
    options: list[str]
    if magic == "ask":
        if previous == "--format":
            options = list(FORMATS)
        elif previous in ("--timeout", "--out"):
            options = []
        elif fragment.startswith("-"):
            options = list(_ASK_OPTIONS)
        elif cell or not [w for w in before if not w.startswith("-")]:
            options = _members() if (fragment.startswith("@") or cell) else []
        else:
            options = []
    elif magic == "aklab":
        if not before:
            options = list(SUBCOMMANDS)
        elif before == ["team"]:
            options = _teams()
        elif before in (["resume"], ["forget"]):
            options = _stored_teams()
        elif before == ["model"] and fragment.startswith("ollama:"):
            from aklab.llm.preflight import ollama_models  # the server's own list, asked for at most 0.3 s

            options = [f"ollama:{name}" for name in ollama_models()]
        elif before == ["model"]:
            options = _providers()
        elif before[0] == "model" and previous == "--output-mode":
            from aklab.llm.config import OUTPUT_MODES

            options = list(OUTPUT_MODES)
        elif before[0] == "model" and fragment.startswith("-"):
            options = list(MODEL_OPTIONS)
        else:
            options = []
    elif magic == "usage":
        options = list(USAGE_BY) if previous == "--by" else ["--by", "--live", *HELP_WORDS]
    elif magic in ("transcript", "context"):
        named = any(not w.startswith("-") and (i == 0 or before[i - 1] != "--last") for i, w in enumerate(before))
        options = [] if previous == "--last" else [*([] if named else _members()), "--last", *HELP_WORDS]
    elif magic == "stop":
        options = _members() if not before else []
    else:
        options = []
    if magic != "aklab" or before != ["model"]:
        # a member can be typed without its @
        if fragment and not fragment.startswith("@") and any(o.startswith("@") for o in options):
            return [o[1:] for o in options if o[1:].startswith(fragment)]
    return [o for o in options if o.startswith(fragment)]


def aklab_matcher(context: Any) -> dict[str, Any]:
    """The IPython matcher (API v2): completions on the line of an aklab magic."""
    from IPython.core.completer import SimpleCompletion

    empty: dict[str, Any] = {"completions": [], "suppress": False}
    m = _LINE.match(context.text_until_cursor)
    if m is None:
        return empty
    prefix, magic, rest = m.groups()
    cell = prefix == "%%"
    if cell and (magic != "ask" or context.cursor_line != 0):
        return empty  # a cell magic's arguments are on the cell's first line
    words = rest.split(" ")
    fragment = words[-1]
    before = [w for w in words[:-1] if w]
    found = complete_words(magic, cell, before, fragment)
    return {
        "completions": [SimpleCompletion(text, type="param") for text in found],
        "matched_fragment": fragment,
        "suppress": bool(found),
    }


aklab_matcher.matcher_api_version = 2  # type: ignore[attr-defined]
aklab_matcher.matcher_identifier = "aklab.magics"  # type: ignore[attr-defined]
aklab_matcher.matcher_priority = 0  # type: ignore[attr-defined]


def install_completer(shell: Any) -> None:
    """Add the matcher to the shell's completer (once)."""
    completer = getattr(shell, "Completer", None)
    if completer is None:
        return
    matchers: list[Callable[..., Any]] = completer.custom_matchers
    if aklab_matcher not in matchers:
        matchers.append(aklab_matcher)
