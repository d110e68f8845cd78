"""Records to rows and back.

A row's ``payload`` is JSON: ``{"v": 1, "type": "<record class path>", "fields": {...}}``.
Each field is stored as JSON; an object field (the message a ``SentMessage`` carries, an
event, an agent config) is ``{"$type": "<class path>", "$data": <its model_dump>}`` so a
reader can rebuild it. An ``ActorAddress`` becomes its identity ``{agent_id, name, role,
team_id, is_user_proxy}``, never the live actor reference.

Secrets never enter a row: every string in a payload (keys too) goes through
:func:`aklab.secrets.redact`, and the value under a key that names a credential
(``authorization``, ``api_key``, ``password``, ``token``...) is replaced outright.

Rebuilding imports a class only from a module already imported or from ``aklab``
itself: rows of a shared database name classes, and reading them must not import
arbitrary modules. An object whose class cannot be found or no longer validates comes
back as its plain dict (for a message: as a base ``Message``).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import re
import sys
from datetime import UTC, datetime
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from aklab.core import ActorAddress, EventMessage, Message, OrchestratorMessage
from aklab.secrets import REDACTED, folds_to_ascii, holds_registered, might_redact_utf8, redact

__all__ = ["PAYLOAD_VERSION", "Row", "class_path", "decode", "encode", "scrub"]

PAYLOAD_VERSION = 1
_MAX_REPR = 500
_CREDENTIAL_KEY = re.compile(
    r"(?i)^(?:authorization|proxy-authorization|x-api-key|api[-_]?key|x-goog-api-key|password|passwd|secret|"
    r"client[-_]secret|access[-_]token|refresh[-_]token|token|bearer)$"
)

_CREDENTIAL_IN_JSON = re.compile(
    r'(?i)"(?:authorization|proxy-authorization|x-api-key|api[-_]?key|x-goog-api-key|password|passwd|secret|'
    r'client[-_]secret|access[-_]token|refresh[-_]token|token|bearer)":'
)

# The keys _CREDENTIAL_IN_JSON matches, spelled out: on ASCII text, looking for each one in
# the lowered text finds the same keys as the regex, several times faster (a stored agent
# snapshot is kilobytes long and mentions "...tokens" keys, which made the regex run).
_CREDENTIAL_KEYS = tuple(
    f'"{key}":'
    for key in (
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "apikey",
        "api-key",
        "api_key",
        "x-goog-api-key",
        "password",
        "passwd",
        "secret",
        "client-secret",
        "client_secret",
        "access-token",
        "access_token",
        "refresh-token",
        "refresh_token",
        "token",
        "bearer",
    )
)


def _credential_key_utf8(text: str, raw: bytes, lowered: bytes) -> bool:
    """Whether the JSON ``text`` has a key naming a credential, looked for in its UTF-8 bytes
    ``raw`` (``lowered`` = ``raw.lower()``: see :func:`aklab.secrets.might_redact_utf8` for
    why that finds what ``_CREDENTIAL_IN_JSON`` finds)."""
    if folds_to_ascii(text):
        return _CREDENTIAL_IN_JSON.search(text) is not None
    for end in _KEY_ENDS_UTF8:
        if end in lowered:
            return any(key in lowered for key in _CREDENTIAL_KEYS_UTF8)
    return False


#: Every header word ``redact`` looks for and every key ``_CREDENTIAL_IN_JSON`` matches holds
#: one of these, lowered: a payload whose lowered bytes hold none needs neither check, only
#: the one for registered values. Six searches instead of the eleven of both checks (each
#: costs about as much as lowering the text; "token" alone is in every usage's keys).
_TELLTALES = (b"authoriz", b"key", b"passw", b"secret", b'token"', b"bearer")

_KEY_ENDS = ('authorization":', 'key":', 'password":', 'passwd":', 'secret":', 'token":', 'bearer":')
_KEY_ENDS_UTF8 = tuple(end.encode() for end in _KEY_ENDS)
_CREDENTIAL_KEYS_UTF8 = tuple(key.encode() for key in _CREDENTIAL_KEYS)


class Row(NamedTuple):
    """The columns of one ``events`` row, in table order (``seq`` is assigned by the database)."""

    team_id: str
    record_id: str
    ask_id: str | None
    kind: str
    event_type: str | None
    message_id: str | None
    sender: str | None
    sender_role: str | None
    sender_id: str | None
    recipient: str | None
    recipient_id: str | None
    created_at: datetime
    payload: str


def class_path(klass: type) -> str:
    return f"{klass.__module__}.{klass.__qualname__}"


def encode(record: OrchestratorMessage, team_id: str) -> Row:
    """The row for ``record`` (payload redacted)."""
    values = record.__dict__  # a model's fields (getattr of one it lacks costs a formatted AttributeError)
    fields = {name: _wrapped(values.get(name)) for name in type(record).model_fields}
    payload = {"v": PAYLOAD_VERSION, "type": class_path(type(record)), "fields": fields}
    sender, recipient = record.sender, record.recipient
    created = record.created_at
    created = created.replace(tzinfo=UTC) if created.tzinfo is None else created.astimezone(UTC)
    return Row(
        team_id,
        record.id,
        record.ask_id,
        type(record).__name__,
        type(record.event).__name__ if isinstance(record, EventMessage) else None,
        _message_id(values),
        sender.name if sender is not None else None,
        sender.role if sender is not None else None,
        sender.agent_id if sender is not None else None,
        recipient.name if recipient is not None else None,
        recipient.agent_id if recipient is not None else None,
        created,
        _payload_text(payload),
    )


def _payload_text(payload: dict[str, Any]) -> str:
    """The payload as JSON, scrubbed. pydantic-core writes it in one call (models and
    dataclasses in it included: twice as fast as dumping them to dicts and those to JSON;
    NaN and infinities as null). Most payloads hold nothing to redact: one ``redact`` over
    the whole text finds that (a secret or header in any string is in the text too), and
    only a payload where it finds something, or a credential-named key, is walked string
    by string (which is what is stored then)."""
    try:
        raw = to_json(payload, by_alias=False, fallback=_fallback, serialize_as_any=True, inf_nan_mode="null")
        text = raw.decode()
    except PydanticSerializationError:  # a value pydantic cannot write even with the fallback: field by field
        text = json.dumps(_plain(payload), ensure_ascii=False, separators=(",", ":"), default=str)
        raw = text.encode()
    lowered = raw.lower()  # bytes: ASCII letters only, see might_redact_utf8
    if folds_to_ascii(text) or any(word in lowered for word in _TELLTALES):
        clean = not might_redact_utf8(text, raw, lowered) and not _credential_key_utf8(text, raw, lowered)
    else:
        clean = not holds_registered(text)
    if clean:
        return text
    return json.dumps(scrub(json.loads(text)), ensure_ascii=False, separators=(",", ":"))


def _wrapped(value: Any) -> Any:
    """A field value ready for ``to_json``: a model or dataclass tagged with its class."""
    klass = type(value)
    try:
        how = _WRAPPING[klass]
    except KeyError:
        how = _WRAPPING[klass] = _wrapping(klass)
    if how is None:
        return value
    if how is _ADDRESS:
        return value.to_dict()
    return {"$type": how, "$data": value}


#: How ``_wrapped`` writes a value, by its class: as it is (None), as an address's identity
#: (``_ADDRESS``), or tagged with this class path. One lookup per field instead of a chain
#: of isinstance checks (``isinstance(x, BaseModel)`` goes through ABCMeta), which on the
#: first record after a model turn, with cold caches, cost more than writing the JSON.
_WRAPPING: dict[type, str | None] = {}
_ADDRESS = "$address"


def _wrapping(klass: type) -> str | None:
    if issubclass(klass, ActorAddress):
        return _ADDRESS
    if issubclass(klass, BaseModel) or (dataclasses.is_dataclass(klass) and not issubclass(klass, type)):
        return class_path(klass)
    return None


def _plain(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with every field dumped on its own (the slow path, for odd values)."""
    fields = {name: _value(v["$data"] if _tagged(v) else v) for name, v in payload["fields"].items()}
    return {**payload, "fields": fields}


