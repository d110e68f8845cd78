"""Ollama's server: ``ollama:NAME`` (``ollama:qwen3``, ``ollama:llama3.2:3b``).

The endpoint is ``base_url``, else the one ``$OLLAMA_HOST`` names (as Ollama's own CLI reads
it: ``host``, ``host:port`` or a URL; ``0.0.0.0`` means this machine), else Ollama's default
``http://127.0.0.1:11434/v1``. Ollama's OpenAI-compatible API speaks the dialect of
``openai_compatible``, needs no key, and on this machine costs nothing.

Two defaults differ from Ollama's own. The context window aklab sizes compaction from is
4,096 tokens, Ollama's default ``num_ctx``: a prompt longer than that is cut by Ollama without
an error, so the agent's history is kept under it (a server started with a larger
``OLLAMA_CONTEXT_LENGTH`` takes ``--context-length N``). And a reply is capped at 2,048
tokens, where Ollama would let a model write until its context is full. The temperature is
the model's own (its Modelfile's), which aklab leaves alone.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from aklab.errors import ConfigError
from aklab.llm.config import ModelConfig
from aklab.llm.profiles._base import BuildContext, Family, ResolvedModel, is_loopback
from aklab.llm.profiles.openai_compatible import build_compatible

__all__ = ["DEFAULT_BASE_URL", "FAMILY", "HOST_ENV", "OllamaFamily", "base_url_from_host"]

DEFAULT_BASE_URL = "http://127.0.0.1:11434/v1"
HOST_ENV = "OLLAMA_HOST"
_DEFAULT_PORT = 11434


def base_url_from_host(host: str | None) -> str:
    """The OpenAI-compatible endpoint of the Ollama server ``host`` names (``$OLLAMA_HOST``'s
    forms: ``host``, ``host:port``, ``http(s)://host[:port][/path]``); the default one for None."""
    if host is None or not host.strip():
        return DEFAULT_BASE_URL
    raw = host.strip()
    if "://" not in raw:
        raw = f"http://{raw}"
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{HOST_ENV}={host!r} is not a host[:port] or URL: {exc}") from exc
    if parts.scheme not in ("http", "https"):
        raise ConfigError(f"{HOST_ENV}={host!r}: use http:// or https://")
    hostname = parts.hostname or "127.0.0.1"
    if hostname in ("0.0.0.0", "::"):  # a server listening on every address: reach it here
        hostname = "127.0.0.1"
    if ":" in hostname:
        hostname = f"[{hostname}]"
    if port is None:
        port = 443 if parts.scheme == "https" else _DEFAULT_PORT
    return f"{parts.scheme}://{hostname}:{port}{parts.path.rstrip('/')}/v1"


class OllamaFamily(Family):
    name = "ollama"
    extra = "openai"
    default_output_mode = "prompted"
    default_max_tokens = 2_048
    default_context_length = 4_096

    def endpoint(self, cfg: ModelConfig) -> str:
        return cfg.base_url or base_url_from_host(os.environ.get(HOST_ENV))

    def build(self, ctx: BuildContext) -> ResolvedModel:
        base_url = self.endpoint(ctx.cfg)
        api_key = ctx.api_key(required=False)  # a proxy in front of Ollama may want one (--api-key-env)
        return build_compatible(self, ctx, base_url=base_url, api_key=api_key, local=is_loopback(base_url))


FAMILY = OllamaFamily()
