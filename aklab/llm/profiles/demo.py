"""The offline demo model: no key, no network, tool output."""

from __future__ import annotations

from aklab.llm.profiles._base import BuildContext, Family, ResolvedModel

__all__ = ["FAMILY", "DemoFamily"]


class DemoFamily(Family):
    name = "demo"
    # Estimated tokens: small enough that a long scripted session compacts (and stays flat),
    # large enough that no notebook or test conversation comes near it.
    default_context_length = 8_192

    def build(self, ctx: BuildContext) -> ResolvedModel:
        from aklab.llm.demo import demo_model

        model = demo_model(ctx.name, latency=ctx.cfg.demo_latency)
        return ctx.resolved(model, self.profile(ctx), ctx.settings(http=False))


FAMILY = DemoFamily()
