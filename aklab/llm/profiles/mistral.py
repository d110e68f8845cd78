"""Mistral's API (``mistral:mistral-large-latest``); key ``$MISTRAL_API_KEY``.

Mistral's SDK does not retry unless told how long to keep trying, and pydantic-ai passes
only ``max_retries=0`` on to it, so here a request is sent once whatever ``retries`` says.
"""

from __future__ import annotations

from aklab.llm.profiles._base import BuildContext, Family, ResolvedModel, needs_sdk

__all__ = ["FAMILY", "MistralFamily"]


class MistralFamily(Family):
    name = "mistral"
    extra = "mistral"
    default_context_length = 32_768  # the smallest of Mistral's current windows (most have 128k)

    def build(self, ctx: BuildContext) -> ResolvedModel:
        with needs_sdk(self.name, self.extra):
            from pydantic_ai.models.mistral import MistralModel
            from pydantic_ai.providers.mistral import MistralProvider

        api_key = ctx.api_key("MISTRAL_API_KEY", required=True)
        provider = MistralProvider(api_key=api_key, base_url=ctx.cfg.base_url, http_client=ctx.http_client())
        settings = ctx.settings()
        profile = self.profile(ctx)
        overlay = ctx.model_profile(profile.output_mode)
        model = MistralModel(ctx.name, provider=provider, profile=overlay, settings=settings)
        return ctx.resolved(model, profile, settings)


FAMILY = MistralFamily()
