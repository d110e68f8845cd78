"""Usage as tidy pandas DataFrames with a fixed column order.

An ask's ``ok`` (here by ask, and in ``aklab.history().asks``) is False when aklab told the
human something went wrong in it (a ``Notice``: an agent could not answer, a run was
interrupted, a usage limit or the team guard was hit, an answer was cut off, a message was
not delivered) or when it was stopped or tripped the team guard (``AskCancelledEvent``);
<NA> while it is still running (the team has work of it queued or in a run: asked, it may
yet fail; a reply to the human does not end it while the team goes on working on it);
True otherwise. It says the ask ran to its end, not that the answer is right (a
batch's check says that). A failed request (``ok`` False by request) that the ask got past,
with no notice (a handling done again after a resume), leaves it True. Its dtype is pandas'
nullable ``"boolean"`` always, so ``asks[asks.ok]`` and ``asks[~asks.ok]`` both leave out
an ask still running.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, Literal

from aklab.errors import ConfigError
from aklab.llm import LlmUsageEvent

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ASK_COLUMNS", "REQUEST_COLUMNS", "USAGE_COLUMNS", "estimate_cost", "usage_frame"]

By = Literal["agent", "run", "model", "ask", "request"]

#: Every usage frame has these columns, in this order (grouping drops the ones that
#: no longer apply: by agent has no run_id, started_at or duration_s).
USAGE_COLUMNS = [
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
]
#: Per-request frames (``by="request"``) also say how each row's figures were obtained.
REQUEST_COLUMNS = [*USAGE_COLUMNS, "estimated", "cost_source", "ok"]
#: Per-ask frames (``by="ask"``): one row per human message, from the moment it is sent (a
#: lab's; zero requests, tokens and cost until its first request is counted). ``agents``
#: names every agent that made a model request for it (``"@Manager, @Developer"``, in the
#: order of their first request), as ``aklab.history().asks`` does; ``ok`` is as the module
#: docstring says (``lab.usage`` adds ``question`` after ``ask_id``).
ASK_COLUMNS = [
    "ask_id",
    "agents",
    "requests",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cost_usd",
    "started_at",
    "duration_s",
    "ok",
]
_SUMS = ["requests", "input_tokens", "output_tokens", "total_tokens"]
_TOKENS = ["input_tokens", "output_tokens", "total_tokens"]
_KEYS: dict[str, list[str]] = {
    "agent": ["agent", "role", "model"],
    "run": ["run_id", "agent", "role", "model"],
    "model": ["model"],
}


def _event_columns(events: Sequence[LlmUsageEvent]) -> dict[str, list[Any]]:
    """The request columns and ``ask_id`` of usage events, one row each."""
    columns: dict[str, list[Any]] = {c: [] for c in (*REQUEST_COLUMNS, "ask_id")}
    for e in events:
        columns["run_id"].append(e.run_id)
        columns["agent"].append(e.agent)
        columns["role"].append(e.role)
        columns["model"].append(e.model)
        columns["requests"].append(e.requests)
        columns["input_tokens"].append(e.input_tokens)
        columns["output_tokens"].append(e.output_tokens)
        unknown = e.input_tokens is None and e.output_tokens is None
        columns["total_tokens"].append(None if unknown else e.total_tokens)
        columns["cost_usd"].append(e.cost_usd)
        columns["estimated"].append(e.estimated)
        columns["cost_source"].append(e.cost_source)
        columns["ok"].append(e.ok)
        columns["started_at"].append(e.started_at)
        columns["duration_s"].append(e.duration_s)
        columns["ask_id"].append(e.ask_id)
    return columns


def _raw(events: Sequence[LlmUsageEvent], *, asks: bool = False) -> pd.DataFrame:
    import pandas as pd

    packed = getattr(events, "columns", None)  # a lab's UsageRows: read its packed columns
    read = packed() if packed is not None else _event_columns(events)
    columns = {c: read[c] for c in REQUEST_COLUMNS}
    ask_ids = read["ask_id"]
    frame = pd.DataFrame(columns)
    frame["requests"] = frame["requests"].astype("int64")
    for c in _TOKENS:  # unknown token counts stay <NA>, never a made-up 0
        frame[c] = frame[c].astype("Int64" if frame[c].isna().any() else "int64")
    frame["estimated"] = frame["estimated"].astype("bool")
    frame["ok"] = frame["ok"].astype("bool")
    frame["cost_usd"] = frame["cost_usd"].astype("Float64")
    frame["duration_s"] = frame["duration_s"].astype("float64")
    if asks:
        frame.insert(0, "ask_id", pd.Series(ask_ids, dtype="object"))
    return frame


def usage_frame(
    events: Sequence[LlmUsageEvent],
    by: str = "agent",
    *,
    failed_asks: Collection[str] | None = None,
    running_asks: Collection[str] = (),
    asks_begun: dict[str, list[Any]] | None = None,
) -> pd.DataFrame:
    """One row per agent (default), run, model, ask (one human message and all it caused),
    or model request (``by="request"``).

    ``cost_usd`` is missing (<NA>) for a group with any request that could not be priced.
    By ask, ``ok`` is False for the asks in ``failed_asks``, <NA> for the others in
    ``running_asks`` (as the module docstring says); the usage events alone do not tell, so
    without ``failed_asks`` it is <NA>. A lab's events (``UsageRows``) also know every ask
    begun: one that has made no model request yet (queued behind another, its first request
    still in flight, or a command answered without a model) has its row too, with zero
    requests, tokens and cost, from the moment it was sent; ``started_at`` is when it was
    sent (else its first request's start). ``asks_begun`` gives those asks (in
    ``UsageRows.asks_begun``'s columns) for events that are not a lab's ``UsageRows``.
    """
    if by not in ("agent", "run", "model", "ask", "request"):
        raise ConfigError(f"usage by {by!r}: choose agent, run, model, ask or request")
    if by == "ask":
        if asks_begun is None:
            begun = getattr(events, "asks_begun", None)  # a lab's UsageRows: the asks sent, with or without usage
            asks_begun = begun() if begun is not None else None
        return _by_ask(_raw(events, asks=True), asks_begun, failed_asks, running_asks)
    frame = _raw(events)
    if by == "request":
        return frame
    frame = frame[USAGE_COLUMNS]
    keys = _KEYS[by]
    grouped = frame.groupby(keys, sort=False, dropna=False)
    out = grouped[_SUMS].sum(min_count=1)  # a group whose token counts are all unknown stays <NA>, not 0
    unpriced = frame["cost_usd"].isna().groupby([frame[k] for k in keys], sort=False).any()
    out["cost_usd"] = grouped["cost_usd"].sum().mask(unpriced)
    if by == "run":
        out["started_at"] = grouped["started_at"].min()
        out["duration_s"] = grouped["duration_s"].sum()
    out = out.reset_index()
    return out[[c for c in USAGE_COLUMNS if c in out.columns]]


def _by_ask(
    frame: pd.DataFrame,
    begun: dict[str, list[Any]] | None,
    failed_asks: Collection[str] | None,
    running_asks: Collection[str],
) -> pd.DataFrame:
    import pandas as pd

    grouped = frame.groupby("ask_id", sort=False, dropna=False)
    out = grouped[_SUMS].sum(min_count=1)  # a group whose token counts are all unknown stays <NA>, not 0
    out["cost_usd"] = (
        grouped["cost_usd"]
        .sum()
        .mask(frame["cost_usd"].isna().groupby(frame["ask_id"], sort=False, dropna=False).any())
    )
    out["agents"] = grouped["agent"].agg(lambda names: ", ".join(dict.fromkeys(names)))
    out["started_at"] = grouped["started_at"].min()
    out["duration_s"] = grouped["duration_s"].sum()
    out = out.reset_index()
    if begun and begun["ask_id"]:
        out = _with_asks_begun(out, frame, begun)
    if failed_asks is None:
        out["ok"] = pd.Series(pd.NA, index=out.index, dtype="boolean")
    else:
        failed = out["ask_id"].isin(list(failed_asks))
        running = out["ask_id"].isin(list(running_asks)) & ~failed  # a notice already says how it went
        out["ok"] = (~failed).astype("boolean").mask(running)
    return out[ASK_COLUMNS]


def _with_asks_begun(out: pd.DataFrame, frame: pd.DataFrame, begun: dict[str, list[Any]]) -> pd.DataFrame:
    """``out`` (by ask, from usage) with a row for every ask begun that has none, each ask
    started when it was sent, in the order the asks were sent (usage of an ask never
    begun here, restored by a resume, keeps its place among them)."""
    import pandas as pd

    asked = pd.DataFrame(begun).drop_duplicates("ask_id").reset_index(drop=True)
    asked_at = pd.to_datetime(asked["asked_at"], utc=True).dt.as_unit("us")
    if not out.empty and getattr(out["started_at"].dtype, "tz", None) is None:
        asked_at = asked_at.dt.tz_localize(None)  # usage stamped without a zone (UTC): stay comparable
    asked["asked_at"] = asked_at
    # Where each row goes: an ask begun just before the usage row it was begun before.
    order = pd.Series(frame.index[~frame["ask_id"].duplicated()], dtype="float64")
    sent = dict(zip(asked["ask_id"], asked["row"] - 0.5, strict=True))
    at = dict(zip(asked["ask_id"], asked["asked_at"], strict=True))
    seq = dict(zip(asked["ask_id"], asked.index, strict=True))  # asks begun at the same row: as sent
    out = out.assign(
        _order=[sent.get(a, o) for a, o in zip(out["ask_id"], order, strict=True)],
        _seq=[seq.get(a, -1) for a in out["ask_id"]],
    )
    known = out["ask_id"].map(at)
    if not out.empty:  # sent before its first request started: it began then
        out["started_at"] = out["started_at"].where(known.isna() | (out["started_at"] <= known), known)
    new = asked[~asked["ask_id"].isin(set(out["ask_id"]))]
    zero = [0] * len(new)
    rows = pd.DataFrame(
        {
            "ask_id": new["ask_id"],
            "requests": zero,
            **{c: pd.Series(zero, index=new.index, dtype=out[c].dtype) for c in _TOKENS},
            "cost_usd": pd.Series([0.0] * len(new), index=new.index, dtype="Float64"),
            "agents": "",
            "started_at": new["asked_at"],
            "duration_s": [0.0] * len(new),
            "_order": new["row"] - 0.5,
            "_seq": new.index,
        }
    )
    if out.empty:
        merged = rows
    else:
        merged = pd.concat([out, rows], ignore_index=True)
    merged = merged.sort_values(["_order", "_seq"], kind="stable").drop(columns=["_order", "_seq"])
    merged = merged.reset_index(drop=True)
    merged["requests"] = merged["requests"].astype("int64")
    merged["duration_s"] = merged["duration_s"].astype("float64")
    return merged


def estimate_cost(frame: pd.DataFrame, model: str, *, provider: str | None = None) -> pd.Series:
    """What each row's tokens would cost on ``model`` (USD), from genai-prices.

    An estimate for comparing, labelled as such by the caller: the demo model itself has
    no price, and real usage keeps the cost pydantic-ai measured. Cache tokens are not
    split out here (they count as ordinary input).
    """
    import pandas as pd
    from genai_prices import calc_price
    from pydantic_ai.usage import RequestUsage

    def price(row: pd.Series) -> float:
        tokens_in, tokens_out = row["input_tokens"], row["output_tokens"]
        usage = RequestUsage(
            input_tokens=0 if pd.isna(tokens_in) else int(tokens_in),
            output_tokens=0 if pd.isna(tokens_out) else int(tokens_out),
        )
        return float(calc_price(usage, model, provider_id=provider).total_price)

    try:
        if frame.empty:
            return pd.Series([], dtype="float64", name=f"cost_usd_as_{model}")
        return frame.apply(price, axis=1).rename(f"cost_usd_as_{model}")
    except LookupError as exc:
        raise ConfigError(f"genai-prices has no price for {model!r}: {exc}") from exc
