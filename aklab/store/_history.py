"""history(): tidy DataFrames of every team and session in a store.

``usage`` has the columns of ``lab.usage(by="request")`` (``aklab.lab.frames.REQUEST_COLUMNS``)
after ``team_id`` and ``ask_id``; ``runs`` sums it per run; ``asks`` per ask, with the
question that started it, the agents that made its requests (``agents``: ``"@Manager,
@Developer"``, in the order of their first request, as in ``lab.usage(by="ask")``) and
whether it was ``ok``: False when a ``Notice`` reached the human in it (an agent could not
answer, a run was interrupted, a limit was hit, an answer was cut off, a message was not
delivered) or it was stopped or tripped the team guard (``AskCancelledEvent``), as
``aklab.lab.frames`` defines it. An ask the store shows still at work (no notice or stop
in it, and a message of it to a member not handled to its end: a reply to the person does
not end it, since the team may go on working after it) is <NA> while a lab runs its team,
and False once none does (its kernel died, or its lab closed, before it ended: it did not
run to its end, and only a resume takes it up again); see ``aklab.store._ask_ends`` for
how that is read without reading every handling's end. A team stored without the ends of
its handlings (a ``StoreSubscriber`` attached by hand to a bare system, not through a
``Lab``) cannot tell whether work is pending: an ask of it without a reply is <NA>
(unknown, whether or not it still runs), one with a reply True. An ask with no model
request (queued, its first request in flight, or a command answered without a model) has
its row from its question on, with zero requests, tokens and cost, as in
``lab.usage(by="ask")``. ``first_at`` and ``last_at`` are its first and last record (its
question; its last message or model request, after its reply if the team went on).
``messages`` has one row per message sent (and delivered, or still to be). With ``agent``
or ``model`` filters, figures count only the matching requests (an ask's row then says
what that agent or model cost within it), while ``ok`` is the whole ask's. Times are UTC;
``since``/``until`` select records made in ``[since, until)``; ``ok`` is still the whole
ask's (a notice, a stop or work after ``until`` counts).

pandas is imported when ``history`` is called, not when ``aklab.store`` is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from aklab._text import counted
from aklab.errors import ConfigError
from aklab.store._ask_ends import at_work, failed_outside, message_row
from aklab.store._ask_ends import fields as _fields
from aklab.store._base import EventStore, StoredRecord, TeamInfo, matching_teams, to_utc
from aklab.store._progress import ReadProgress

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ASK_COLUMNS", "MESSAGE_COLUMNS", "RUN_COLUMNS", "USAGE_COLUMNS", "History", "history"]

_REQUEST = [
    "run_id",
    "agent",
    "role",
    "model",
    "requests",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cost_usd",
    "started_at",
    "duration_s",
    "estimated",
    "cost_source",
    "ok",
]
#: ``lab.usage(by="request")``'s columns after team_id and ask_id.
USAGE_COLUMNS = ["team_id", "ask_id", *_REQUEST]
RUN_COLUMNS = [
    "team_id",
    "ask_id",
    "run_id",
    "agent",
    "role",
    "model",
    "requests",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cost_usd",
    "started_at",
    "duration_s",
    "ok",
]
ASK_COLUMNS = [
    "ask_id",
    "team_id",
    "team",
    "first_at",
    "last_at",
    "question",
    "agents",
    "models",
    "runs",
    "requests",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cost_usd",
    "ok",
]
MESSAGE_COLUMNS = [
    "seq",
    "team_id",
    "ask_id",
    "created_at",
    "sender",
    "recipient",
    "type",
    "content",
    "message_id",
    "message_class",
]
_TOKENS = ["input_tokens", "output_tokens", "total_tokens"]
#: ``asks``' columns that are not strings, with their dtypes (for an empty frame).
_ASK_DTYPES = {
    "first_at": "datetime64[us, UTC]",
    "last_at": "datetime64[us, UTC]",
    "runs": "int64",
    "requests": "int64",
    **dict.fromkeys(_TOKENS, "int64"),  # nothing unknown (as lab.usage()); zero before any request
    "cost_usd": "Float64",
    "ok": "boolean",  # <NA> while an ask is at work, as in lab.usage(by="ask")
}


@dataclass(frozen=True)
class History:
    """Four frames from the store: ``asks``, ``runs``, ``usage``, ``messages``."""

    asks: pd.DataFrame
    runs: pd.DataFrame
    usage: pd.DataFrame
    messages: pd.DataFrame

    def __repr__(self) -> str:
        return (
            f"<History: {counted(len(self.asks), 'ask')}, {counted(len(self.runs), 'run')}, "
            f"{counted(len(self.usage), 'request')}, {counted(len(self.messages), 'message')}>"
        )


def history(
    store: EventStore,
    *,
    team: str | None = None,
    agent: str | None = None,
    model: str | None = None,
    since: datetime | date | str | None = None,
    until: datetime | date | str | None = None,
) -> History:
    """Asks, runs, usage and messages of every team in ``store`` (or of ``team``: its id, an
    id prefix such as the 8 characters ``%aklab teams`` shows, or its name: every team of
    that name), optionally only ``agent``'s (``@Name`` or ``Name``), only ``model``'s, and
    only what was recorded in ``[since, until)``. A ``team`` that names no stored team
    raises ``ConfigError`` listing some. An ``agent`` written in another case ("manager"), or
    a ``model`` without its provider ("gpt-4.1" for "openai:gpt-4.1"), is the one recorded
    when exactly one recorded name matches it so."""
    since_utc = to_utc(since) if since is not None else None
    until_utc = to_utc(until) if until is not None else None
    teams = store.teams()
    names = {t.team_id: t.name for t in teams}
    team_ids: list[str | None] = [None]
    if team is not None:
        team_ids = [*_team_ids(store, teams, team)]
    read = _read(store, team_ids, since_utc, until_utc)
    usage_rows, message_rows, failed = read.usage, read.messages, read.failed
    every_message = message_rows
    working = at_work(store, _whole_asks(message_rows, read.whole), failed, read.unsent)
    who = (
        None
        if agent is None
        else _named(agent if agent.startswith("@") else f"@{agent}", _agents(usage_rows, message_rows))
    )
    model = None if model is None else _named(model, {u["model"] for u in usage_rows}, suffix=True)
    usage_rows = [
        u for u in usage_rows if (who is None or u["agent"] == who) and (model is None or u["model"] == model)
    ]
    if who is not None:
        message_rows = [m for m in message_rows if who in (m["sender"], m["recipient"])]
    questions = {m["message_id"]: m["content"] for m in message_rows if m["message_id"] == m["ask_id"]}
    if who is not None or model is not None:  # the question of an ask the filtered agent took part in
        wanted = {u["ask_id"] for u in usage_rows} | {m["ask_id"] for m in message_rows}
        questions.update({m["message_id"]: m["content"] for m in every_message if m["message_id"] in wanted})
    usage = _usage_frame(usage_rows)
    messages = _messages_frame(message_rows)
    if model is not None:  # messages carry no model: keep those of the asks that used it
        messages = messages[messages["ask_id"].isin(set(usage["ask_id"]))].reset_index(drop=True)
    runs = _runs_frame(usage)
    recorded = [u["recorded_at"] for u in usage_rows]  # when each request's record was made: after it
    asks = _asks_frame(usage, recorded, messages, questions, names, failed, working)
    return History(asks=asks, runs=runs, usage=usage, messages=messages)


def _agents(usage_rows: list[dict[str, Any]], message_rows: list[dict[str, Any]]) -> set[str]:
    found = {u["agent"] for u in usage_rows}
    for m in message_rows:
        found.update((m["sender"], m["recipient"]))
    return {a for a in found if isinstance(a, str)}


def _named(wanted: str, recorded: set[str], *, suffix: bool = False) -> str:
    """``wanted`` if it was recorded; else the one recorded name it matches but for case (or,
    with ``suffix``, the one ``provider:wanted``); else ``wanted`` (which then matches nothing)."""
    if wanted in recorded:
        return wanted
    folded = wanted.casefold()
    found = {r for r in recorded if r.casefold() == folded}
    if not found and suffix and ":" not in wanted:
        found = {r for r in recorded if r.split(":", 1)[-1].casefold() == folded}
    return found.pop() if len(found) == 1 else wanted


#: Records read per query. Each page becomes frame rows before the next is read, so a large
#: store is never held whole as records (with their payloads, about 3 KB each).
PAGE = 20_000
#: A read that takes longer than this says on stderr how far it has got, page by page.
PROGRESS_AFTER_S = 2.0
_KINDS = ("SentMessage", "LlmUsageEvent", "AskCancelledEvent")


def _team_ids(store: EventStore, teams: list[TeamInfo], team: str) -> list[str]:
    """The ids of the teams ``team`` names (``matching_teams``), else the id itself if
    records are stored under it (a team whose row another process deleted while this one
    went on appending to it)."""
    try:
        return [t.team_id for t in matching_teams(teams, team, store.location)]
    except ConfigError:
        if team and store.records(team, limit=1):
            return [team]
        raise


@dataclass
class _Read:
    usage: list[dict[str, Any]]
    """The usage rows, in the order stored."""
    messages: list[dict[str, Any]]
    """The message rows, in the order stored, without those never delivered."""
    failed: set[str]
    """The asks that were not ok (a ``Notice`` delivered, or stopped or tripped)."""
    unsent: set[str]
    """The ids of the messages a crashed handling never delivered (``UnsentMessagesEvent``)."""
    whole: list[dict[str, Any]]
    """In a time window: the messages of its asks that are not failed, read whole."""


def _read(store: EventStore, team_ids: list[str | None], since: datetime | None, until: datetime | None) -> _Read:
    """``team_ids``' records in ``[since, until)`` as rows (see ``_Read``). Read newest
    first, a page at a time; in a time window, each of its asks is read whole too."""
    found: list[tuple[int, bool, dict[str, Any]]] = []
    unsent: set[str] = set()
    failed: set[str] = set()
    kinds = [*_KINDS, "UnsentMessagesEvent"]
    if since is not None or until is not None:  # recorded after the message, maybe outside the times
        kinds = list(_KINDS)
        for team_id in team_ids:
            for r in store.records(team_id, kinds=["UnsentMessagesEvent"]):
                unsent.update(_fields(r.payload, "event").get("message_ids") or ())
    progress = ReadProgress("aklab.history", PROGRESS_AFTER_S)
    for team_id in team_ids:
        before: int | None = None
        while True:
            page = store.records(team_id, since=since, until=until, kinds=kinds, before=before, limit=PAGE, newest=True)
            for r in page:
                if r.event_type == "LlmUsageEvent":
                    found.append((r.seq, True, _usage_row(r)))
                elif r.kind == "SentMessage":
                    found.append((r.seq, False, message_row(r)))
                elif r.event_type == "AskCancelledEvent" and r.ask_id:
                    failed.add(r.ask_id)
                elif r.event_type == "UnsentMessagesEvent":
                    unsent.update(_fields(r.payload, "event").get("message_ids") or ())
            if len(page) < PAGE:
                break
            before = page[0].seq  # the page is oldest first: the next one ends before it
            progress.update(len(found))
    progress.done(len(found))
    found.sort(key=lambda f: f[0])
    usage_rows = [row for _, usage, row in found if usage]
    message_rows = [row for _, usage, row in found if not usage and row["message_id"] not in unsent]
    failed.update(m["ask_id"] for m in message_rows if m["message_class"] == "Notice" and m["ask_id"])
    whole: list[dict[str, Any]] = []
    if since is not None or until is not None:
        outside, whole = failed_outside(store, usage_rows, message_rows, failed, unsent)
        failed |= outside
    return _Read(usage_rows, message_rows, failed, unsent, whole)


def _whole_asks(message_rows: list[dict[str, Any]], whole: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The window's messages and those of its asks read whole, once each, in seq order."""
    if not whole:
        return message_rows
    by_seq = {m["seq"]: m for m in message_rows}
    by_seq.update((m["seq"], m) for m in whole)
    return [by_seq[seq] for seq in sorted(by_seq)]


