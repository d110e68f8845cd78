"""What each stored team has cost so far: asks, requests, tokens and cost, for ``%aklab teams``.

Read from the usage records and the person's messages alone (a page at a time, their
payloads' few fields), not from the frames ``history()`` builds; unknown token counts and
unpriced requests are counted, so a total can say it is a floor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aklab._text import counted, totals_text
from aklab.store._ask_ends import fields as _fields
from aklab.store._base import EventStore
from aklab.store._history import PAGE
from aklab.store._progress import ReadProgress

__all__ = ["TeamTotals", "team_totals"]


@dataclass
class TeamTotals:
    """One team's asks and what its model requests cost."""

    asks: int = 0
    requests: int = 0
    tokens: int = 0
    unreported: int = 0
    """Requests whose token counts are unknown (cut off before any answer)."""
    cost_usd: float = 0.0
    unpriced: int = 0
    """Requests of a model with no price."""

    def text(self) -> str:
        """In words, such as "3 asks, 9 requests, 2,940 tokens, $0.0123" (floors and unknowns said as such)."""
        asks = counted(self.asks, "ask")
        usage = totals_text(self.requests, self.tokens, self.unreported, self.cost_usd, self.unpriced)
        return f"{asks}, {usage}"


def team_totals(store: EventStore, team_ids: list[str]) -> dict[str, TeamTotals]:
    """The totals of each of ``team_ids`` (a team with no record gets zeros)."""
    totals = {team_id: TeamTotals() for team_id in team_ids}
    progress = ReadProgress("aklab teams", 2.0)
    read = 0
    for team_id, total in totals.items():
        before: int | None = None
        while True:
            page = store.records(
                team_id, kinds=["SentMessage", "LlmUsageEvent"], before=before, limit=PAGE, newest=True
            )
            for r in page:
                if r.kind == "SentMessage":
                    if r.ask_id is not None and r.message_id == r.ask_id:  # the person's message
                        total.asks += 1
                else:
                    _add_usage(total, r.payload)
            read += len(page)
            progress.update(read)
            if len(page) < PAGE:
                break
            before = page[0].seq
    progress.done(read)
    return totals


def _add_usage(total: TeamTotals, payload: dict[str, Any]) -> None:
    event = _fields(payload, "event")
    requests = event.get("requests", 1)
    total.requests += requests
    tokens_in, tokens_out = event.get("input_tokens"), event.get("output_tokens")
    if tokens_in is None or tokens_out is None:
        total.unreported += requests
    total.tokens += (tokens_in or 0) + (tokens_out or 0)
    cost = event.get("cost_usd")
    if cost is None:
        total.unpriced += requests
    else:
        total.cost_usd += cost
