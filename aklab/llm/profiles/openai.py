"""OpenAI: the Responses API in the cloud, Chat Completions on any other ``base_url``.

``openai:NAME`` with a ``base_url`` (or ``$OPENAI_BASE_URL``) is a proxy or a server
speaking OpenAI's API, so it goes to Chat Completions, which every such server has; on a
loopback address it is a local server and gets the OpenAI-compatible dialect. The key is
``$OPENAI_API_KEY`` (or ``api_key_env``), required only for OpenAI itself.
"""

from __future__ import annotations

import os

from aklab.llm.profiles._base import BuildContext, Family, ResolvedModel, is_loopback, needs_sdk
from aklab.llm.profiles.openai_compatible import PLACEHOLDER_KEY, build_compatible

__all__ = ["FAMILY", "OpenAIFamily"]


class OpenAIFamily(Family):
    name = "openai"
    extra = "openai"
    default_context_length = 128_000  # GPT-4o and o-series; GPT-4.1 has more

    def build(self, ctx: BuildContext) -> ResolvedModel:
        with needs_sdk(self.name, self.extra):
            from openai import AsyncOpenAI
            from pydantic_ai.models.openai import OpenAIResponsesModel
            from pydantic_ai.providers.openai import OpenAIProvider

            from aklab.llm.profiles._chat_model import ChatModel
            from aklab.llm.profiles._sse_errors import read_sse_errors

        base_url = ctx.cfg.base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = ctx.api_key("OPENAI_API_KEY", required=base_url is None)
        if base_url is not None and is_loopback(base_url):
            return build_compatible(self, ctx, base_url=base_url, api_key=api_key, local=True)
        http = ctx.http_client()
        client = AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or PLACEHOLDER_KEY,
            http_client=http if base_url is None else read_sse_errors(http),  # for Chat Completions only
            timeout=ctx.timeout,
            max_retries=ctx.retries,
        )
        provider = OpenAIProvider(openai_client=client)
        settings = ctx.settings()
        profile = self.profile(ctx)
        overlay = ctx.model_profile(profile.output_mode)
        cls = OpenAIResponsesModel if base_url is None else ChatModel
        model = cls(ctx.name, provider=provider, profile=overlay, settings=settings)
        return ctx.resolved(model, profile, settings)


FAMILY = OpenAIFamily()
