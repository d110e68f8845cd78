"""Settings for the LLM layer: which model, which prompt, how runs behave.

``ModelConfig()`` is the offline demo model, so everything runs with no key and no
network. A real model is named by a spec, ``provider:model`` plus options::

    ModelConfig.parse("openai:gpt-4.1")
    ModelConfig.parse("local:smollm2")                      # 127.0.0.1:8080; a Lab starts aklab's if none answers
    ModelConfig.parse("openai-compatible:qwen3", base_url="http://gpu-box:8000/v1")

``aklab.llm.profiles`` turns a config into a pydantic-ai model, one profile per family.
A ready pydantic-ai ``Model`` object (``FunctionModel`` in tests) may be given as
``model=`` instead of a name; ``provider`` is then ignored, and copies of the config share
that object (a model holds clients and locks, which cannot be copied).

A bad value is refused when the config is made, as one ``ConfigError`` line naming the
field and what to give instead (``ModelConfig(model=123)``, an empty model name, a NaN,
infinite or negative timeout, temperature or token cap); the pydantic ``ValidationError``
is kept as ``__cause__``.

Compaction is on by default: every model has a context length (``context_length``, else
its family's default: ``aklab.llm.profiles``), and an agent's history is compacted when a
request fills it past ``CompactionConfig.trigger_ratio``. ``CompactionConfig(enabled=False)``
turns that off (``/compact`` still works by hand).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Self, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_serializer, field_validator

__all__ = [
    "DEMO_MODEL_NAME",
    "DEMO_PROVIDER",
    "OUTPUT_MODES",
    "CompactionConfig",
    "ModelConfig",
    "OutputModeSetting",
    "PromptTemplate",
    "RuntimeConfig",
    "check_base_url",
]

DEMO_PROVIDER = "demo"
DEMO_MODEL_NAME = "aklab-demo"

OutputModeSetting = Literal["auto", "tool", "native", "prompted", "grammar", "text"]
OUTPUT_MODES: tuple[str, ...] = get_args(OutputModeSetting)


class _OneLineErrors(BaseModel):
    """Construction refuses bad values as one ``ConfigError`` line (the ValidationError is its
    cause), a misspelt setting included: it would otherwise be dropped without a word."""

    model_config = ConfigDict(extra="forbid")

    def __init__(self, **data: Any) -> None:
        from aklab.errors import ConfigError

        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(f"{type(self).__name__}: {_first_error(exc)}") from exc


def check_base_url(base_url: str) -> str:
    """``base_url`` stripped, if it is an http(s) URL with a host; else ``ValueError`` saying
    what to give. A typo fails where the model is named, in one line, not at the first ask."""
    url = base_url.strip()
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # a port that is not a number raises here
    except ValueError as exc:
        raise ValueError(f"{base_url!r} is not a URL ({exc}); give one such as http://127.0.0.1:8080/v1") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        hint = f" (did you mean http://{url}?)" if "://" not in url else ""
        raise ValueError(f"{base_url!r}: give an http:// or https:// URL, such as http://127.0.0.1:8080/v1{hint}")
    return url


class ModelConfig(_OneLineErrors):
    """Which model an agent talks to, and how aklab talks to it."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    provider: str = DEMO_PROVIDER
    """The model family: ``demo`` (offline, default), ``openai``, ``openai-compatible``,
    ``local``, ``ollama``, ``anthropic``, ``google``, ``mistral`` or ``openrouter``."""
    model: Any = DEMO_MODEL_NAME
    """A model name for the provider, or a ready pydantic-ai ``Model`` object."""
    base_url: str | None = None
    """Endpoint of an OpenAI-compatible server (llama.cpp, Ollama, vLLM), or another
    endpoint for the provider's API. ``openai`` with a base URL uses Chat Completions."""
    api_key_env: str | None = None
    """Name of the environment variable holding the key (never the key itself); None
    means the provider's usual one (``OPENAI_API_KEY``, ...). Local servers need none."""
    temperature: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Sampling temperature sent to the model; None means the family's default (0.2 for
    ``local``), else the server's own."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Cap on the tokens of one response, sent in the server's dialect (``max_tokens``
    or ``max_completion_tokens``); None means the family's default (768 for ``local``),
    else the server's own."""
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """HTTP timeout of one request in seconds; None uses ``RuntimeConfig.http_timeout``."""
    retries: int | None = Field(default=None, ge=0)
    """How often the provider's SDK retries a failed request; None means 1."""
    output_mode: OutputModeSetting = "auto"
    """How the model returns structured output: ``tool`` (an output-tool call),
    ``native`` (a JSON-schema response format), ``prompted`` (JSON described in the
    prompt; prose falls back to a reply), ``grammar`` (prompted, and decoded under the
    JSON schema where the server can: llama.cpp), ``text`` (plain text only), or
    ``auto``: the family's default (``prompted`` for local, Ollama and OpenAI-compatible servers,
    ``tool`` elsewhere)."""
    context_length: int | None = Field(default=None, gt=0)
    """Context window in tokens, which automatic compaction is sized from; None means the
    family's default (``Family.default_context_length``: the demo model 8,192, ``local``
    4,096, the cloud providers their models' usual windows)."""
    demo_latency: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    """Demo model only: simulated seconds of thinking per model request (0 = instant)."""

    @field_validator("provider", mode="after")
    @classmethod
    def _check_provider(cls, provider: str) -> str:
        if not provider.strip():
            raise ValueError("give a provider such as 'openai', 'local' or 'demo'")
        return provider.strip()

    @field_validator("base_url", mode="after")
    @classmethod
    def _check_base_url(cls, base_url: str | None) -> str | None:
        return None if base_url is None else check_base_url(base_url)

    @field_validator("model", mode="after")
    @classmethod
    def _check_model(cls, model: Any) -> Any:
        if isinstance(model, str):
            if not model.strip():
                raise ValueError("empty: give a model name such as 'gpt-4.1' (or a pydantic-ai Model object)")
            return model.strip()
        from pydantic_ai.models import Model

        if not isinstance(model, Model):
            raise ValueError(
                f"got {type(model).__name__} {model!r}: give a model name such as 'gpt-4.1' "
                "(or a pydantic-ai Model object)"
            )
        return model

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        # A ready Model holds HTTP clients and locks: copies share it, like a reference.
        memo = {} if memo is None else memo
        if not isinstance(self.model, str):
            memo[id(self.model)] = self.model
        return super().__deepcopy__(memo)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        if deep and not isinstance(self.model, str) and not (update and "model" in update):
            copied = super().model_copy(update={**(update or {}), "model": self.model}, deep=True)
            if "model" not in self.model_fields_set:
                copied.model_fields_set.discard("model")
            return copied
        return super().model_copy(update=update, deep=deep)

    @field_serializer("model")
    def _serialize_model(self, model: Any) -> str:
        return model if isinstance(model, str) else str(getattr(model, "model_name", model))

    @property
    def label(self) -> str:
        """``provider:model`` for display (``demo:aklab-demo``); a ready model's name."""
        if isinstance(self.model, str):
            return f"{self.provider}:{self.model}"
        return str(getattr(self.model, "model_name", type(self.model).__name__))

    @classmethod
    def parse(cls, spec: str, **options: Any) -> ModelConfig:
        """``"openai:gpt-4.1"`` -> ``ModelConfig(provider="openai", model="gpt-4.1")``.

        ``options`` are the other fields (``base_url=``, ``temperature=``, ...); options
        that are None are left at their defaults. Mistakes raise a one-line ``ConfigError``.
        """
        from aklab.errors import ConfigError

        provider, sep, model = spec.strip().partition(":")
        if not sep or not provider or not model:
            raise ConfigError(f"model spec {spec!r} must look like 'provider:model', e.g. 'openai:gpt-4.1'")
        given = {k: v for k, v in options.items() if v is not None}
        if "provider" in given or "model" in given:
            raise ConfigError(f"model {spec!r}: give the provider and the model in the spec only")
        try:
            return cls(provider=provider, model=model, **given)
        except ConfigError as exc:
            cause = exc.__cause__
            line = _first_error(cause) if isinstance(cause, ValidationError) else str(exc)
            raise ConfigError(f"model {spec!r}: {line}") from exc