def _usage_row(record: StoredRecord) -> dict[str, Any]:
    e = _fields(record.payload, "event")
    tokens_in, tokens_out = e.get("input_tokens"), e.get("output_tokens")
    unknown = tokens_in is None and tokens_out is None
    started = e.get("started_at")
    return {
        "team_id": record.team_id,
        "ask_id": e.get("ask_id") or record.ask_id,
        "run_id": e.get("run_id"),
        "agent": e.get("agent"),
        "role": e.get("role", ""),
        "model": e.get("model"),
        "requests": e.get("requests", 1),
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "total_tokens": None if unknown else (tokens_in or 0) + (tokens_out or 0),
        "cost_usd": e.get("cost_usd"),
        "started_at": datetime.fromisoformat(started) if isinstance(started, str) else record.created_at,
        "duration_s": e.get("duration_s", 0.0),
        "estimated": bool(e.get("estimated", False)),
        "cost_source": e.get("cost_source"),
        "ok": bool(e.get("ok", True)),
        "recorded_at": record.created_at,  # not a column
    }


def _usage_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    import pandas as pd

    frame = pd.DataFrame(rows, columns=USAGE_COLUMNS)
    frame["requests"] = frame["requests"].astype("int64")
    for c in _TOKENS:  # unknown token counts stay <NA>, never a made-up 0 (as lab.usage())
        frame[c] = frame[c].astype("Int64" if frame[c].isna().any() else "int64")
    frame["estimated"] = frame["estimated"].astype("bool")
    frame["ok"] = frame["ok"].astype("bool")
    frame["cost_usd"] = frame["cost_usd"].astype("Float64")
    frame["duration_s"] = frame["duration_s"].astype("float64")
    frame["started_at"] = pd.to_datetime(frame["started_at"], utc=True).dt.as_unit("us")
    return frame


