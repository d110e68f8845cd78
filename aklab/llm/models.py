"""``build_model(cfg)``: the pydantic-ai model a ``ModelConfig`` names (kept for old callers).

The building lives in ``aklab.llm.profiles``; ``resolve()`` also gives the request
settings, the profile and ``close()`` for the HTTP clients it made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aklab.llm.config import ModelConfig, RuntimeConfig

if TYPE_CHECKING:
    from pydantic_ai.models import Model

__all__ = ["build_model"]


def build_model(cfg: ModelConfig, runtime: RuntimeConfig | None = None) -> Model:
    """The pydantic-ai model for ``cfg``, carrying its request settings. Keys come from the environment only."""
    from aklab.llm.profiles import resolve

    return resolve(cfg, runtime).model
