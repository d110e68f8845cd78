"""What a function's signature is made of, as a key: for caching what is derived from it.

Cards hand every agent fresh closures of the same code, so what pydantic-ai and the
command registry derive from a signature (JSON schemas, validators, descriptions) is
the same for all of them and worth building once per process.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["SignatureCache", "signature_key"]

V = TypeVar("V")


def signature_key(fn: Any) -> Hashable | None:
    """Equal keys mean equal signatures, names and docstrings; None when that cannot be told.

    A bound method is keyed by its function (its signature drops ``self`` either way).
    """
    bound = inspect.ismethod(fn)
    if bound:
        fn = fn.__func__
    if not inspect.isfunction(fn) or hasattr(fn, "__signature__"):
        return None  # not a plain function, or a signature given by hand
    wrapped = None
    if hasattr(fn, "__wrapped__"):  # a decorated function: its signature is the wrapped one's
        wrapped = signature_key(fn.__wrapped__)
        if wrapped is None:
            return None
    kwdefaults = fn.__kwdefaults__
    key = (
        bound,
        wrapped,
        fn.__code__,
        id(fn.__globals__),  # annotations written as strings are resolved there
        fn.__module__,
        fn.__name__,
        fn.__qualname__,
        fn.__doc__,
        tuple((type(v), v) for v in fn.__defaults__ or ()),
        tuple(sorted((k, type(v), v) for k, v in kwdefaults.items())) if kwdefaults else None,
        tuple(fn.__annotations__.items()),
    )
    try:
        hash(key)
    except TypeError:
        return None  # e.g. a list as a default
    return key


class SignatureCache(Generic[V]):
    """A bounded, thread-safe map from :func:`signature_key` to what was built from it."""

    def __init__(self, size: int = 512) -> None:
        self._size = size
        self._items: dict[Hashable, V] = {}
        self._lock = threading.Lock()

    def get(self, fn: Any, build: Callable[[Any], V]) -> V:
        """The value for ``fn``'s signature: ``build(fn)`` (outside the lock) when not yet known."""
        key = signature_key(fn)
        if key is None:
            return build(fn)
        with self._lock:
            if key in self._items:
                return self._items[key]
        value = build(fn)
        with self._lock:
            if len(self._items) >= self._size:
                self._items.clear()  # functions made on the fly must not grow it for ever
            self._items[key] = value
        return value
