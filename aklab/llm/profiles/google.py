"""Google's Gemini API (``google:gemini-...``); key ``$GOOGLE_API_KEY`` (or ``$GEMINI_API_KEY``).

Gemini has no ``parallel_tool_calls`` switch, so it is not sent.
"""

from __future__ import annotations

import warnings

from aklab.llm.profiles._base import BuildContext, Family, ResolvedModel, needs_sdk

__all__ = ["FAMILY", "GoogleFamily"]


class GoogleFamily(Family):
    name = "google"
    extra = "google"
    default_context_length = 1_048_576  # Gemini 1.5 and later

    def build(self, ctx: BuildContext) -> ResolvedModel:
        with needs_sdk(self.name, self.extra):
            from pydantic_ai.models.google import GoogleModel
            from pydantic_ai.providers.google import GoogleProvider

        api_key = ctx.api_key("GOOGLE_API_KEY", "GEMINI_API_KEY", required=True)
        with warnings.catch_warnings():
            # It warns about a 5-second client timeout, assuming an accident; here it was asked for.
            warnings.filterwarnings("ignore", "The `http_client` passed to the Google provider", UserWarning)
            provider = GoogleProvider(api_key=api_key, base_url=ctx.cfg.base_url, http_client=ctx.http_client())
        settings = ctx.settings(parallel_tool_calls=False)
        profile = self.profile(ctx)
        overlay = ctx.model_profile(profile.output_mode)
        model = GoogleModel(ctx.name, provider=provider, profile=overlay, settings=settings)
        return ctx.resolved(model, profile, settings)


FAMILY = GoogleFamily()