def _first_error(exc: ValidationError) -> str:
    """One line for the first problem: ``output_mode: use one of auto, tool, ...``."""
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"])
    if error["type"] == "extra_forbidden":
        return f"unknown option {where!r}"
    if where == "output_mode":
        return f"unknown output_mode {error.get('input')!r}: use one of {', '.join(OUTPUT_MODES)}"
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "finite_number":
        return f"{where}: got {error.get('input')!r}; give a finite number"
    if error["type"] in ("greater_than", "greater_than_equal", "less_than_equal"):
        return f"{where}: {message} (got {error.get('input')!r})"
    return f"{where}: {message}"


class PromptTemplate(BaseModel):
    """A system prompt with ``{placeholders}`` filled from ``params``."""

    model_config = ConfigDict(extra="forbid")

    template: str = "You are a helpful assistant."
    params: dict[str, str] = Field(default_factory=dict)

    def render(self) -> str:
        return self.template.format(**self.params) if self.params else self.template


class RuntimeConfig(_OneLineErrors):
    """How a run behaves: retries, end strategy, parallel tools, HTTP client."""

    retries: int = Field(default=3, ge=0)
    """Retries of a tool call the model got wrong (pydantic-ai's ``retries``)."""
    output_retries: int | None = Field(default=None, ge=0)
    """Retries of an output the model got wrong; None means ``retries``."""
    end_strategy: Literal["early", "exhaustive", "graceful"] = "exhaustive"
    """What pydantic-ai does with tool calls made next to the final output."""
    parallel_tool_calls: bool = True
    """Let the model call several tools in one response (sent where the API takes it)."""
    http_timeout: float = Field(default=120.0, gt=0, allow_inf_nan=False)
    """HTTP timeout of one model request in seconds, unless ``ModelConfig.timeout`` is set."""
    stream: bool = True
    """Stream the model's output so outgoing messages can be shown while they are written
    (only when the model can stream and someone listens: ``ReactAgent(on_stream=...)``)."""


