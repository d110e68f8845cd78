"""BatchResult: a batch's scenarios and usage as DataFrames, live while it runs.

``scenarios``: one row per scenario, in the order given, with the figures of its final
attempt: ``id, team, model, status, answer, score, asks, requests, tokens, cost_usd,
wall_s, attempt, error`` (then any metadata columns). ``status`` is ``ok``, ``failed``,
``timeout`` or ``cancelled`` (``pending``/``running`` while the batch runs); ``attempt``
counts from 1 (0: never started). ``attempts``: one row per attempt, failed ones
included. ``usage``: every model request of every attempt, with the columns of
``lab.usage(by="request")`` after ``scenario_id`` and ``attempt``. ``workers``: one row
per worker process, with the memory it reported (Ray actors, process workers). ``summary()``
totals per team and model, counting every attempt's spend (retries cost too).
"""

from __future__ import annotations

import html
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from aklab.batch._attempt import Outcome
from aklab.batch._scenario import Scenario
from aklab.batch.progress import ProgressState
from aklab.llm.usage import headline

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["SCENARIO_COLUMNS", "BatchResult"]

SCENARIO_COLUMNS = [
    "id",
    "team",
    "model",
    "status",
    "answer",
    "score",
    "asks",
    "requests",
    "tokens",
    "cost_usd",
    "wall_s",
    "attempt",
    "error",
]
SUMMARY_COLUMNS = [
    "scenarios",
    "ok",
    "failed",
    "timeout",
    "cancelled",
    "score",
    "attempts",
    "requests",
    "tokens",
    "cost_usd",
    "mean_wall_s",
]
WORKER_COLUMNS = ["worker", "attempts", "teams", "baseline_mb", "peak_rss_mb", "growth_mb", "mb_per_team"]
ATTEMPT_COLUMNS = ["id", "attempt", "status", "asks", "requests", "tokens", "cost_usd", "wall_s", "worker", "error"]
#: How long ``run`` waits for the engine to stop after an interrupt.
CANCEL_WAIT = 5.0


