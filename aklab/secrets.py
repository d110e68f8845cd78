"""Secrets never leave as text: a registry of secret values and one ``redact`` for all output.

Model profiles register every API key they read (:func:`register_secret`); everything that
turns into text a person or a file will see (notices to the human, ``ErrorMessage`` values,
log records, stored records) goes through :func:`redact`, which replaces every registered
value and the value of any ``Authorization`` / ``api-key`` / ``x-api-key`` header or
``Bearer`` token with ``[redacted]``. Values shorter than 8 characters are not registered
(they would redact ordinary words).
"""

from __future__ import annotations

import re
import threading

__all__ = ["REDACTED", "redact", "register_secret", "secrets_registered"]

REDACTED = "[redacted]"
_MIN_LENGTH = 8

_lock = threading.Lock()
_values: frozenset[str] = frozenset()
_pattern: re.Pattern[str] | None = None

# header-like "Authorization: Bearer xyz", "api-key=xyz", "'x-api-key': 'xyz'", and bare bearer tokens
_HEADERS = re.compile(
    r"""(?ix)
    (\b(?:authorization|proxy-authorization|x-api-key|api[-_]key|x-goog-api-key)\b["']?\s*[:=]\s*["']?)
    (?:bearer\s+|basic\s+)?
    [^\s"',;}]+
    |
    (\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}
    """
)


def register_secret(value: str | None) -> None:
    """Remember ``value`` so that :func:`redact` hides it everywhere from now on."""
    global _values, _pattern
    if not value or len(value) < _MIN_LENGTH:
        return
    with _lock:
        if value in _values:
            return
        _values = _values | {value}
        ordered = sorted(_values, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(v) for v in ordered))


def secrets_registered() -> int:
    return len(_values)


def redact(text: str) -> str:
    """``text`` with every registered secret and every auth header value replaced."""
    if not text:
        return text
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    return _HEADERS.sub(lambda m: (m.group(1) or m.group(2) or "") + REDACTED, text)
