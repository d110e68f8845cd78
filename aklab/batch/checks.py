"""Checks: how a scenario's final answer is scored (0.0 to 1.0, or any float you like).

A check is either

- a callable ``check(answer: str) -> bool | float`` (True is 1.0, False 0.0), or
- an evaluator object with ``evaluate(ctx)``, as in pydantic-evals: ``ctx`` has
  ``inputs`` (the turns), ``output`` (the answer), ``expected_output`` and ``metadata``.
  It may return a bool, a number, an object with a ``value`` (pydantic-evals'
  ``EvaluationReason``), or a mapping of those (their mean is the score).

The ready checks here (:class:`contains`, :class:`equals`, :class:`matches`) are small
picklable classes, so they travel to process and Ray workers; a lambda works with the
``local`` and ``ray`` engines only (``process`` pickles with the standard library).
A check that raises fails the attempt (and is retried like any other failure).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Check", "CheckContext", "Evaluator", "contains", "equals", "matches", "score", "without_quotes"]


@runtime_checkable
class Evaluator(Protocol):
    """An object that scores a :class:`CheckContext` (pydantic-evals' ``Evaluator`` shape)."""

    def evaluate(self, ctx: Any) -> Any: ...


Check = Callable[[str], Any] | Evaluator


@dataclass(frozen=True)
class CheckContext:
    """What an evaluator sees: the same attribute names as pydantic-evals' ``EvaluatorContext``."""

    inputs: tuple[str, ...]
    output: str
    expected_output: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    name: str | None = None


@dataclass(frozen=True)
class contains:  # noqa: N801 - reads as a function at the call site: check=contains("42")
    """1.0 when the answer contains ``text`` (case-insensitive unless ``case=True``), else 0.0.

    Not a word of the question: an answer that quotes its question (the demo model's
    always do) contains those whatever else it says."""

    text: str
    case: bool = False

    def __call__(self, answer: str) -> bool:
        return self.text in answer if self.case else self.text.casefold() in answer.casefold()


@dataclass(frozen=True)
class equals:  # noqa: N801
    """1.0 when the stripped answer equals ``text`` (case-insensitive unless ``case=True``)."""

    text: str
    case: bool = False

    def __call__(self, answer: str) -> bool:
        a, b = answer.strip(), self.text.strip()
        return a == b if self.case else a.casefold() == b.casefold()


@dataclass(frozen=True)
class matches:  # noqa: N801
    """1.0 when the regular expression ``pattern`` is found in the answer."""

    pattern: str
    flags: int = re.IGNORECASE

    def __call__(self, answer: str) -> bool:
        return re.search(self.pattern, answer, self.flags) is not None


def score(check: Check | None, answer: str, ctx: CheckContext) -> float | None:
    """Run ``check`` on ``answer`` and return its score as a float (None without a check)."""
    if check is None:
        if ctx.expected_output is None:
            return None
        return _number(contains(ctx.expected_output)(without_quotes(answer, ctx.inputs)))
    evaluate = getattr(check, "evaluate", None)
    value = evaluate(ctx) if callable(evaluate) else check(answer)  # type: ignore[operator]
    return _number(value)


def without_quotes(answer: str, questions: Sequence[str]) -> str:
    """``answer`` without the places it quotes one of ``questions`` whole (case-insensitive):
    what ``expected`` is looked for in. An answer often quotes its question ("Here is the
    plan for 'Plan the login page.'"), and the expected words are often the question's own."""
    for question in questions:
        quoted = question.strip().rstrip(".?!")
        if quoted:
            answer = re.sub(re.escape(quoted), " ", answer, flags=re.IGNORECASE)
    return answer


def _number(value: Any) -> float:
    if isinstance(value, Mapping):
        numbers = [_number(v) for v in value.values()]
        return sum(numbers) / len(numbers) if numbers else math.nan
    if hasattr(value, "value") and not isinstance(value, int | float):
        return _number(value.value)
    if isinstance(value, bool | int | float):
        return float(value)
    raise TypeError(f"a check returned {type(value).__name__} {value!r}; return a bool or a number")