class BatchResult:
    """The outcome of ``aklab.batch.run`` (or the live handle of ``aklab.batch.start``)."""

    def __init__(self, scenarios: list[Scenario], labels: list[tuple[str, str]], engine: str) -> None:
        self._scenarios = scenarios
        self._labels = labels
        self.engine = engine
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._final: list[Outcome | None] = [None] * len(scenarios)
        self._attempts: list[Outcome] = []
        self._running: dict[int, tuple[int, str]] = {}
        self._aliases: dict[str, str] = {}  # a worker's provisional name -> host:pid (_worker_named)
        self._started = time.monotonic()
        self._elapsed: float | None = None
        self._cancel: Callable[[], None] | None = None
        # Running totals, so that ``state()`` (drawn on every start and end) costs the same
        # on the last scenario as on the first.
        self._statuses: Counter[str] = Counter()
        self._retried = 0
        self._requests = 0
        self._tokens = 0
        self._cost: float | None = None
        self._scored = 0  # final outcomes a check scored, and the sum of their scores
        self._score_sum = 0.0
        self._note = ""  # what the engine is busy with before attempts can run ("starting Ray")
        self.error: BaseException | None = None
        """An error of the batch machinery itself (not of a scenario), if it broke down."""

    # -- live state (the driver writes, anyone reads) ----------------------------------
    def _worker_named(self, provisional: str, worker: str) -> None:
        """Attempts started under ``provisional`` ran on ``worker`` (see ``_engine.Named``)."""
        with self._lock:
            self._aliases[provisional] = worker
            self._attempts = [replace(o, worker=worker) if o.worker == provisional else o for o in self._attempts]
            self._running = {
                i: (attempt, worker if where == provisional else where) for i, (attempt, where) in self._running.items()
            }

    def _attempt_started(self, index: int, attempt: int, worker: str) -> None:
        worker = self._aliases.get(worker, worker)
        with self._lock:
            self._running[index] = (attempt, worker)

    def _attempt_ended(self, index: int, outcome: Outcome, final: bool, counted: bool = True) -> None:
        with self._lock:
            running = self._running.get(index)
            if not outcome.worker and running is not None and running[0] == outcome.key[1] and running[1]:
                # given up on by the driver, or its worker lost: it ran where it started
                outcome = replace(outcome, worker=running[1])
            if counted:
                self._attempts.append(outcome)
                self._retried += outcome.key[1] > 1
                for e in outcome.events:
                    self._requests += e.requests
                    self._tokens += e.total_tokens
                    if e.cost_usd is not None:
                        self._cost = (self._cost or 0.0) + e.cost_usd
            self._running.pop(index, None)
            if final:
                previous = self._final[index]
                if previous is not None:
                    self._statuses[previous.status] -= 1
                    self._count_score(previous.score, -1)
                self._final[index] = outcome
                self._statuses[outcome.status] += 1
                self._count_score(outcome.score, 1)

    def _count_score(self, score: float | None, sign: int) -> None:
        if score is not None:
            self._scored += sign
            self._score_sum += sign * float(score)

    def _finish(self) -> None:
        with self._lock:
            self._elapsed = time.monotonic() - self._started
            self._running.clear()
            self._note = ""
        self._done.set()

    def state(self) -> ProgressState:
        """Where the batch stands (what progress sinks draw)."""
        with self._lock:
            statuses = self._statuses
            return ProgressState(
                engine=self.engine,
                total=len(self._scenarios),
                done=statuses.total(),
                ok=statuses["ok"],
                failed=statuses["failed"] + statuses["timeout"],
                cancelled=statuses["cancelled"],
                attempts=len(self._attempts),
                retried=self._retried,
                requests=self._requests,
                tokens=self._tokens,
                cost_usd=self._cost,
                scored=self._scored,
                score_sum=self._score_sum,
                elapsed_s=self.elapsed_s,
                running={self._scenarios[i].id: v for i, v in self._running.items()},
                finished=self._done.is_set(),
                note=self._note,
            )

    # -- control -----------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop the batch: attempts in flight are stopped, the rest never start (any thread)."""
        if self._cancel is not None and not self._done.is_set():
            self._cancel()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the batch has finished; False on timeout."""
        return self._done.wait(timeout)

    def done(self) -> bool:
        return self._done.is_set()

    @property
    def elapsed_s(self) -> float:
        """Wall time of the batch (so far, while it runs)."""
        return self._elapsed if self._elapsed is not None else time.monotonic() - self._started

    # -- frames ------------------------------------------------------------------------
    @property
    def scenarios(self) -> pd.DataFrame:
        """One row per scenario, the figures of its final attempt."""
        import pandas as pd

        with self._lock:
            finals = list(self._final)
            running = dict(self._running)
        rows = []
        meta_keys: list[str] = []
        for i, (scenario, outcome) in enumerate(zip(self._scenarios, finals, strict=True)):
            team, model = self._labels[i]
            row: dict[str, Any] = {"id": scenario.id, "team": team, "model": model}
            if outcome is None:
                attempt = running.get(i, (0, ""))[0]
                row.update(status="running" if i in running else "pending", answer="", score=None, asks=0)
                row.update(requests=0, tokens=0, cost_usd=None, wall_s=None, attempt=attempt, error=None)
            else:
                row.update(_figures(outcome))
                row.update(status=outcome.status, answer=outcome.answer, score=outcome.score, asks=outcome.asks)
                row.update(wall_s=outcome.wall_s, attempt=outcome.key[1], error=outcome.error)
            for k, v in scenario.metadata.items():
                if k not in meta_keys and k not in SCENARIO_COLUMNS:
                    meta_keys.append(k)
                row.setdefault(k, v)
            rows.append(row)
        frame = pd.DataFrame(rows, columns=[*SCENARIO_COLUMNS, *meta_keys])
        return _typed(frame, ints=["asks", "requests", "attempt"], tokens=["tokens"], floats=["score", "cost_usd"])

    @property
    def attempts(self) -> pd.DataFrame:
        """One row per attempt, in the order they ended (failed and timed-out ones too)."""
        import pandas as pd

        with self._lock:
            attempts = list(self._attempts)
        rows = [
            {
                "id": self._scenarios[o.key[0]].id,
                "attempt": o.key[1],
                "status": o.status,
                "asks": o.asks,
                **_figures(o),
                "wall_s": o.wall_s,
                "worker": o.worker,
                "error": o.error,
            }
            for o in attempts
        ]
        frame = pd.DataFrame(rows, columns=ATTEMPT_COLUMNS)
        return _typed(frame, ints=["attempt", "asks", "requests"], tokens=["tokens"], floats=["cost_usd"])

    @property
    def workers(self) -> pd.DataFrame:
        """One row per worker (``host:pid``) that ran attempts: how many, the most teams it hosted
        at once, and its memory as it reported it (each worker reads its own RSS when each attempt
        ends; the local engine's one worker is this process): ``baseline_mb`` before any team,
        ``peak_rss_mb`` the highest reading, the baseline included (RSS can fall below it as
        memory is given back), ``growth_mb`` the difference, ``mb_per_team`` that
        over ``teams``."""
        import pandas as pd

        with self._lock:
            attempts = list(self._attempts)
        rows: dict[str, dict[str, Any]] = {}
        for o in attempts:
            if not o.worker:
                continue
            row = rows.setdefault(o.worker, {"worker": o.worker, "attempts": 0, "teams": None, "baseline_mb": None})
            row["attempts"] += 1
            if o.host is not None:
                row["teams"] = max(row["teams"] or 0, o.host.teams)
                row["baseline_mb"] = o.host.baseline_mb
                row["peak_rss_mb"] = max(row.get("peak_rss_mb") or 0.0, o.host.baseline_mb, o.host.rss_mb)
        for row in rows.values():
            if row["teams"]:
                row["growth_mb"] = row["peak_rss_mb"] - row["baseline_mb"]
                row["mb_per_team"] = row["growth_mb"] / row["teams"]
        frame = pd.DataFrame(list(rows.values()), columns=WORKER_COLUMNS)
        frame["attempts"] = frame["attempts"].astype("int64")
        frame["teams"] = frame["teams"].astype("Int64")
        for c in WORKER_COLUMNS[3:]:
            frame[c] = frame[c].astype("Float64")
        return frame

    @property
    def usage(self) -> pd.DataFrame:
        """Every model request of every attempt: ``scenario_id``, ``attempt``, then the columns of
        ``lab.usage(by="request")``."""
        from aklab.lab.frames import usage_frame

        with self._lock:
            attempts = list(self._attempts)
        events = [e for o in attempts for e in o.events]
        frame = usage_frame(events, by="request")
        frame.insert(0, "attempt", [o.key[1] for o in attempts for _ in o.events])
        frame.insert(0, "scenario_id", [self._scenarios[o.key[0]].id for o in attempts for _ in o.events])
        frame["attempt"] = frame["attempt"].astype("int64")
        return frame

    def summary(self) -> pd.DataFrame:
        """Per team and model: scenarios by status, mean score, and the spend of every attempt."""
        import pandas as pd

        scenarios = self.scenarios
        attempts = self.attempts
        keys = ["team", "model"]
        spent = attempts.assign(
            team=attempts["id"].map(dict(zip(scenarios["id"], scenarios["team"], strict=True))),
            model=attempts["id"].map(dict(zip(scenarios["id"], scenarios["model"], strict=True))),
        )
        rows = []
        for (team, model), group in scenarios.groupby(keys, sort=False):
            mine = spent[(spent["team"] == team) & (spent["model"] == model)]
            status = group["status"]
            costs = mine["cost_usd"]
            ran = group["wall_s"][group["attempt"] > 0]  # not the 0 s of one cancelled before it started
            rows.append(
                {
                    "team": team,
                    "model": model,
                    "scenarios": len(group),
                    "ok": int((status == "ok").sum()),
                    "failed": int((status == "failed").sum()),
                    "timeout": int((status == "timeout").sum()),
                    "cancelled": int((status == "cancelled").sum()),
                    "score": group["score"].mean() if group["score"].notna().any() else None,
                    "attempts": len(mine),
                    "requests": int(mine["requests"].sum()),
                    "tokens": int(mine["tokens"].fillna(0).sum()),
                    # an attempt of unknown cost (a request cut off in flight) makes the total
                    # unknown, as an ask's in history(): never under-counted
                    "cost_usd": None if costs.isna().any() else float(costs.sum()),
                    "mean_wall_s": float(ran.mean()) if ran.notna().any() else None,
                }
            )
        frame = pd.DataFrame(rows, columns=[*keys, *SUMMARY_COLUMNS])
        return _typed(frame, ints=[], tokens=[], floats=["score", "cost_usd", "mean_wall_s"])

    # -- display -----------------------------------------------------------------------
    def plot(self, figsize: tuple[float, float] = (9.0, 3.0)) -> Figure:
        """Scenarios by status, and tokens per scenario (matplotlib; imported only here)."""
        import matplotlib.pyplot as plt

        scenarios = self.scenarios
        fig, (left, right) = plt.subplots(1, 2, figsize=figsize)
        counts = scenarios["status"].value_counts().reindex(["ok", "failed", "timeout", "cancelled"], fill_value=0)
        colors = ["tab:green", "tab:red", "tab:orange", "tab:gray"]
        left.bar(counts.index, counts.to_numpy(), color=colors)
        left.set_title("scenarios by status")
        tokens = scenarios["tokens"].fillna(0).astype("int64")
        right.hist(tokens, bins=min(20, max(1, len(tokens))), color="tab:blue")
        right.set_title("tokens per scenario")
        right.set_xlabel("tokens")
        fig.tight_layout()
        plt.close(fig)  # shown once, as the value of the cell
        return fig

    def _header(self) -> str:
        state = self.state()
        head = f"batch ({self.engine}): {state.line()}"
        return head + (f" · {self.elapsed_s:.1f}s" if self.done() else " · running")

    def _repr_html_(self) -> str:
        table = self.scenarios
        shown = table.head(20)
        more = f"<p>… {len(table) - 20} more rows in <code>.scenarios</code></p>" if len(table) > 20 else ""
        return (
            f"<p><b>{html.escape(self._header())}</b></p>"
            + self.summary().to_html(index=False)
            + shown.to_html(index=False)
            + more
        )

    def __repr__(self) -> str:
        return f"<BatchResult {self._header()}>"


def _figures(outcome: Outcome) -> dict[str, Any]:
    return headline(outcome.events)


def _typed(frame: pd.DataFrame, *, ints: list[str], tokens: list[str], floats: list[str]) -> pd.DataFrame:
    for c in ints:
        frame[c] = frame[c].astype("int64")
    for c in tokens:  # an unknown count stays <NA>, never a made-up 0
        frame[c] = frame[c].astype("Int64")
    for c in floats:
        frame[c] = frame[c].astype("Float64")
    if "wall_s" in frame.columns:
        frame["wall_s"] = frame["wall_s"].astype("float64")
    return frame
