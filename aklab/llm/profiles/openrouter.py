"""OpenRouter (``openrouter:anthropic/claude-sonnet-4``); key ``$OPENROUTER_API_KEY``.

Its endpoint is fixed: another server is ``openai-compatible:NAME --base-url URL``.
"""

from __future__ import annotations

from aklab.errors import ConfigError
from aklab.llm.profiles._base import BuildContext, Family, ResolvedModel, needs_sdk

__all__ = ["FAMILY", "OpenRouterFamily"]


class OpenRouterFamily(Family):
    name = "openrouter"
    extra = "openrouter"
    default_context_length = 128_000  # models differ; most routed ones have at least this

    def build(self, ctx: BuildContext) -> ResolvedModel:
        with needs_sdk(self.name, self.extra):
            from pydantic_ai.models.openrouter import OpenRouterModel
            from pydantic_ai.providers.openrouter import OpenRouterProvider

        if ctx.cfg.base_url is not None:
            raise ConfigError(
                f"model {ctx.label}: OpenRouter has a fixed endpoint; for another server use "
                "openai-compatible:NAME --base-url URL"
            )
        api_key = ctx.api_key("OPENROUTER_API_KEY", required=True)
        provider = OpenRouterProvider(api_key=api_key, http_client=ctx.http_client())
        settings = ctx.settings()
        profile = self.profile(ctx)
        overlay = ctx.model_profile(profile.output_mode)
        model = OpenRouterModel(ctx.name, provider=provider, profile=overlay, settings=settings)
        return ctx.resolved(model, profile, settings)


FAMILY = OpenRouterFamily()
