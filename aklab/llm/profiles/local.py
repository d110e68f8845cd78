"""A named local server: ``local:NAME`` is an OpenAI-compatible server on this machine.

The endpoint is ``base_url``, else ``$AKLAB_LOCAL_BASE_URL``, else llama.cpp's default
``http://127.0.0.1:8080/v1``. It speaks the llama.cpp dialect of ``openai_compatible``,
needs no key, and its usage costs nothing.
"""

from __future__ import annotations

import os

from aklab.errors import ConfigError
from aklab.llm.config import ModelConfig, check_base_url
from aklab.llm.profiles._base import BuildContext, Family, ResolvedModel
from aklab.llm.profiles.openai_compatible import build_compatible

__all__ = ["BASE_URL_ENV", "DEFAULT_BASE_URL", "FAMILY", "LocalFamily"]

DEFAULT_BASE_URL = "http://127.0.0.1:8080/v1"
BASE_URL_ENV = "AKLAB_LOCAL_BASE_URL"


class LocalFamily(Family):
    name = "local"
    extra = "openai"
    default_output_mode = "prompted"
    # A small local model left uncapped can write until its context is full (98-186 s per
    # request seen on SmolLM2 with llama.cpp); an answer in a team rarely needs more.
    default_max_tokens = 768
    # llama.cpp's server samples at 0.8 unless told. Measured on SmolLM2-135M (2026-12-06):
    # single questions as a team asks them got the expected word 26/42 times at the server's
    # default and 32-34/42 at 0.2; the ten-question workload over six seeds, 2-9 (mean 6.8)
    # against 7-9 (mean 7.8). 0 and 0.4 did worse than 0.2 (6 and 5 of 10 on the fixed seed).
    default_temperature = 0.2
    # llama.cpp's server default (-c 4096); a server started with more sets context_length.
    default_context_length = 4_096
    # A small model copies its last answers: on SmolLM2-135M, once one was wrong the next ones
    # often repeated it to the end of the session. With two whole turns kept (not four), the
    # workload three times over (30 questions, 10 seeds, 2026-12-07) got the expected word in
    # 22.7 answers on average (21-26 per session) against 17.9 (4-27).
    default_recent_runs = 2

    def endpoint(self, cfg: ModelConfig) -> str:
        if cfg.base_url:
            return cfg.base_url
        named = os.environ.get(BASE_URL_ENV)
        if not named:
            return DEFAULT_BASE_URL
        try:
            return check_base_url(named)
        except ValueError as exc:
            raise ConfigError(f"${BASE_URL_ENV}: {exc}") from None

    def build(self, ctx: BuildContext) -> ResolvedModel:
        base_url = self.endpoint(ctx.cfg)
        return build_compatible(self, ctx, base_url=base_url, api_key=ctx.api_key(required=False), local=True)


FAMILY = LocalFamily()
