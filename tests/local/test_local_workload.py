"""The local-model workload: ten questions to the demo team on a real model, offline.

SmolLM2-135M-Instruct served by llama-cpp-python on 127.0.0.1 with a 4,096-token context
(``make test-local``; needs the ``local`` extra, skipped without it). The questions go one
after another to the same team, so the histories grow as they would in a notebook.

Per question it records whether the human got an answer (a message to @Human that is not a
notice), the notices, the seconds, the requests and tokens, whether the entry agent involved a
member, and whether the answer holds the expected word (a rough figure, not asserted). The
summary is written to ``tests/local/results/workload.{json,md}`` (not committed).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from aklab.agent import AgentMessage, Notice
from aklab.lab.session import AskTimeout, Lab
from aklab.llm.local_server import LocalServer
from bench.workload_local import WORKLOAD, Question
from tests.local.conftest import N_CTX, skip_without_local_runtime

skip_without_local_runtime()

pytestmark = pytest.mark.local

RESULTS = Path(__file__).parent / "results"
#: The budget per question, and how long the test waits before it stops one (so an overrun is measured).
BUDGET_S = 60.0
ASK_TIMEOUT_S = 90.0
MIN_ANSWERED = 8
_OVERFLOW = re.compile(r"context (full|length|window)|exceed(s|ed)? (the )?context|n_ctx|maximum context", re.I)


@dataclass
class Record:
    id: str
    kind: str
    question: str
    answered: bool = False
    correct: bool | None = None
    delegated: bool = False
    timed_out: bool = False
    seconds: float = 0.0
    requests: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    tokens_estimated: bool = False
    max_request_input_tokens: int | None = None
    answer: str = ""
    notices: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop_seconds: float = 0.0
    """After a timeout: how long stopping the runs took (not part of ``seconds``)."""
    transcript: list[str] = field(default_factory=list)
    """Every message the question caused, ``sender → recipient (type): content``."""

    @property
    def overflow(self) -> bool:
        return any(_OVERFLOW.search(text) for text in (*self.notices, *self.errors))


def _is_notice(message: AgentMessage) -> bool:
    """aklab's own notice (a failure, a stop, a limit), not an agent's answer of any intent."""
    return isinstance(message, Notice)


def _sum(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _ask(lab: Lab, q: Question) -> Record:
    record = Record(q.id, q.kind, q.text)
    n_usage, n_transcript, n_errors = len(lab.recorder.usage), len(lab.recorder.transcript), len(lab.recorder.errors)
    n_inbox = len(lab.replies())
    t0 = time.monotonic()
    try:
        replies = lab.ask(q.text, timeout=ASK_TIMEOUT_S)
    except AskTimeout:
        record.timed_out = True
        record.seconds = round(time.monotonic() - t0, 2)
        lab.interrupt()
        record.stop_seconds = round(time.monotonic() - t0 - record.seconds, 2)
        replies = lab.replies()[n_inbox:]
    else:
        record.seconds = round(time.monotonic() - t0, 2)
    answers = [m for m in replies if not _is_notice(m) and m.content.strip()]
    record.answered = bool(answers) and not record.timed_out
    record.answer = "\n\n".join(m.content for m in answers)
    record.notices = [m.content for m in replies if _is_notice(m)]
    record.errors = lab.errors(since=n_errors)
    if q.expect and answers:
        record.correct = any(word in record.answer.lower() for word in q.expect)
    sent = [s.message for s in list(lab.recorder.transcript)[n_transcript:] if isinstance(s.message, AgentMessage)]
    record.transcript = [
        f"{m.sender.name if m.sender else '?'} → {m.recipient.name if m.recipient else '?'} ({m.type}): {m.content}"
        for m in sent
    ]
    record.delegated = any(
        m.sender is not None
        and m.sender.name == lab.entry.name
        and m.recipient is not None
        and m.recipient.name != "@Human"
        for m in sent
    )
    events = lab.recorder.usage[n_usage:]
    record.requests = sum(e.requests for e in events)
    record.input_tokens = _sum([e.input_tokens for e in events])
    record.output_tokens = _sum([e.output_tokens for e in events])
    record.max_request_input_tokens = max((e.input_tokens for e in events if e.input_tokens is not None), default=None)
    record.tokens_estimated = any(bool(getattr(e, "estimated", False)) for e in events)
    return record


def _write_summary(records: list[Record], meta: dict[str, Any]) -> None:
    RESULTS.mkdir(exist_ok=True)
    answered = sum(r.answered for r in records)
    correct = sum(bool(r.correct) for r in records)
    summary = {
        **meta,
        "answered": answered,
        "correct": correct,
        "max_seconds": max(r.seconds for r in records),
        "total_seconds": round(sum(r.seconds for r in records), 2),
        "overflow": any(r.overflow for r in records),
        "questions": [asdict(r) for r in records],
    }
    (RESULTS / "workload.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")

    def tokens(r: Record) -> str:
        if r.input_tokens is None and r.output_tokens is None:
            return "unknown"
        return f"{r.input_tokens or 0}+{r.output_tokens or 0}{' (est.)' if r.tokens_estimated else ''}"

    lines = [
        f"# Local workload: {meta['model']}, n_ctx {meta['n_ctx']}, output mode {meta['output_mode']}",
        "",
        f"{meta['finished_at']}: answered **{answered}/{len(records)}**, expected word in {correct}, "
        f"max {summary['max_seconds']:.1f}s per question, total {summary['total_seconds']:.1f}s, "
        f"context overflow: {'yes' if summary['overflow'] else 'no'}.",
        "",
        "| # | id | kind | answered | correct | delegated | s | requests | tokens in+out | notice / answer |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(records, 1):
        shown = r.answer if r.answered else "; ".join(r.notices + r.errors) or ("timed out" if r.timed_out else "—")
        shown = " ".join(shown.split()).replace("|", "\\|")
        shown = shown if len(shown) <= 120 else shown[:119] + "…"
        lines.append(
            f"| {i} | {r.id} | {r.kind} | {'yes' if r.answered else 'no'} | {r.correct} | {r.delegated} "
            f"| {r.seconds:.1f} | {r.requests} | {tokens(r)} | {shown} |"
        )
    (RESULTS / "workload.md").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def workload(server: LocalServer) -> Iterator[list[Record]]:
    # The profile's default unless asked for, to compare modes: AKLAB_LOCAL_OUTPUT_MODE=grammar make test-local
    output_mode = os.environ.get("AKLAB_LOCAL_OUTPUT_MODE", "auto")
    started = time.monotonic()
    with Lab(model=server.model_config(output_mode=output_mode)) as lab:
        records = [_ask(lab, q) for q in WORKLOAD]
        server_log = server.log_text()
    meta = {
        "model": f"local:{server.model_name}",
        "n_ctx": N_CTX,
        "output_mode": output_mode,
        "server_startup_s": round(server.startup_seconds or 0.0, 2),
        "wall_s": round(time.monotonic() - started, 2),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "server_context_errors": len(re.findall(r"exceed context window|context window", server_log, re.I)),
    }
    _write_summary(records, meta)
    yield records


def test_at_least_8_of_10_questions_get_an_answer(workload: list[Record]) -> None:
    answered = [r.id for r in workload if r.answered]
    assert len(answered) >= MIN_ANSWERED, f"answered {len(answered)}/10: {answered}; see {RESULTS / 'workload.md'}"


def test_every_question_ends_in_an_answer_or_a_notice(workload: list[Record]) -> None:
    silent = [r.id for r in workload if not r.answered and not r.notices]
    assert not silent


def test_no_question_takes_more_than_60_seconds(workload: list[Record]) -> None:
    slow = {r.id: r.seconds for r in workload if r.seconds > BUDGET_S}
    assert not slow


def test_the_context_never_overflows(workload: list[Record], server: LocalServer) -> None:
    overflowed = [r.id for r in workload if r.overflow]
    assert not overflowed
    assert not re.search(r"exceed context window", server.log_text(), re.I)
