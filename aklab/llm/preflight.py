"""A look at a self-hosted model server before the team uses it: is it there, has it the model?

Switching to ``ollama:qwen3`` while Ollama is not running, or before ``ollama pull qwen3``,
would otherwise show up only when the first ask fails. :func:`server_warning` asks the
server's ``GET /models`` once (a second at most) and says what is wrong in one line, with
what to do. It never fails the switch: the server may be started a moment later.

Cloud providers are not asked (their keys and limits are theirs), and neither is
``local:smollm2`` with no server named (aklab serves that itself). Only Ollama's list is
held to the model's name: llama.cpp's server answers whatever name a request gives.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterable

from aklab.llm.config import ModelConfig
from aklab.secrets import shown_url

__all__ = ["PROBE_TIMEOUT", "TAB_TIMEOUT", "ollama_models", "server_warning", "team_server_warnings"]

#: Seconds the look may take.
PROBE_TIMEOUT = 1.0
#: Seconds a Tab completion may wait for Ollama's list.
TAB_TIMEOUT = 0.3
_SELF_HOSTED = ("local", "ollama", "openai-compatible")


def _listed(body: bytes) -> list[str] | None:
    """The model ids of an OpenAI-style ``/models`` answer; None if it is not one."""
    try:
        data = json.loads(body).get("data")
        return [str(m["id"]) for m in data] if isinstance(data, list) else None
    except (ValueError, AttributeError, KeyError, TypeError):
        return None


def _has(listed: list[str], name: str) -> bool:
    """Ollama lists ``qwen3`` as ``qwen3:latest``."""
    return name in listed or (":" not in name and f"{name}:latest" in listed)


def _models_body(base_url: str, timeout: float) -> bytes:
    """``GET {base_url}/models``; a server on this machine is asked directly (no proxy).
    Raises what ``urlopen`` raises."""
    from aklab.llm.local_server import direct_open
    from aklab.llm.profiles import is_loopback

    url = f"{base_url.rstrip('/')}/models"
    opener = direct_open if is_loopback(url) else urllib.request.urlopen
    with opener(url, timeout=timeout) as response:
        body: bytes = response.read()
    return body


def ollama_models(timeout: float = TAB_TIMEOUT) -> list[str]:
    """The models of the Ollama server ``$OLLAMA_HOST`` names (else the default one), as
    it lists them (``qwen3:latest``); none when it does not answer in ``timeout`` seconds."""
    from aklab.errors import ConfigError
    from aklab.llm.profiles.ollama import HOST_ENV, base_url_from_host

    try:
        body = _models_body(base_url_from_host(os.environ.get(HOST_ENV)), timeout)
    except (ConfigError, urllib.error.URLError, ConnectionError, TimeoutError, OSError, ValueError):
        return []
    return _listed(body) or []


def server_warning(cfg: ModelConfig, *, timeout: float = PROBE_TIMEOUT, address: str = "--base-url") -> str | None:
    """One line on what stops the server ``cfg`` names from answering the team, or None.
    ``address``: where the user sets the server's address (``%aklab model``'s option, a team file)."""
    from aklab.llm import local_auto
    from aklab.llm.profiles import family

    if cfg.provider not in _SELF_HOSTED or not isinstance(cfg.model, str):
        return None
    own = local_auto.shared_server() if cfg.provider == "local" and cfg.model == local_auto.BUNDLED_MODEL else None
    if own is not None and (cfg.base_url is None or cfg.base_url.rstrip("/") == own.base_url.rstrip("/")):
        return None  # aklab's own server, started for this model (another address is probed)
    base_url = family(cfg.provider).endpoint(cfg)  # where the family sends requests; nothing is built
    if not base_url:
        return None
    ollama = cfg.provider == "ollama"
    try:
        body = _models_body(base_url, timeout)
    except urllib.error.HTTPError:
        return None  # something serves there (a key it wants, an older API): the asks will say more
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, ValueError):
        start = " (start it: ollama serve)" if ollama else ""
        where = shown_url(base_url, path=False)
        return (
            f"warning: nothing answers at {where} yet{start}; the team's asks fail until it does "
            f"(check the address: {address}" + (", $OLLAMA_HOST)" if ollama else ")")
        )
    listed = _listed(body)
    if ollama and listed is not None and not _has(listed, cfg.model):
        have = ", ".join(listed[:8]) + (", ..." if len(listed) > 8 else "") if listed else "none"
        return (
            f"warning: Ollama at {shown_url(base_url, path=False)} has no model {cfg.model!r} (it has: {have}); "
            f"ollama pull {cfg.model} fetches it"
        )
    return None


def team_server_warnings(cfgs: Iterable[ModelConfig], *, address: str) -> list[str]:
    """``server_warning`` for each distinct self-hosted server a team's models name, once each."""
    seen: set[tuple[str, str, str | None]] = set()
    warnings = []
    for cfg in cfgs:
        key = (cfg.provider, str(cfg.model), cfg.base_url)
        if key in seen:
            continue
        seen.add(key)
        warning = server_warning(cfg, address=address)
        if warning is not None:
            warnings.append(warning)
    return warnings
