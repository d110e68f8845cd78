"""Turn a ModelConfig into a pydantic-ai Model. The only place that builds providers."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from aklab.errors import ConfigError
from aklab.llm.config import DEMO_PROVIDER, ModelConfig

if TYPE_CHECKING:
    from pydantic_ai.models import Model

__all__ = ["build_model"]

_EXTRAS = {
    "openai": "openai",
    "openrouter": "openai",
    "anthropic": "anthropic",
    "google": "google",
    "google-gla": "google",
    "mistral": "mistral",
    "groq": "groq",
}


def build_model(cfg: ModelConfig) -> Model:
    """The pydantic-ai model for ``cfg``. Keys come from the environment only."""
    from pydantic_ai.models import Model

    if isinstance(cfg.model, Model):
        return cfg.model
    if not isinstance(cfg.model, str):
        raise ConfigError(f"ModelConfig.model must be a name or a pydantic-ai Model, not {cfg.model!r}")
    if cfg.provider == DEMO_PROVIDER:
        from aklab.llm.demo import demo_model

        return demo_model(cfg.model, latency=cfg.demo_latency)
    if cfg.base_url is not None:
        return _openai_compatible(cfg)
    from pydantic_ai.models import infer_model

    try:
        return infer_model(f"{cfg.provider}:{cfg.model}")
    except ImportError as exc:
        extra = _EXTRAS.get(cfg.provider, cfg.provider)
        raise ConfigError(f"provider {cfg.provider!r} needs its SDK: pip install 'pydantic-ai-slim[{extra}]'") from exc
    except Exception as exc:
        raise ConfigError(f"cannot build model {cfg.label}: {exc}") from exc


def _openai_compatible(cfg: ModelConfig) -> Model:
    try:
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider
    except ImportError as exc:
        raise ConfigError("an OpenAI-compatible base_url needs: pip install 'pydantic-ai-slim[openai]'") from exc
    key = os.environ.get(cfg.api_key_env) if cfg.api_key_env else None
    provider = OpenAIProvider(base_url=cfg.base_url, api_key=key or "not-needed")
    return OpenAIChatModel(str(cfg.model), provider=provider)
