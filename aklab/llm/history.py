"""Keeping an agent's LLM history lean: what a run leaves behind, and how big it is.

- A successful run keeps what it did, less its **rejected attempts**: a response the
  output validation (or a tool's argument validation) refused, and the retry prompt that
  answered it, carry nothing the model needs later and cost tokens on every request.
- A failed run (provider error, cancelled, out of retries) collapses to its prompt and a
  note saying it got no answer, on the user's side: the next run's prompt joins that
  request, so the agent still knows what it was asked, without the debris of the failure
  and without a made-up answer of its own to copy.
- Old runs **fold into a digest** (``fold_runs``): one shortened line per run at the head
  of the history (what arrived, what was sent), in the first kept request after the
  system prompt. Whole runs fold, so a tool call never loses its result.
- Sizes are estimated from characters (about four per token) when a server reports no
  token counts; every estimate is marked as one where it is shown.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "DIGEST_HEADER",
    "collapse_failed_run",
    "digest_of",
    "estimate_tokens",
    "fold_runs",
    "join_prompt",
    "message_chars",
    "modernize_unanswered",
    "plain_run_line",
    "prune_rejected",
    "reopen",
    "retell",
    "run_starts",
    "shorten",
    "shrink_parts",
    "unanswered",
]

CHARS_PER_TOKEN = 4


def estimate_tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN) if chars > 0 else 0


def _part_chars(part: Any) -> int:
    content = getattr(part, "content", None)
    if isinstance(content, str):
        size = len(content)
    elif isinstance(content, Sequence) and not isinstance(content, str | bytes):
        size = sum(len(c) if isinstance(c, str) else 256 for c in content)  # media: a flat guess
    elif content is not None:
        try:
            size = len(json.dumps(content, default=str))
        except (TypeError, ValueError):
            size = len(str(content))
    else:
        size = 0
    if isinstance(part, ToolCallPart):
        size += len(part.tool_name) + len(part.args_as_json_str())
    return size + 8  # role/part framing


def message_chars(messages: Iterable[ModelMessage]) -> int:
    """Characters the messages put on the wire (text, tool calls and returns), roughly."""
    return sum(_part_chars(p) for m in messages for p in m.parts)


def _is_retry(part: Any) -> bool:
    """A part that answers a rejected response: feedback, a retried tool call, or the old retry prompt."""
    if isinstance(part, RetryFeedbackPart | RetryPromptPart):
        return True
    return isinstance(part, ToolReturnPart) and part.outcome == "retried"


def prune_rejected(messages: list[ModelMessage], start: int = 0) -> list[ModelMessage]:
    """``messages`` without the rejected attempts made at or after index ``start``.

    A response answered by retry parts keeps only the tool calls that were answered
    normally; its request keeps only its non-retry parts; whichever ends up empty goes.
    """
    out = list(messages[:start])
    tail = messages[start:]
    i = 0
    while i < len(tail):
        msg = tail[i]
        nxt = tail[i + 1] if i + 1 < len(tail) else None
        if isinstance(msg, ModelResponse) and isinstance(nxt, ModelRequest) and any(map(_is_retry, nxt.parts)):
            kept_req = [p for p in nxt.parts if not _is_retry(p)]
            answered = {p.tool_call_id for p in kept_req if isinstance(p, ToolReturnPart)}
            kept_resp = [p for p in msg.parts if isinstance(p, ToolCallPart) and p.tool_call_id in answered]
            if kept_resp:
                out.append(dataclasses.replace(msg, parts=kept_resp))
            if kept_req:
                out.append(dataclasses.replace(nxt, parts=kept_req))
            i += 2
            continue
        out.append(msg)
        i += 1
    return out


def retell(messages: list[ModelMessage], start: int, tidied: Sequence[tuple[str, str]]) -> list[ModelMessage]:
    """``messages`` with each model text at or after ``start`` that ``tidied`` names (as written)
    replaced by its text as delivered."""
    swap = dict(tidied)
    out = list(messages[:start])
    for msg in messages[start:]:
        if isinstance(msg, ModelResponse) and any(isinstance(p, TextPart) and p.content in swap for p in msg.parts):
            parts = [
                dataclasses.replace(p, content=swap[p.content]) if isinstance(p, TextPart) and p.content in swap else p
                for p in msg.parts
            ]
            msg = dataclasses.replace(msg, parts=parts)
        out.append(msg)
    return out


def collapse_failed_run(history: list[ModelMessage], run: list[ModelMessage], note: str) -> list[ModelMessage]:
    """``history`` plus the failed ``run`` reduced to its first request, with ``note`` (why it
    got no answer) after its prompt: a request left unanswered at the end of the history.

    No answer is made up for it: a small model copies its own last answers, and SmolLM2 gave
    a line standing in for one as its answer to the next question. The next run's prompt
    joins this request (``join_prompt``), so the prompt, the note and the next message reach
    the model as one user turn. ``run`` is what the run appended (its first request holds the
    prompt, and the system prompt when the history was empty); when it is empty, the prompt
    never went out.
    """
    first = next((m for m in run if isinstance(m, ModelRequest)), None)
    if first is None:
        return list(history)
    parts = [p for p in first.parts if not (_is_retry(p) or isinstance(p, ToolReturnPart))]
    if not any(isinstance(p, UserPromptPart) for p in parts):
        return list(history)
    return [*history, join_prompt(dataclasses.replace(first, parts=parts), note)]


def unanswered(messages: Sequence[ModelMessage]) -> ModelRequest | None:
    """The request a failed run left at the end of the history (its prompt got no answer), or None."""
    last = messages[-1] if messages else None
    if isinstance(last, ModelRequest) and any(isinstance(p, UserPromptPart) for p in last.parts):
        return last
    return None


def join_prompt(request: ModelRequest, prompt: str | Sequence[Any]) -> ModelRequest:
    """``request`` with ``prompt`` joined to the content of its last user prompt (a blank line
    between): one user turn, where two in a row would be refused by some chat templates."""
    parts = list(request.parts)
    at = max(i for i, p in enumerate(parts) if isinstance(p, UserPromptPart))
    last: Any = parts[at]
    old, new = last.content, prompt
    if isinstance(old, str) and isinstance(new, str):
        content: Any = f"{old}\n\n{new}"
    else:
        content = [*_contents(old), "\n\n", *_contents(new)]
    parts[at] = dataclasses.replace(last, content=content)
    return dataclasses.replace(request, parts=parts)


#: What versions before 2026-12-07 left as the model's answer to a failed or stopped run.
_OLD_FAILED = re.compile(r"\[failed: .*\]", re.DOTALL)
_OLD_STOPPED = "[interrupted: stopped before it was answered; take it up again only if asked to]"


def modernize_unanswered(messages: list[ModelMessage], failed: str, stopped: str) -> list[ModelMessage]:
    """A stored history in today's form where an earlier version left a failed or stopped
    run's line as the model's answer ("[failed: ...]"): that answer goes, the note (``failed``
    or ``stopped``) joins the unanswered prompt, and the next prompt joins them, as
    ``collapse_failed_run`` and ``join_prompt`` leave a failed run now (a small model copied
    the old line as its own answer). The messages left as they were are the same objects;
    ``messages`` itself when nothing changed."""
    out: list[ModelMessage] = []
    changed = joining = False
    for message in messages:
        if joining and isinstance(message, ModelRequest) and message.parts:
            prompts = [p for p in message.parts if isinstance(p, UserPromptPart)]
            if len(prompts) == len(message.parts):
                for part in prompts:
                    out[-1] = join_prompt(out[-1], part.content)  # type: ignore[arg-type]
                joining = False
                continue
        joining = False
        note = _old_line(message, failed, stopped)
        last = unanswered(out[-1:]) if note is not None else None
        if note is not None and last is not None:
            out[-1] = join_prompt(last, note)
            changed = joining = True
            continue
        out.append(message)
    return out if changed else messages


def _old_line(message: ModelMessage, failed: str, stopped: str) -> str | None:
    """The note for an earlier version's failed-run answer, or None for any other message."""
    if not (isinstance(message, ModelResponse) and len(message.parts) == 1):
        return None
    part = message.parts[0]
    if not isinstance(part, TextPart):
        return None
    if part.content == _OLD_STOPPED:
        return stopped
    return failed if _OLD_FAILED.fullmatch(part.content) else None


