"""What a server said when it refused a request: its message, and what to change for it.

The message is read from the error body as servers send it (OpenAI's ``{"error": {"message":
...}}`` and its variants, FastAPI's ``{"detail": ...}``), redacted before it is cut, so no part
of a key the server echoed is left. What to change is named only where the message says
plainly what aklab sent that the server does not take; otherwise the model's settings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from aklab.secrets import redact

__all__ = ["TEMPLATE_ADVICE", "cut", "names_no_model", "server_message", "template_refusal", "what_to_change"]


def server_message(errors: Iterable[BaseException]) -> str | None:
    """The message of the error body the server sent (``{"error": {"message": ...}}`` and its
    variants, a FastAPI ``{"detail": ...}``), on one line and redacted, if one of ``errors``
    (an exception and its causes) carries one."""
    for e in errors:
        body = getattr(e, "body", None)
        if isinstance(body, dict):
            inner = body.get("error", body)
            body = _said_in(inner) if isinstance(inner, dict) else inner
        if isinstance(body, str) and body.strip():
            return " ".join(redact(body).split())
    return None


def _said_in(error: dict[str, Any]) -> str | None:
    message = error.get("message")
    if message is not None or "detail" not in error:
        return message if isinstance(message, str) else None
    detail = error["detail"]  # FastAPI's: a text, or a list of what failed validation, where
    if isinstance(detail, list):
        detail = "; ".join(_invalid(d) for d in detail if isinstance(d, dict))
    return detail if isinstance(detail, str) else None


def _invalid(item: dict[str, Any]) -> str:
    """``{"loc": ["body", "stream_options"], "msg": "Extra inputs are not permitted"}`` as
    ``stream_options: Extra inputs are not permitted``."""
    loc = item.get("loc")
    where = ".".join(str(p) for p in loc[1:]) if isinstance(loc, list) else ""
    return f"{where}: {item.get('msg')}" if where else str(item.get("msg"))


def cut(line: str, limit: int = 120) -> str:
    """``line`` cut to ``limit`` characters where it reads well: after its last sentence that
    fits, else after a word; "…" says where."""
    if len(line) <= limit:
        return line
    head = line[: limit - 2]
    if (end := head.rfind(". ")) >= 40:
        return head[: end + 1] + " …"
    if (end := head.rfind(" ")) >= limit // 2:
        return head[:end].rstrip(",;:") + "…"
    return line[: limit - 1] + "…"


#: A refused request's message that names the model as unknown.
_NO_MODEL = re.compile(
    r"\bmodel\b[^;\n]{0,80}?\b(not found|does not exist|doesn't exist)|\b(unknown|invalid) model\b|\bno such model\b",
    re.IGNORECASE,
)
#: A refused request's message that says a parameter is not taken (OpenAI's "Unsupported
#: parameter", llama-server's "tools param requires --jinja flag", vLLM's "requires
#: --enable-auto-tool-choice", Ollama's "does not support tools", FastAPI's "Extra inputs are not permitted").
_NOT_TAKEN = re.compile(
    r"unsupported|not supported|(does not|doesn't|cannot) support|not permitted|not allowed|unrecognized|"
    r"unknown (param|field|argument)|requires? (the )?--",
    re.IGNORECASE,
)
_TOOLS = re.compile(r"\btools?\b|tool[_ ]choice|parallel_tool_calls", re.IGNORECASE)


def what_to_change(message: str | None) -> str:
    """What to change when the server refused the request for what its ``message`` says: an
    output mode that sends no such parameter where the message names one aklab's output modes
    decide (only ``native`` and ``grammar`` send a ``response_format``; only ``tool`` sends
    tools, a tool choice and, streaming in a lab, ``stream_options``), else the model's settings."""
    message = message or ""
    if re.search(r"response_format|json_schema", message, re.IGNORECASE):
        return "use another output mode (%aklab model ... --output-mode prompted)"
    if _NOT_TAKEN.search(message) and _TOOLS.search(message):
        return "use %aklab model ... --output-mode prompted, or a server with tool calling (llama-server: --jinja)"
    if _NOT_TAKEN.search(message) and "stream_options" in message:
        return "use %aklab model ... --output-mode prompted, which does not stream"
    return "asking again sends the same request: check the model's settings (%aklab model ... options, ModelConfig)"


def names_no_model(message: str | None) -> bool:
    """Does a refused request's ``message`` say the model is unknown?"""
    return message is not None and _NO_MODEL.search(message) is not None


#: A chat template's own refusal as servers pass it on: llama-server's "... Jinja Exception:
#: <what the template raised>", jinja2's ``TemplateError`` text as vLLM and transformers give it.
_TEMPLATE = re.compile(r"(?:Jinja Exception|TemplateError|jinja2\.exceptions\.\w+)\s*:\s*(.+)", re.IGNORECASE)
#: What templates that take only some conversations raise (Gemma's, Mistral's, Llama 2's).
_ROLES = re.compile(
    r"roles must alternate|system role (is )?not supported|only (user and assistant|user/assistant) roles",
    re.IGNORECASE,
)
TEMPLATE_ADVICE = (
    "aklab sends one system message, then user and assistant turns in turn: serve the model with a chat "
    "template that takes them (llama-server: --chat-template-file FILE; vLLM: --chat-template FILE)"
)


def template_refusal(message: str | None) -> str | None:
    """What the model's chat template refused, from a refused request's ``message`` (the
    template's own words), or None if the message is not a template's refusal."""
    if not message:
        return None
    if (raised := _TEMPLATE.search(message)) is not None:
        return raised.group(1).strip() or message
    return message if _ROLES.search(message) else None