def _tagged(value: Any) -> bool:
    return isinstance(value, dict) and "$data" in value and not isinstance(value["$data"], dict | list)


def _message_id(values: dict[str, Any]) -> str | None:
    """The id of the message a record is about, from the record's field values."""
    inner = values.get("message") or values.get("current_message")
    if isinstance(inner, Message):
        return inner.id
    handled = values.get("message_id")
    return handled if isinstance(handled, str) else None


def _fallback(obj: Any) -> Any:
    if isinstance(obj, ActorAddress):
        return obj.to_dict()
    return f"<{class_path(type(obj))}: {repr(obj)[:_MAX_REPR]}>"


def _value(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, ActorAddress):
        return value.to_dict()
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, BaseModel):
        return {"$type": class_path(type(value)), "$data": _dump_model(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"$type": class_path(type(value)), "$data": to_jsonable_python(value, fallback=_fallback)}
    return to_jsonable_python(value, fallback=_fallback)


def _dump_model(model: BaseModel) -> Any:
    try:
        return model.model_dump(mode="json", warnings=False, fallback=_fallback, serialize_as_any=True)
    except Exception:  # a field pydantic cannot serialize even with the fallback
        try:
            return model.model_dump(mode="json", warnings=False, fallback=_fallback)
        except Exception:
            return {"$repr": repr(model)[:_MAX_REPR]}


def scrub(value: Any) -> Any:
    """``value`` (JSON-able) with every string redacted, credentials removed and NaN as null."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            key = redact(str(key))
            if isinstance(item, str) and item and _CREDENTIAL_KEY.match(key):
                out[key] = REDACTED
            else:
                out[key] = scrub(item)
        return out
    if isinstance(value, list | tuple):
        return [scrub(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# -- reading ----------------------------------------------------------------------------
def resolve(path: str) -> type | None:
    """The class at ``path`` if its module is already imported or is part of aklab."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):  # the longest module prefix first (nested classes)
        module_name = ".".join(parts[:cut])
        module = sys.modules.get(module_name)
        if module is None and (module_name == "aklab" or module_name.startswith("aklab.")):
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                module = None
        if module is None:
            continue
        obj: Any = module
        for part in parts[cut:]:
            obj = getattr(obj, part, None)
        return obj if isinstance(obj, type) else None
    return None


def _rebuild(value: Any, base: type | None = None) -> Any:
    if not (isinstance(value, dict) and "$type" in value):
        return value
    data = value.get("$data")
    klass = resolve(str(value["$type"]))
    if klass is not None and isinstance(data, dict):
        try:
            if issubclass(klass, BaseModel):
                return klass.model_validate(data)
            if dataclasses.is_dataclass(klass):
                return klass(**data)
        except (ValidationError, TypeError, ValueError):
            pass
    if base is not None and isinstance(data, dict):
        try:
            return base.model_validate(data)  # type: ignore[attr-defined]
        except ValidationError:
            pass
    return data


def decode(payload: dict[str, Any]) -> OrchestratorMessage:
    """The typed record a payload was made from (see the module docstring for what falls back)."""
    klass = resolve(str(payload.get("type", "")))
    if not (isinstance(klass, type) and issubclass(klass, OrchestratorMessage)):
        klass = OrchestratorMessage
    fields: dict[str, Any] = {}
    for name, raw in dict(payload.get("fields") or {}).items():
        info = klass.model_fields.get(name)
        if info is None:
            continue
        base = Message if name in ("message", "current_message") else None
        fields[name] = _rebuild(raw, base)
    return klass.model_validate(fields)
