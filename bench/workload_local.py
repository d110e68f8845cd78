"""The local-model workload: ten questions of the kinds a notebook user asks a team.

Asked one after another to the demo team on SmolLM2 by ``make test-local``
(``tests/local/test_local_workload.py``), and by B8's real-model figure (prompt tokens
per answered question, from the server's counts).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["WORKLOAD", "Question"]


@dataclass(frozen=True)
class Question:
    id: str
    kind: str
    text: str
    expect: tuple[str, ...] = ()
    """Any of these (case-insensitive) in the answer counts as correct (a figure, not asserted)."""
    delegate: bool = False
    """The entry agent should involve a team member."""


WORKLOAD = (
    Question("capital", "factual", "What is the capital of France?", ("paris",)),
    Question("arithmetic", "factual", "What is 2+2?", ("4", "four")),
    Question("water", "factual", "What is the chemical formula of water?", ("h2o", "h₂o")),
    Question("planet", "factual", "Which planet is the largest in our solar system?", ("jupiter",)),
    Question("reverse", "code", "Write a Python function that reverses a string.", ("def ",)),
    Question("even", "code", "Write a Python function is_even(n) that returns True when n is even.", ("% 2", "%2")),
    Question(
        "ask-developer",
        "delegation",
        "Ask the Developer to write a Python function that adds two numbers, and tell me what they wrote.",
        ("def ", "+"),
        delegate=True,
    ),
    Question("ask-qa", "delegation", "Ask QA for a short test plan for a login form.", ("test",), delegate=True),
    Question(
        "multi-step",
        "multi-step",
        "Name the three primary colors, then tell me which of them appear in the French flag.",
        ("blue", "red"),
    ),
    Question("goodbye", "goodbye", "Thanks, that is all for today. Goodbye!", ("bye", "welcome", "thank")),
)