RECENT_RUNS = 4
"""Runs an agent's history keeps whole when folding, unless its config or its model family says otherwise."""


class CompactionConfig(_OneLineErrors):
    """Context compaction: on by default, sized from the model's context length.

    The context length is ``ModelConfig.context_length``, else the model family's default
    (``aklab.llm.profiles``); ``enabled=False`` turns automatic compaction off.
    """

    enabled: bool = True
    """Compact automatically when a request fills the context past ``trigger_ratio``, and
    fold old runs into the digest. False: the history grows until the model refuses it
    (``/compact`` still works)."""
    strategy: Literal["sliding_window", "summarize"] = "sliding_window"
    trigger_ratio: float = Field(default=0.8, gt=0, le=1, allow_inf_nan=False)
    """Compact when the history passes this fraction of the context length."""
    keep_last: int = Field(default=8, ge=0)
    """Runs (turns) kept verbatim at the tail."""
    digest: bool = True
    """Fold runs older than ``recent_runs`` into a digest at the head of the history: one
    shortened line per run (what arrived, what was sent), so old turns cost a line, not
    their whole text. False: every run stays whole until the context fills."""
    recent_runs: int | None = Field(default=None, ge=1)
    """Runs kept whole when folding; folding waits until half as many again have piled up,
    so the history's head (and a provider's prompt cache) changes only every few runs.
    None: the model family's choice (``Profile.recent_runs``: 2 for ``local:`` models,
    else ``RECENT_RUNS``)."""
    digest_chars: int = Field(default=4_000, ge=200)
    """Most characters the digest may hold; its oldest lines go first."""
    digest_line_chars: int = Field(default=48, ge=16)
    """Characters kept of each text a digest line quotes (the rest is cut with "…")."""
