"""Any OpenAI-compatible server (``openai-compatible:NAME`` with a ``base_url``).

Chat Completions in the dialect such servers share (llama.cpp, Ollama, vLLM): the token cap
goes out as ``max_tokens``, tool choice is never forced, tool definitions are not strict,
the system prompt and the run's instructions go out as one system message, and JSON is
asked for with ``json_object`` (plus a schema, which llama.cpp turns into a grammar) rather
than ``json_schema``. Output defaults to ``prompted``, which a small
instruct model can satisfy. No key unless ``api_key_env`` names one: an OpenAI key is
never sent to another server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aklab.errors import ConfigError
from aklab.llm.profiles._base import BuildContext, Family, OutputMode, ResolvedModel, is_loopback, needs_sdk

if TYPE_CHECKING:
    from pydantic_ai.profiles import ModelProfile

__all__ = [
    "COMPATIBLE_CONTEXT_LENGTH",
    "FAMILY",
    "PLACEHOLDER_KEY",
    "OpenAICompatibleFamily",
    "build_compatible",
    "compatible_profile",
]

PLACEHOLDER_KEY = "not-needed"
"""Sent to a server that needs no key (the OpenAI SDK insists on one)."""

COMPATIBLE_CONTEXT_LENGTH = 8_192
"""The window of a server whose size aklab cannot know (set ``context_length`` to its real one)."""


def compatible_profile(ctx: BuildContext, output_mode: OutputMode) -> ModelProfile:
    """The pydantic-ai profile overlay for the OpenAI-compatible dialect."""
    from pydantic_ai.profiles import merge_profile
    from pydantic_ai.profiles.openai import OpenAIModelProfile

    dialect = OpenAIModelProfile(
        openai_chat_supports_max_completion_tokens=False,
        supports_forced_tool_choice=False,
        openai_supports_strict_tool_definition=False,
        supports_json_object_output=True,
        supports_json_schema_output=output_mode == "native",
        # One system message (the role's prompt, then the run's instructions), not two: open
        # models' chat templates expect one, and some refuse more. On SmolLM2-135M the first
        # question of a team got the expected word 37 times in 60 with two, 51 with one.
        openai_chat_supports_multiple_system_messages=False,
    )
    return merge_profile(ctx.model_profile(output_mode), dialect)


def build_compatible(
    family: Family, ctx: BuildContext, *, base_url: str, api_key: str | None, local: bool
) -> ResolvedModel:
    """An ``OpenAIChatModel`` on ``base_url`` in the OpenAI-compatible dialect."""
    with needs_sdk(family.name, "openai"):
        from openai import AsyncOpenAI
        from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider

        from aklab.llm.profiles._chat_model import ChatModel
        from aklab.llm.profiles._sse_errors import read_sse_errors

    mode = ctx.output_mode("prompted")
    client = AsyncOpenAI(
        base_url=base_url,
        api_key=api_key or PLACEHOLDER_KEY,
        http_client=read_sse_errors(ctx.http_client(base_url)),
        timeout=ctx.timeout,
        max_retries=ctx.retries,
    )
    provider = OpenAICompatibleProvider(ctx.cfg.provider, openai_client=client)
    settings = ctx.settings()
    if ctx.cfg.max_tokens is None and family.default_max_tokens is not None:
        settings["max_tokens"] = family.default_max_tokens
    if ctx.cfg.temperature is None and family.default_temperature is not None:
        settings["temperature"] = family.default_temperature
    model = ChatModel(ctx.name, provider=provider, profile=compatible_profile(ctx, mode), settings=settings)
    profile = family.profile(
        ctx,
        family="openai-compatible" if family.name == "openai" else family.name,
        output_mode=mode,
        # Grammar-constrained JSON only when asked for: measured on SmolLM2-135M, the grammar
        # makes a small model write filler into the JSON ("..."), while unconstrained it
        # answers in prose, which the text fallback delivers.
        constrain_json=ctx.cfg.output_mode == "grammar",
        local=local,
        state_in_system=True,
        # ``openai:NAME`` on a loopback URL lands here: a local server, not OpenAI's window.
        context_length=ctx.cfg.context_length
        or (COMPATIBLE_CONTEXT_LENGTH if family.name == "openai" else family.default_context_length),
    )
    return ctx.resolved(model, profile, settings)


class OpenAICompatibleFamily(Family):
    name = "openai-compatible"
    extra = "openai"
    default_output_mode = "prompted"
    default_context_length = COMPATIBLE_CONTEXT_LENGTH

    def build(self, ctx: BuildContext) -> ResolvedModel:
        base_url = ctx.cfg.base_url
        if not base_url:
            raise ConfigError(
                f"model {ctx.label} needs the server's base_url, e.g. --base-url http://127.0.0.1:8000/v1"
            )
        api_key = ctx.api_key(required=False)
        return build_compatible(self, ctx, base_url=base_url, api_key=api_key, local=is_loopback(base_url))


FAMILY = OpenAICompatibleFamily()
