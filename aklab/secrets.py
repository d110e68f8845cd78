"""Secrets never leave as text: a registry of secret values and one ``redact`` for all output.

Model profiles register every API key they read (:func:`register_secret`); everything that
turns into text a person or a file will see (notices to the human, ``ErrorMessage`` values,
log records, stored records) goes through :func:`redact`, which replaces every registered
value and the value of any ``Authorization`` / ``api-key`` / ``x-api-key`` header or
``Bearer`` token with ``[redacted]``. Values shorter than 8 characters are not registered
(they would redact ordinary words).

Log records of the ``aklab`` and ``pykka`` logger hierarchies are redacted as they are
made (:class:`SecretFilter`, installed once by :func:`install_log_redaction`, which runs
when this module is imported and again, idempotently, when a key is registered): their
message, arguments and exception text. A filter on a logger sees only the records made
on that very logger, not its children's, so it is applied from the record factory.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

__all__ = [
    "FOLDING_TO_ASCII",
    "LOGGER_PREFIXES",
    "REDACTED",
    "SecretFilter",
    "folds_to_ascii",
    "holds_registered",
    "install_log_redaction",
    "might_redact_utf8",
    "redact",
    "register_secret",
    "shown_url",
]

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
    install_log_redaction()


def redact(text: str) -> str:
    """``text`` with every registered secret and every auth header value replaced."""
    if not text:
        return text
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    # Every alternative of _HEADERS contains one of these words: skip the (slow, verbose)
    # scan when none occurs. This runs on every stored record and every log line.
    if not _names_a_header(text.lower()):
        return text
    return _HEADERS.sub(lambda m: (m.group(1) or m.group(2) or "") + REDACTED, text)


_HEADER_WORDS = ("authorization", "api-key", "api_key", "bearer")


def shown_url(url: str, *, path: bool = True) -> str:
    """``url`` as aklab shows it: without the user name and password a URL may carry
    (``http://user:pw@gpu-box:8000/v1`` -> ``http://gpu-box:8000/v1``); with ``path=False``,
    only ``scheme://host:port``."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    if not path:
        return f"{parts.scheme}://{netloc}"
    return urlunsplit(parts._replace(netloc=netloc))


def might_redact_utf8(text: str, raw: bytes, lowered: bytes) -> bool:
    """Whether :func:`redact` may change ``text`` (False: it certainly does not), for a text
    also at hand as its UTF-8 bytes ``raw`` (a JSON writer's output), with ``lowered`` =
    ``raw.lower()``. Lowering bytes touches ASCII letters only, and is several times
    cheaper than ``str.lower()`` on a text beyond Latin-1, whose every character is then
    looked up. A word of ASCII letters is in one lowered text when it is in the other,
    unless the text holds one of :data:`FOLDING_TO_ASCII`: then the text itself is lowered."""
    if holds_registered(text):
        return True
    if folds_to_ascii(text):
        return _names_a_header(text.lower())
    for word in _HEADER_WORDS_UTF8:
        if word in lowered:
            return True
    return False


def holds_registered(text: str) -> bool:
    """Whether ``text`` holds a registered secret value."""
    pattern = _pattern
    return pattern is not None and pattern.search(text) is not None


def folds_to_ascii(text: str) -> bool:
    """Whether ``text`` holds a character of :data:`FOLDING_TO_ASCII` (one-character
    searches in a str are the fast ones)."""
    if text.isascii():
        return False
    for char in FOLDING_TO_ASCII:
        if char in text:
            return True
    return False


def _names_a_header(lowered: str) -> bool:
    for word in _HEADER_WORDS:
        if word in lowered:
            return True
    return False


_HEADER_WORDS_UTF8 = tuple(word.encode() for word in _HEADER_WORDS)

FOLDING_TO_ASCII = ("\u0130", "\u0131", "\u017f", "\u212a")
"""The only characters beyond ASCII that a case-insensitive regex matches to ASCII letters
("İ" and "ı" to "i", "ſ" to "s", the Kelvin sign to "k"), and the only ones whose lower case
holds an ASCII letter (both found by trying every code point, tests/store/test_codec.py):
in a text without them, a word of ASCII letters is found in the lowered text exactly where
a case-insensitive regex finds it, whatever else the text holds."""


LOGGER_PREFIXES = ("aklab", "pykka")
"""Logger hierarchies whose records are redacted."""


class SecretFilter(logging.Filter):
    """Redacts a record's message, arguments and exception text in place; never drops it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed format: leave it for logging to report
            return True
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.msg, record.args = redact(message), ()
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


_filter = SecretFilter()
_installed = False


def _covered(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in LOGGER_PREFIXES)


def install_log_redaction() -> None:
    """Redact every record of the ``aklab`` and ``pykka`` loggers from now on (idempotent)."""
    global _installed
    with _lock:
        if _installed:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            if _covered(record.name):
                _filter.filter(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True


install_log_redaction()
