"""Settings for the LLM layer: which model, which prompt, how runs behave.

``ModelConfig()`` is the offline demo model, so everything runs with no key and no
network. A real provider is ``ModelConfig(provider="openai", model="gpt-4.1")``; any
OpenAI-compatible server is ``ModelConfig(provider="openai", model=..., base_url=...)``.
A ready pydantic-ai ``Model`` object (``FunctionModel`` in tests) may be given as
``model=`` instead of a name, and then ``provider`` is ignored.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

__all__ = [
    "DEMO_MODEL_NAME",
    "DEMO_PROVIDER",
    "CompactionConfig",
    "ModelConfig",
    "PromptTemplate",
    "RuntimeConfig",
]

DEMO_PROVIDER = "demo"
DEMO_MODEL_NAME = "aklab-demo"


class ModelConfig(BaseModel):
    """Which model an agent talks to."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    provider: str = DEMO_PROVIDER
    """``demo`` (offline, default), or a pydantic-ai provider: openai, anthropic,
    google, mistral, openrouter, ..."""
    model: Any = DEMO_MODEL_NAME
    """A model name for the provider, or a pydantic-ai ``Model`` object."""
    base_url: str | None = None
    """Endpoint of an OpenAI-compatible server (Ollama, vLLM, llama.cpp)."""
    api_key_env: str | None = None
    """Name of the environment variable holding the key (never the key itself)."""
    temperature: float | None = None
    max_tokens: int | None = None
    context_length: int | None = None
    """Context window in tokens; setting it turns on automatic compaction."""
    demo_latency: float = 0.0
    """Demo model only: simulated seconds of thinking per model request (0 = instant)."""

    @field_serializer("model")
    def _serialize_model(self, model: Any) -> str:
        return model if isinstance(model, str) else str(getattr(model, "model_name", model))

    @property
    def label(self) -> str:
        """``provider:model`` for display (``demo:aklab-demo``)."""
        if isinstance(self.model, str):
            return f"{self.provider}:{self.model}"
        return str(getattr(self.model, "model_name", type(self.model).__name__))

    @classmethod
    def parse(cls, spec: str) -> ModelConfig:
        """``"openai:gpt-4.1"`` -> ``ModelConfig(provider="openai", model="gpt-4.1")``."""
        provider, sep, model = spec.partition(":")
        if not sep or not provider or not model:
            from aklab.errors import ConfigError

            raise ConfigError(f"model spec {spec!r} must look like 'provider:model', e.g. 'openai:gpt-4.1'")
        return cls(provider=provider, model=model)


class PromptTemplate(BaseModel):
    """A system prompt with ``{placeholders}`` filled from ``params``."""

    template: str = "You are a helpful assistant."
    params: dict[str, str] = Field(default_factory=dict)

    def render(self) -> str:
        return self.template.format(**self.params) if self.params else self.template


class RuntimeConfig(BaseModel):
    """How a run behaves: retries, end strategy, parallel tools, HTTP client."""

    retries: int = 3
    output_retries: int | None = None
    end_strategy: Literal["early", "exhaustive", "graceful"] = "exhaustive"
    parallel_tool_calls: bool = True
    http_timeout: float = 120.0
    stream: bool = True
    """Stream the model's output so outgoing messages can be shown while they are written
    (only when the model can stream and someone listens: ``ReactAgent(on_stream=...)``)."""


class CompactionConfig(BaseModel):
    """Context compaction (off unless ``ModelConfig.context_length`` is set)."""

    strategy: Literal["sliding_window", "summarize"] = "sliding_window"
    trigger_ratio: float = 0.8
    """Compact when the history passes this fraction of the context length."""
    keep_last: int = 8
    """Messages kept verbatim at the tail."""
