"""Batch progress: a snapshot after every event, and the sinks that draw it.

The driver calls ``sink.update(state)`` after each attempt starts or ends and
``sink.close(state)`` once at the end, from the batch's driver thread (keep them quick).
A sink is any object with those two methods (:class:`ProgressSink`); a plain callable is
called with every state, the last one included. aklab ships two: :class:`TextProgress`
(a line at every tenth of the batch, on stderr) and :class:`WidgetProgress` (an
ipywidgets bar with done/failed/tokens/cost); ``progress=True`` picks the widget in a
Jupyter kernel and text elsewhere.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO, runtime_checkable

__all__ = ["NoProgress", "ProgressSink", "ProgressState", "TextProgress", "WidgetProgress", "make_sink"]


@dataclass(frozen=True)
class ProgressState:
    """Where a batch stands. ``failed`` counts scenarios that ended failed or timed out."""

    engine: str
    total: int
    done: int = 0
    ok: int = 0
    failed: int = 0
    cancelled: int = 0
    attempts: int = 0
    retried: int = 0
    requests: int = 0
    tokens: int = 0
    cost_usd: float | None = None
    scored: int = 0
    """Scenarios whose final answer a check scored (with ``score_sum``, their mean score)."""
    score_sum: float = 0.0
    elapsed_s: float = 0.0
    running: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    """Scenario id -> (attempt, worker) of every attempt in flight (worker: ``host:pid``)."""
    finished: bool = False
    note: str = ""
    """What the engine is busy with before attempts can run ("starting Ray"); "" otherwise."""

    def line(self) -> str:
        """``12/50 done · 1 failed · 3 running · score 0.82 of 11 · 18,204 tokens · cost n/a`` (no
        times: stable text; the score is the mean of the checks' scores so far);
        while the engine gets ready, what it is doing: ``0/50 done · starting Ray · ...``."""
        parts = [f"{self.done}/{self.total} done"]
        if self.note and not self.finished:
            parts.append(self.note)
        if self.failed:
            parts.append(f"{self.failed} failed")
        if self.cancelled:
            parts.append(f"{self.cancelled} cancelled")
        if self.running and not self.finished:
            parts.append(f"{len(self.running)} running")
        if self.retried:
            parts.append(f"{self.retried} retried")
        if self.scored:  # a check's mean: with pass/fail checks, the share that passed
            parts.append(f"score {self.score_sum / self.scored:.2f} of {self.scored}")
        parts.append(f"{self.tokens:,} tokens")
        # no request made, nothing spent: $0, not "n/a" (a price unknown is only said of requests made)
        cost = 0.0 if self.requests == 0 and self.cost_usd is None else self.cost_usd
        parts.append("cost n/a" if cost is None else f"${cost:.4f}")
        return " · ".join(parts)


@runtime_checkable
class ProgressSink(Protocol):
    def update(self, state: ProgressState) -> None: ...

    def close(self, state: ProgressState) -> None: ...


class _CallbackSink:
    def __init__(self, callback: Callable[[ProgressState], Any]) -> None:
        self.callback = callback

    def update(self, state: ProgressState) -> None:
        self.callback(state)

    def close(self, state: ProgressState) -> None:
        self.callback(state)


class NoProgress:
    """``progress=False``: shows nothing."""

    def update(self, state: ProgressState) -> None:
        pass

    def close(self, state: ProgressState) -> None:
        pass


class TextProgress:
    """A plain line at each tenth of the batch and at the end (stderr by default)."""

    def __init__(self, stream: TextIO | None = None, steps: int = 10) -> None:
        self.stream = stream
        self.steps = steps
        self._shown = -1
        self._lock = threading.Lock()

    def update(self, state: ProgressState) -> None:
        step = state.done * self.steps // max(1, state.total)
        with self._lock:
            if step <= self._shown:
                return
            self._shown = step
        self._write(state)

    def close(self, state: ProgressState) -> None:
        self._write(state, final=True)

    def _write(self, state: ProgressState, final: bool = False) -> None:
        stream = self.stream or sys.stderr
        tail = f" · {state.elapsed_s:.1f}s" if final else ""
        stream.write(f"batch ({state.engine}): {state.line()}{tail}\n")
        stream.flush()


class WidgetProgress:
    """An ipywidgets progress bar and a line of counts; its text/plain is fixed (nbval)."""

    def __init__(self, total: int, engine: str) -> None:
        import ipywidgets as widgets

        self.label = f"<batch progress: {total} scenarios, {engine}>"
        self.bar = widgets.IntProgress(value=0, min=0, max=total, description="batch")
        self.text = widgets.HTML(value=ProgressState(engine, total).line())
        self.widget = widgets.HBox([self.bar, self.text])

    def update(self, state: ProgressState) -> None:
        self.bar.value = state.done
        self.text.value = state.line()

    def close(self, state: ProgressState) -> None:
        self.update(state)
        self.bar.bar_style = "danger" if state.failed or state.cancelled else "success"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = dict(self.widget._repr_mimebundle_() or {})
        bundle["text/plain"] = self.label
        return bundle

    def __repr__(self) -> str:
        return self.label


def in_kernel() -> bool:
    """True inside a Jupyter kernel (IPython with a kernel), without importing IPython."""
    if "IPython" not in sys.modules:
        return False
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def make_sink(progress: bool | ProgressSink | Callable[[ProgressState], Any], total: int, engine: str) -> ProgressSink:
    """``True``: a widget in a kernel (displayed now), text elsewhere; ``False``: nothing."""
    if progress is True:
        if in_kernel():
            from IPython.display import display

            sink = WidgetProgress(total, engine)
            display(sink)  # type: ignore[no-untyped-call]
            return sink
        return TextProgress()
    if progress is False or progress is None:
        return NoProgress()
    if isinstance(progress, ProgressSink):
        return progress
    if callable(progress):
        return _CallbackSink(progress)
    from aklab.errors import ConfigError

    raise ConfigError(
        f"progress must be True, False, a callable(state) or an object with update/close, not {progress!r}"
    )