def _contents(content: str | Sequence[Any]) -> list[Any]:
    return [content] if isinstance(content, str) else list(content)


def shrink_parts(messages: list[ModelMessage], budget_chars: int) -> tuple[list[ModelMessage], int]:
    """Cut the longest text contents until the messages fit ``budget_chars``; returns (messages, cut).

    For one run too big to fit even alone: compaction by runs cannot help it.
    """
    total = message_chars(messages)
    if total <= budget_chars:
        return messages, 0
    out = list(messages)
    cut = 0
    sizes = sorted(
        (
            (len(content), mi, pi)
            for mi, m in enumerate(out)
            for pi, p in enumerate(m.parts)
            if isinstance(content := getattr(p, "content", None), str) and len(content) > 400
        ),
        reverse=True,
    )
    for size, mi, pi in sizes:
        if total - cut <= budget_chars:
            break
        keep = max(200, size - (total - cut - budget_chars))
        msg: Any = out[mi]
        part: Any = msg.parts[pi]
        text: str = part.content
        note = f"\n[... {size - keep} characters cut to fit the context ...]\n"
        new = text[: keep // 2] + note + text[-keep // 2 :]
        parts: list[Any] = list(msg.parts)
        parts[pi] = dataclasses.replace(part, content=new)
        out[mi] = dataclasses.replace(msg, parts=parts)
        cut += size - len(new)
    return out, cut


# -- the digest of old runs ----------------------------------------------------------------

DIGEST_HEADER = "Earlier in this conversation, one shortened line per turn (oldest first)"
_DROPPED_RE = re.compile(r"; (\d+) older lines? dropped")

#: One digest line for a run (its messages, the digest itself left out), or None to skip it.
RunLine = Callable[[Sequence[ModelMessage]], str | None]


def shorten(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with "…"."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: max(1, limit - 1)].rstrip() + "…"


def run_starts(messages: Sequence[ModelMessage]) -> list[int]:
    """Indexes of the requests that start a run (they carry a user prompt)."""
    return [
        i
        for i, m in enumerate(messages)
        if isinstance(m, ModelRequest) and any(p.part_kind == "user-prompt" for p in m.parts)
    ]


def _is_digest(part: Any) -> bool:
    return isinstance(part, UserPromptPart) and isinstance(part.content, str) and part.content.startswith(DIGEST_HEADER)


def digest_of(messages: Sequence[ModelMessage]) -> tuple[list[str], int]:
    """The digest's lines and how many older lines it dropped (([], 0) without a digest)."""
    for message in messages[:1]:
        for part in message.parts:
            if _is_digest(part):
                head, _, body = part.content.partition("\n")  # type: ignore[union-attr]
                dropped = _DROPPED_RE.search(head)
                lines = [line[2:] for line in body.splitlines() if line.startswith("- ")]
                return lines, int(dropped.group(1)) if dropped else 0
    return [], 0


def _digest_part(lines: list[str], dropped: int, max_chars: int) -> UserPromptPart:
    while len(lines) > 1 and sum(len(line) + 3 for line in lines) > max_chars:
        lines = lines[1:]
        dropped += 1
    suffix = f"; {dropped} older line{'s' if dropped != 1 else ''} dropped" if dropped else ""
    return UserPromptPart("\n".join([f"{DIGEST_HEADER}{suffix}:", *(f"- {line}" for line in lines)]))


def plain_run_line(run: Sequence[ModelMessage], width: int = 60) -> str | None:
    """A model-agnostic digest line: the prompt's text, then the answer's text or the tools used."""
    prompt = " ".join(
        p.content
        for m in run[:1]
        for p in m.parts
        if isinstance(p, UserPromptPart) and isinstance(p.content, str) and not _is_digest(p)
    )
    said: list[str] = []
    tools: list[str] = []
    for m in run:
        if isinstance(m, ModelResponse):
            for p in m.parts:
                if isinstance(p, TextPart) and p.content.strip():
                    said.append(p.content)
                elif isinstance(p, ToolCallPart):
                    tools.append(p.tool_name)
    if said:
        answer = shorten(" ".join(said), width)
    else:
        answer = f"called {', '.join(dict.fromkeys(tools))}" if tools else "no answer"
    return f"{shorten(prompt, width) or '(no text)'} ⇒ {answer}"


def fold_runs(
    messages: list[ModelMessage],
    *,
    keep_runs: int,
    line_for_run: RunLine,
    max_chars: int,
    system_prompt: str = "",
) -> tuple[list[ModelMessage], int]:
    """Fold every run but the last ``keep_runs`` into the digest; returns (messages, runs folded).

    The digest goes into the first kept request, after the system prompt; the previous
    run's tool returns that pydantic-ai put there leave with their calls.
    """
    starts = run_starts(messages)
    if len(starts) <= keep_runs:
        return messages, 0
    lines, dropped = digest_of(messages)
    cut = starts[-keep_runs] if keep_runs > 0 else len(messages)
    folded = 0
    bounds = [*starts, len(messages)]
    for begin, end in itertools.pairwise(bounds):
        if begin >= cut:
            break
        run = list(messages[begin:end])
        head: Any = run[0]
        run[0] = dataclasses.replace(head, parts=[p for p in head.parts if not _is_digest(p)])
        line = line_for_run(run)
        if line is not None:
            lines.append(line.replace("\n", " "))
        folded += 1
    kept = list(messages[cut:])
    front: list[Any] = [SystemPromptPart(system_prompt)] if system_prompt else []
    front.append(_digest_part(lines, dropped, max_chars))
    if kept and isinstance(kept[0], ModelRequest):
        kept[0] = reopen(kept[0], front)
    else:
        kept.insert(0, ModelRequest(parts=front))
    return kept, folded


def reopen(first: ModelRequest, front: Sequence[Any] = ()) -> ModelRequest:
    """The first request kept after a cut, with ``front`` (the system prompt, a digest)
    before its own parts, less what belonged to the runs cut away: pydantic-ai merges the
    previous run's tool returns (and retry prompts) into it, and the old system prompt."""
    parts = [p for p in first.parts if p.part_kind not in ("tool-return", "retry-prompt", "system-prompt")]
    return dataclasses.replace(first, parts=[*front, *parts])
