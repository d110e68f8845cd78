"""Counts read as words: "1 earlier reply", "0 messages re-delivered", not "repl(ies)"."""

from __future__ import annotations

from aklab._text import counted


def test_one_is_singular_and_every_other_count_plural() -> None:
    assert counted(1, "message") == "1 message"
    assert counted(0, "message") == "0 messages"
    assert counted(2, "earlier reply", "earlier replies") == "2 earlier replies"
    assert counted(1, "earlier reply", "earlier replies") == "1 earlier reply"
    assert counted(12345, "record") == "12,345 records"
