"""Counts in words: "1 reply", "3 replies", never "repl(ies)"; usage totals in words; a text
on one line, cut with "…"."""

from __future__ import annotations

__all__ = ["counted", "one_line", "totals_text"]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 (``plural``, or ``noun`` + "s"); ``n`` with
    thousands separators."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def totals_text(requests: int, tokens: int, unreported: int, cost_usd: float, unpriced: int) -> str:
    """Usage in words, such as "9 requests, 2,940 tokens, $0.0123". An unreported count
    (``unreported`` requests) makes the tokens a floor (unknown when no request reported
    any), an unpriced request the cost a floor, or unknown when no request is priced; no
    request at all costs $0."""
    if not unreported:
        tokens_text = f"{tokens:,} tokens"
    elif tokens:
        tokens_text = f"at least {tokens:,} tokens ({counted(unreported, 'request')} unreported)"
    else:  # "at least 0 tokens" says nothing: no request reported any
        tokens_text = f"tokens unknown ({counted(unreported, 'request')} unreported)"
    if requests and unpriced == requests:
        price = "cost unknown (no price for the model)"
    elif unpriced:
        price = f"at least ${cost_usd:.4f} ({counted(unpriced, 'request')} unpriced)"
    else:
        price = f"${cost_usd:.4f}"
    return f"{counted(requests, 'request')}, {tokens_text}, {price}"


def one_line(text: str, limit: int = 300) -> str:
    """``text`` with its whitespace runs as single spaces, cut to ``limit`` characters with "…"."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
