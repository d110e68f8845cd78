"""Counts read as words: "1 earlier reply", "0 messages re-delivered", not "repl(ies)"."""

from __future__ import annotations

from aklab._text import counted, totals_text


def test_one_is_singular_and_every_other_count_plural() -> None:
    assert counted(1, "message") == "1 message"
    assert counted(0, "message") == "0 messages"
    assert counted(2, "earlier reply", "earlier replies") == "2 earlier replies"
    assert counted(1, "earlier reply", "earlier replies") == "1 earlier reply"
    assert counted(12345, "record") == "12,345 records"


def test_totals_are_a_floor_when_some_requests_are_unreported_and_unknown_when_all_are() -> None:
    assert totals_text(2, 477, 1, 0.0, 0) == "2 requests, at least 477 tokens (1 request unreported), $0.0000"
    # a request to a server that never answered (%aklab teams showed "at least 0 tokens")
    assert totals_text(1, 0, 1, 0.0, 0) == "1 request, tokens unknown (1 request unreported), $0.0000"
    assert totals_text(0, 0, 0, 0.0, 0) == "0 requests, 0 tokens, $0.0000"
