"""The profile machinery: ``Profile``, ``ResolvedModel``, ``Family`` and ``resolve()``.

A family turns a ``ModelConfig`` into a pydantic-ai model: it builds the provider's client
with aklab's timeout and retries, the ``ModelSettings`` every request carries, a
pydantic-ai model profile in the server's dialect, and the :class:`Profile` the run loop
reads. Families live one per module next to this one and are looked up by name, so the
run loop never asks which provider it talks to.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from importlib import import_module
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast
from urllib.parse import urlsplit

from aklab.errors import ConfigError
from aklab.llm.config import ModelConfig, RuntimeConfig
from aklab.secrets import register_secret

if TYPE_CHECKING:
    import httpx2
    from pydantic_ai.models import Model
    from pydantic_ai.profiles import ModelProfile
    from pydantic_ai.settings import ModelSettings

__all__ = [
    "DEFAULT_RETRIES",
    "FAMILY_MODULES",
    "BuildContext",
    "Family",
    "OutputMode",
    "Profile",
    "ResolvedModel",
    "family",
    "is_loopback",
    "needs_sdk",
    "resolve",
]

OutputMode = Literal["tool", "native", "prompted", "text"]

DEFAULT_RETRIES = 1
"""Provider SDK retries when ``ModelConfig.retries`` is None (the SDKs' own default is 2)."""

FAMILY_MODULES: dict[str, str] = {
    "demo": "demo",
    "openai": "openai",
    "openai-compatible": "openai_compatible",
    "local": "local",
    "ollama": "ollama",
    "anthropic": "anthropic",
    "google": "google",
    "mistral": "mistral",
    "openrouter": "openrouter",
}
"""Provider name -> module of ``aklab.llm.profiles`` that defines its ``FAMILY``."""

_ALIASES = {"google-gla": "google"}


@dataclass(frozen=True)
class Profile:
    """What the run loop needs to know about a model, decided once when it is built."""

    family: str
    """The family that built the model: ``demo``, ``openai``, ``openai-compatible``,
    ``local``, ``ollama``, ``anthropic``, ``google``, ``mistral``, ``openrouter``, or ``custom`` for a
    ready pydantic-ai ``Model``."""
    label: str
    """The one model label of this agent's usage rows, e.g. ``local:smollm2``."""
    output_mode: OutputMode
    """How structured output is asked for (``ModelConfig.output_mode`` with ``auto`` resolved)."""
    constrain_json: bool = False
    """In prompted mode, send ``response_format: {"type": "json_object", "schema": ...}``
    (llama.cpp's grammar-constrained JSON)."""
    local: bool = False
    """A server on this machine: its usage costs 0 (cost source ``local``)."""
    state_in_system: bool = False
    """Send the team's latest full state in the system message, not at the head of a user turn
    (``aklab.llm.system_state``). The OpenAI-compatible dialect does: on SmolLM2-135M, nine
    workload questions each asked as a team's first (8 seeds) got the expected word 55 times in
    72 with the state in the user's turn, 67 with it in the system message; ten-question
    sessions (40 seeds) 7.5 answers with the expected word against 6.0."""
    recent_runs: int | None = None
    """Runs an agent keeps whole before older ones fold into the digest, when its
    ``CompactionConfig.recent_runs`` is None (None here: ``config.RECENT_RUNS``)."""
    context_length: int | None = None
    """The context window automatic compaction is sized from, in tokens:
    ``ModelConfig.context_length``, else the family's ``default_context_length``
    (None only for a ready pydantic-ai ``Model`` whose profile names no window)."""


class _OwnedClient:
    """An HTTP client aklab created, and the event loop its connections belong to."""

    def __init__(self, client: httpx2.AsyncClient) -> None:
        self.client = client
        self.loop: asyncio.AbstractEventLoop | None = None
        client.event_hooks = {**client.event_hooks, "request": [*client.event_hooks["request"], self._seen]}

    async def _seen(self, request: object) -> None:
        self.loop = asyncio.get_running_loop()

    def close(self) -> None:
        if self.client.is_closed:
            return
        loop = self.loop
        if loop is None or loop.is_closed():
            # Never used (nothing bound to a loop), or its loop is gone: close it on a loop of its own.
            _run_alone(self.client.aclose())
        elif not loop.is_running():
            _run_on(loop, self.client.aclose())
        elif _running_loop() is loop:
            _background.add(task := loop.create_task(self.client.aclose()))
            task.add_done_callback(_background.discard)
        else:
            asyncio.run_coroutine_threadsafe(self.client.aclose(), loop)


_background: set[asyncio.Task[None]] = set()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _run_on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` to the end on ``loop`` (idle, not closed: the one the client's connections
    belong to), on a helper thread if this one runs another loop. That happens when a finalizer
    closes an agent's model during a garbage collection inside some coroutine: running
    ``loop`` here would raise "Cannot run the event loop while another loop is running"."""
    if _running_loop() is None:
        loop.run_until_complete(coro)
    else:
        helper = threading.Thread(target=loop.run_until_complete, args=(coro,), name="aklab-close-client")
        helper.start()
        helper.join()


def _run_alone(coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` to the end on a fresh loop, on a helper thread if this one runs a loop (Jupyter)."""

    def run() -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(coro)
        finally:
            loop.close()

    if _running_loop() is None:
        run()
    else:
        helper = threading.Thread(target=run, name="aklab-close-client")
        helper.start()
        helper.join()


@dataclass(repr=False, eq=False)
class ResolvedModel:
    """A built (never called) model with its settings and profile.

    ``close()`` closes the HTTP clients aklab created for it; call it before closing the
    event loop the model ran on, since open connections belong to that loop.
    """

    model: Model
    """The pydantic-ai model; its own ``settings`` are :attr:`settings` too."""
    settings: ModelSettings
    """What every request carries: temperature, max_tokens, timeout, max_retries,
    parallel_tool_calls, as far as they apply to the family."""
    profile: Profile
    """What the run loop reads: label, output mode, local or not."""
    _clients: list[_OwnedClient] = field(default_factory=list)

    def close(self) -> None:
        """Close the HTTP clients aklab created for this model (idempotent)."""
        for owned in self._clients:
            owned.close()

    @property
    def closed(self) -> bool:
        """Whether every HTTP client aklab created for this model is closed."""
        return all(owned.client.is_closed for owned in self._clients)

    def __repr__(self) -> str:
        p = self.profile
        return f"ResolvedModel({p.label!r}, family={p.family!r}, output_mode={p.output_mode!r}, local={p.local})"


@dataclass
class BuildContext:
    """What a family builds from: the config, the runtime settings, and the clients it made."""

    cfg: ModelConfig
    runtime: RuntimeConfig
    clients: list[_OwnedClient] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The model name (``gpt-4.1``, ``smollm2``)."""
        return str(self.cfg.model)

    @property
    def label(self) -> str:
        return self.cfg.label

    @property
    def timeout(self) -> float:
        return self.cfg.timeout if self.cfg.timeout is not None else self.runtime.http_timeout

    @property
    def retries(self) -> int:
        return self.cfg.retries if self.cfg.retries is not None else DEFAULT_RETRIES

    def output_mode(self, default: OutputMode) -> OutputMode:
        mode = self.cfg.output_mode
        if mode == "grammar":  # prompted JSON, decoded under a grammar where the server can
            return "prompted"
        return default if mode == "auto" else mode

    def settings(self, *, http: bool = True, parallel_tool_calls: bool = True) -> ModelSettings:
        """The request settings: sampling and caps when set; timeout and retries for HTTP families."""
        from pydantic_ai.settings import ModelSettings

        settings = ModelSettings()
        if self.cfg.temperature is not None:
            settings["temperature"] = self.cfg.temperature
        if self.cfg.max_tokens is not None:
            settings["max_tokens"] = self.cfg.max_tokens
        if http or self.cfg.timeout is not None:
            settings["timeout"] = self.timeout
        if http or self.cfg.retries is not None:
            settings["max_retries"] = self.retries
        if parallel_tool_calls:
            settings["parallel_tool_calls"] = self.runtime.parallel_tool_calls
        return settings

    def model_profile(self, output_mode: OutputMode, **extra: Any) -> ModelProfile:
        """The pydantic-ai profile overlay: structured-output default, context window, ``extra``."""
        profile: dict[str, Any] = dict(extra)
        if output_mode != "text":
            profile["default_structured_output_mode"] = output_mode
        if self.cfg.context_length is not None:
            profile["context_window"] = self.cfg.context_length
        return cast("ModelProfile", profile)

    def http_client(self, base_url: str | None = None) -> httpx2.AsyncClient:
        """A new HTTP client with aklab's timeout (connect at most 5 s), closed by ``ResolvedModel.close``.

        For a server on this machine (``base_url``, else ``cfg.base_url``, on a loopback
        host) the client has a transport of its own (``LoopbackTransport``): an
        ``HTTP(S)_PROXY`` from the environment does not take its requests to a proxy that
        cannot reach them, and a request refused while aklab starts its own server again
        waits for it instead of failing."""
        import httpx2
        from pydantic_ai._http import create_async_httpx2_client

        timeout = httpx2.Timeout(self.timeout, connect=min(self.timeout, 5.0))
        url = base_url or self.cfg.base_url
        if url and is_loopback(url):
            from aklab.llm.profiles._loopback import LoopbackTransport

            client = create_async_httpx2_client(timeout=timeout, transport=LoopbackTransport())
        else:
            client = create_async_httpx2_client(timeout=timeout)
        self.clients.append(_OwnedClient(client))
        return client

    def api_key(self, *default_envs: str, required: bool) -> str | None:
        """The key from ``cfg.api_key_env`` or the first of ``default_envs`` that is set.

        A missing required key raises a ``ConfigError`` naming the variable, never its value.
        """
        names = (self.cfg.api_key_env,) if self.cfg.api_key_env else default_envs
        for env in names:
            if value := os.environ.get(env):
                register_secret(value)  # from now on redacted from every notice, error and log
                return value
        if required or self.cfg.api_key_env:
            env = names[0] if names else "the API key"
            raise ConfigError(
                f"model {self.label}: set the {env} environment variable to the API key "
                "(or name another variable with api_key_env)"
            )
        return None

    def resolved(self, model: Model, profile: Profile, settings: ModelSettings) -> ResolvedModel:
        return ResolvedModel(model=model, settings=settings, profile=profile, _clients=list(self.clients))

    def discard(self) -> None:
        """Close what was made so far (a build that fails half way)."""
        for owned in self.clients:
            owned.close()


class Family(ABC):
    """One model family. A subclass is a short module: its defaults and ``build``."""

    name: ClassVar[str]
    """The provider name in a spec (``local`` in ``local:smollm2``)."""
    extra: ClassVar[str | None] = None
    """The aklab extra that installs the family's SDK (``pip install 'aklab[EXTRA]'``)."""
    default_output_mode: ClassVar[OutputMode] = "tool"
    """The output mode ``auto`` means for this family."""
    default_max_tokens: ClassVar[int | None] = None
    """The response cap when ``ModelConfig.max_tokens`` is None (None: the server's own)."""
    default_temperature: ClassVar[float | None] = None
    """The sampling temperature when ``ModelConfig.temperature`` is None (None: the server's own)."""
    default_recent_runs: ClassVar[int | None] = None
    """Runs kept whole before older ones fold into the digest (``Profile.recent_runs``; None:
    ``config.RECENT_RUNS``)."""
    default_context_length: ClassVar[int] = 8_192
    """The context window when ``ModelConfig.context_length`` is None: compaction is sized
    from it, so an agent's history stays bounded by default. A family whose models differ
    names a window most of them have; a user's ``context_length`` always wins."""

    def endpoint(self, cfg: ModelConfig) -> str | None:
        """The server a model of this family is asked at, when the spec decides it (a
        ``base_url``, or a self-hosted family's default); None for a provider's own API."""
        return cfg.base_url

    @abstractmethod
    def build(self, ctx: BuildContext) -> ResolvedModel:
        """Build (never call) the model for ``ctx.cfg``; raise ``ConfigError`` on misuse."""

    def profile(self, ctx: BuildContext, **fields: Any) -> Profile:
        fields.setdefault("family", self.name)
        fields.setdefault("recent_runs", self.default_recent_runs)
        fields.setdefault("label", ctx.label)
        fields.setdefault("output_mode", ctx.output_mode(self.default_output_mode))
        fields.setdefault("context_length", ctx.cfg.context_length or self.default_context_length)
        return Profile(**fields)


@contextlib.contextmanager
def needs_sdk(provider: str, extra: str | None) -> Iterator[None]:
    """Turn a missing SDK into a one-line ``ConfigError`` with the install command for this Python."""
    try:
        yield
    except ImportError as exc:
        raise ConfigError(
            f"provider {provider!r} needs its SDK: {sys.executable} -m pip install 'aklab[{extra or provider}]'"
        ) from exc


def is_loopback(url: str) -> bool:
    """Whether ``url`` points at this machine (127.0.0.0/8, ::1, localhost)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def family(provider: str) -> Family:
    """The family named ``provider``; a ``ConfigError`` lists the known ones."""
    name = _ALIASES.get(provider, provider)
    module = FAMILY_MODULES.get(name)
    if module is None:
        known = ", ".join(FAMILY_MODULES)
        raise ConfigError(f"unknown model provider {provider!r}: use one of {known}")
    found: Family = import_module(f"aklab.llm.profiles.{module}").FAMILY
    return found


def _profile_window(model: Model) -> int | None:
    """The context window a ready model's own pydantic-ai profile names, if any."""
    try:
        window = model.profile.get("context_window")
    except Exception:  # a custom Model whose profile cannot be built: no window known
        return None
    return window if isinstance(window, int) and window > 0 else None


def resolve(cfg: ModelConfig, runtime: RuntimeConfig | None = None) -> ResolvedModel:
    """Build (never call) the model ``cfg`` names, with its settings and profile.

    Raises ``ConfigError`` with a one-line fix: the install command for a missing SDK, the
    environment variable of a missing key, the known providers for an unknown one.
    """
    from pydantic_ai.models import Model

    ctx = BuildContext(cfg, runtime or RuntimeConfig())
    if isinstance(cfg.model, Model):
        mode = ctx.output_mode("tool")
        settings = ctx.settings(http=False)
        window = cfg.context_length or _profile_window(cfg.model)
        profile = Profile(family="custom", label=cfg.label, output_mode=mode, context_length=window)
        return ctx.resolved(cfg.model, profile, settings)
    if not isinstance(cfg.model, str):
        raise ConfigError(f"ModelConfig.model must be a name or a pydantic-ai Model, not {type(cfg.model).__name__}")
    chosen = family(cfg.provider)
    try:
        return chosen.build(ctx)
    except BaseException:
        ctx.discard()
        raise
