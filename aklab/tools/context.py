"""Context updates: team state delivered to the model as compact blocks.

Before a run the agent appends at most one block, at the tail of the conversation,
opening with ``**Context update N**`` and one of two fixed suffixes. A block carries
whole *sections* (one per LLM_CONTEXT provider): a full snapshot when no baselines
survive, otherwise only the sections whose rendering changed. Nothing changed, no block.

Baselines and the counter live in ``ToolState`` on the agent's state: a cache, never a
record. Before trusting it, :meth:`ContextUpdater.compose` reconciles it with the
markers still visible in the history:

- last delivered marker visible -> baselines trusted (a delta follows);
- marker gone -> baselines dropped (a full snapshot follows), counter kept;
- counter behind the highest visible marker -> counter catches up, baselines kept;
- a section whose last block is gone (folded into the digest while later deltas stay) ->
  that section's baseline dropped, so the next block carries it again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from pydantic import BaseModel, Field

__all__ = ["MARKER_RE", "ContextUpdater", "ToolState", "markers_in"]

MARKER_RE = re.compile(r"\*\*Context update (\d+)\*\*")
SUFFIX_FULL = "current state."
SUFFIX_DELTA = "state has changed since the last update."


class ToolState(BaseModel):
    """The tool layer's per-agent slot (persisted with the agent's state)."""

    counter: int = 0
    baselines: dict[str, str] = Field(default_factory=dict)
    delivered_in: dict[str, int] = Field(default_factory=dict)
    """The block that last carried each section (its marker number)."""


def markers_in(texts: Iterable[str]) -> set[int]:
    """Every context-update number that appears in ``texts``."""
    found: set[int] = set()
    for text in texts:
        if "**Context update" in text:
            found.update(int(n) for n in MARKER_RE.findall(text))
    return found


class ContextUpdater:
    """Diffs the providers against the baselines and composes the next block."""

    def __init__(
        self,
        providers: dict[str, Callable[[], str]],
        slot: Callable[[], ToolState],
    ) -> None:
        self.providers = providers
        self._slot = slot  # read on every call: the state object may be replaced

    def compose(self, visible_markers: set[int]) -> str | None:
        """The next block, or ``None`` when nothing changed. Advances the counter."""
        if not self.providers:
            return None
        state = self._slot()
        top = max(visible_markers, default=0)
        if top > state.counter:
            state.counter = top
        elif state.counter and state.counter not in visible_markers:
            state.baselines.clear()
        for title in [t for t in state.baselines if state.delivered_in.get(t) not in visible_markers]:
            del state.baselines[title]  # its block left the history: the model no longer sees it
        current = {title: render() or "(none)" for title, render in self.providers.items()}
        full = not state.baselines
        sections = current if full else {t: v for t, v in current.items() if state.baselines.get(t) != v}
        if not sections:
            return None
        state.baselines.update(sections)
        state.counter += 1
        state.delivered_in.update(dict.fromkeys(sections, state.counter))
        suffix = SUFFIX_FULL if full else SUFFIX_DELTA
        body = "\n\n".join(f"## {title}\n{text}" for title, text in sections.items())
        return f"**Context update {state.counter}** — {suffix}\n\n{body}"

    def reset(self) -> None:
        """Start again at block 1 with a full snapshot (after ``clear``)."""
        state = self._slot()
        state.counter = 0
        state.baselines.clear()
        state.delivered_in.clear()
