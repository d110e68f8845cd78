"""UsagePanel: requests, tokens and cost per agent and per run, as live tables.

The tables come from :func:`aklab.lab.frames.usage_frame`, so they agree with
``lab.usage()``. Building a DataFrame per record would cost more than the record, so
the model shows new usage every ``every`` records; an explicit flush (``hub.flush()``,
displaying the panel, the end of ``hub.pump``) shows the rest. The frames are built
during the flush, outside the model's lock, and rendered cell by cell (not with
``DataFrame.to_html``, whose rendering of missing values changes across pandas
versions). A missing cost (a model without a price) shows as ``—``.

The static forms (text/plain, the HTML snapshot; see ``_static``) show the table by
agent and the total; not the runs, whose ids and durations differ from one run to the next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aklab._text import counted
from aklab.core import EventMessage, Message
from aklab.lab.frames import usage_frame
from aklab.lab.panels._html import note, table
from aklab.lab.panels._hub import Panel, PanelHub, PanelModel
from aklab.lab.panels._static import TEXT_ROWS, more_line, text_table
from aklab.llm import LlmUsageEvent
from aklab.llm.usage import totals_line

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["UsageModel", "UsagePanel", "UsageView"]

_AGENT_COLUMNS = ["agent", "role", "model", "requests", "input_tokens", "output_tokens", "total_tokens", "cost_usd"]
_RUN_COLUMNS = ["run_id", "agent", "model", "requests", "total_tokens", "cost_usd", "duration_s"]
_TEXT_COLUMNS = ["agent", "model", "requests", "total_tokens", "cost_usd"]
#: The HTML snapshot lists this many agents at most.
STATIC_AGENTS = 30


@dataclass(frozen=True)
class UsageView:
    events: tuple[LlmUsageEvent, ...]
    runs_shown: int

    def frame(self, by: str = "agent") -> pd.DataFrame:
        return usage_frame(list(self.events), by=by)

    def html(self) -> str:
        if not self.events:
            return note("no model requests yet")
        by_agent = self.frame("agent")
        by_run = self.frame("run").tail(self.runs_shown)
        runs = len(set(e.run_id for e in self.events))
        head = f"runs (last {len(by_run)} of {runs})" if runs > len(by_run) else "runs"
        return (
            "<b>by agent</b>"
            + _table(by_agent, _AGENT_COLUMNS)
            + note(_total(self.events))
            + f"<b>{head}</b>"
            + _table(by_run, _RUN_COLUMNS)
        )

    def text_lines(self) -> list[str]:
        if not self.events:
            return ["no model requests yet"]
        by_agent = self.frame("agent")
        rows = [[_cell(c, row[c]) for c in _TEXT_COLUMNS] for row in by_agent.head(TEXT_ROWS).to_dict("records")]
        headers = ["agent", "model", "requests", "tokens", "cost"]
        return [
            *text_table(headers, rows, right=(2, 3, 4)),
            *more_line(len(rows), len(by_agent), "agent"),
            _total(self.events),
        ]

    def static_html(self) -> str:
        if not self.events:
            return note("no model requests yet")
        by_agent = self.frame("agent")
        shown = by_agent.head(STATIC_AGENTS)
        rows = [[_cell(c, row[c]) for c in _AGENT_COLUMNS] for row in shown.to_dict("records")]
        more = more_line(len(shown), len(by_agent), "agent")
        total = note("; ".join([*more, _total(self.events)]))
        return table(_AGENT_COLUMNS, rows, css_class="aklab-static-usage") + total


def _table(frame: pd.DataFrame, columns: list[str]) -> str:
    rows = [[_cell(column, row[column]) for column in columns] for row in frame.to_dict("records")]
    return table(columns, rows, css_class="aklab-usage")


def _cell(column: str, value: Any) -> str:
    import pandas as pd

    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return "—"
    if column == "cost_usd":
        return f"${value:.4f}"
    if column == "duration_s":
        return f"{value:.2f}s"
    if column == "run_id":
        return str(value)[:8]
    return str(value)


def _total(events: tuple[LlmUsageEvent, ...]) -> str:
    return f"total: {totals_line(events)}"


class UsageModel(PanelModel[UsageView]):
    def __init__(self, *, every: int = 5, runs_shown: int = 20) -> None:
        super().__init__()
        self.every = max(1, every)
        self.runs_shown = runs_shown
        self._reset()

    def _reset(self) -> None:
        self._events: list[LlmUsageEvent] = []
        self._shown = 0  # how many events the current version includes

    def _feed(self, record: Message) -> bool:
        if not (isinstance(record, EventMessage) and isinstance(record.event, LlmUsageEvent)):
            return False
        self._events.append(record.event)
        if len(self._events) - self._shown >= self.every:
            self._shown = len(self._events)
            return True
        return False

    def _catch_up(self) -> bool:
        if self._shown == len(self._events):
            return False
        self._shown = len(self._events)
        return True

    def _view(self) -> UsageView:
        return UsageView(tuple(self._events[: self._shown]), self.runs_shown)

    def _summary(self) -> str:
        requests = sum(e.requests for e in self._events)
        agents = len({e.agent for e in self._events})
        return f"{counted(requests, 'request')} by {counted(agents, 'agent')}"


class UsagePanel(Panel[UsageView]):
    """Two tables (by agent, by run) and a total line, in one HTML widget."""

    title = "Usage"
    model: UsageModel

    def __init__(self, hub: PanelHub | None = None, *, every: int = 5, runs_shown: int = 20) -> None:
        super().__init__(UsageModel(every=every, runs_shown=runs_shown), hub)

    def _build(self) -> Any:
        import ipywidgets as widgets

        self.html = widgets.HTML(value=note("no model requests yet"))
        return self.html

    def _apply(self, view: UsageView) -> None:
        self.html.value = view.html()