def _sum_cost(frame: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Summed cost per group, <NA> where any request could not be priced."""
    grouped = frame.groupby(keys, sort=False, dropna=False)["cost_usd"]
    unpriced = frame["cost_usd"].isna().groupby([frame[k] for k in keys], sort=False, dropna=False).any()
    return grouped.sum().mask(unpriced)


def _runs_frame(usage: pd.DataFrame) -> pd.DataFrame:
    keys = ["team_id", "ask_id", "run_id", "agent", "role", "model"]
    if usage.empty:  # typed as when there are rows: .dt, sums and comparisons still work
        return usage[RUN_COLUMNS].copy()
    grouped = usage.groupby(keys, sort=False, dropna=False)
    out = grouped[["requests", *_TOKENS]].sum(min_count=1)  # all unknown: <NA>, not 0
    out["cost_usd"] = _sum_cost(usage, keys)
    out["started_at"] = grouped["started_at"].min()
    out["duration_s"] = grouped["duration_s"].sum()
    out["ok"] = grouped["ok"].all()
    return out.reset_index()[RUN_COLUMNS]


def _messages_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    import pandas as pd

    frame = pd.DataFrame(rows, columns=MESSAGE_COLUMNS)
    frame["seq"] = frame["seq"].astype("int64")
    frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True).dt.as_unit("us")
    return frame


def _asks_frame(
    usage: pd.DataFrame,
    recorded: list[datetime],
    messages: pd.DataFrame,
    questions: dict[str | None, Any],
    names: dict[str, str],
    failed: set[str],
    at_work: dict[str, bool | None],
) -> pd.DataFrame:
    import pandas as pd

    recorded_at = pd.to_datetime(pd.Series(recorded, index=usage.index, dtype="object"), utc=True).dt.as_unit("us")
    times = pd.concat(  # an ask's end is its last record: a request after its reply too
        [
            pd.DataFrame({"ask_id": messages["ask_id"], "team_id": messages["team_id"], "at": messages["created_at"]}),
            pd.DataFrame({"ask_id": usage["ask_id"], "team_id": usage["team_id"], "at": usage["started_at"]}),
            pd.DataFrame({"ask_id": usage["ask_id"], "team_id": usage["team_id"], "at": recorded_at}),
        ],
        ignore_index=True,
    )
    times = times[times["ask_id"].notna()]
    if times.empty:  # typed as when there are rows: .dt, sums and comparisons still work
        return pd.DataFrame({c: pd.Series(dtype=_ASK_DTYPES.get(c, "str")) for c in ASK_COLUMNS})
    spans = times.groupby("ask_id", sort=False)
    asks = pd.DataFrame(
        {"team_id": spans["team_id"].first(), "first_at": spans["at"].min(), "last_at": spans["at"].max()}
    ).reset_index()
    asks["team"] = asks["team_id"].map(lambda t: names.get(t, ""))
    asks["question"] = asks["ask_id"].map(lambda a: questions.get(a))
    asked = usage[usage["ask_id"].notna()]
    if asked.empty:  # the columns all the same, for the asks of messages alone
        numbers = {c: pd.Series(dtype="float64") for c in ["requests", *_TOKENS, "cost_usd", "runs"]}
        sums = pd.DataFrame({**numbers, "agents": pd.Series(dtype="object"), "models": pd.Series(dtype="object")})
        sums.index.name = "ask_id"
    else:
        grouped = asked.groupby("ask_id", sort=False)
        sums = grouped[["requests", *_TOKENS]].sum(min_count=1)
        sums["cost_usd"] = _sum_cost(asked, ["ask_id"])
        sums["agents"] = grouped["agent"].agg(lambda a: ", ".join(dict.fromkeys(x for x in a if isinstance(x, str))))
        sums["models"] = grouped["model"].agg(lambda m: ", ".join(sorted({str(x) for x in m if isinstance(x, str)})))
        sums["runs"] = grouped["run_id"].nunique()
    asks = asks.merge(sums, how="left", left_on="ask_id", right_index=True)
    none_yet = ~asks["ask_id"].isin(sums.index)  # no model request (yet): zero, as in lab.usage(by="ask")
    for c in ["requests", "runs"]:
        asks[c] = asks[c].fillna(0).astype("int64")
    for c in _TOKENS:  # unknown counts stay <NA>: Int64 then, else int64, as in lab.usage()
        tokens = asks[c].astype("Int64").mask(none_yet, 0)
        asks[c] = tokens.astype("Int64" if tokens.isna().any() else "int64")
    asks["cost_usd"] = asks["cost_usd"].astype("Float64").mask(none_yet, 0.0)
    for c in ["agents", "models"]:  # "" when no model was asked
        asks[c] = asks[c].fillna("").astype("str")
    # at work: <NA> while a lab runs it (or the store cannot tell), False once none does
    ended = [a for a, running in at_work.items() if running is False]
    ok = (~asks["ask_id"].isin([*failed, *ended])).astype("boolean")
    asks["ok"] = ok.mask(asks["ask_id"].isin([a for a, running in at_work.items() if running is not False]))
    asks = asks.sort_values("first_at", kind="stable").reset_index(drop=True)
    return asks[ASK_COLUMNS]
