"""Anthropic's Messages API (``anthropic:claude-...``); key ``$ANTHROPIC_API_KEY``."""

from __future__ import annotations

from aklab.llm.profiles._base import BuildContext, Family, ResolvedModel, needs_sdk

__all__ = ["FAMILY", "AnthropicFamily"]


class AnthropicFamily(Family):
    name = "anthropic"
    extra = "anthropic"
    default_context_length = 200_000  # every current Claude model

    def build(self, ctx: BuildContext) -> ResolvedModel:
        with needs_sdk(self.name, self.extra):
            from pydantic_ai.models.anthropic import AnthropicModel
            from pydantic_ai.providers.anthropic import AnthropicProvider

        api_key = ctx.api_key("ANTHROPIC_API_KEY", required=True)
        provider = AnthropicProvider(api_key=api_key, base_url=ctx.cfg.base_url, http_client=ctx.http_client())
        settings = ctx.settings()
        profile = self.profile(ctx)
        overlay = ctx.model_profile(profile.output_mode)
        model = AnthropicModel(ctx.name, provider=provider, profile=overlay, settings=settings)
        return ctx.resolved(model, profile, settings)


FAMILY = AnthropicFamily()
