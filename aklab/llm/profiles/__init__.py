"""Model profiles: what differs per provider or server, chosen from the model spec.

``resolve(cfg, runtime)`` builds (never calls) the model a ``ModelConfig`` names and
returns a :class:`ResolvedModel`: the pydantic-ai model, the settings every request
carries in that server's dialect, and the :class:`Profile` the run loop reads (output
mode, the agent's one usage label, local or not). Each family is one short module
(``demo``, ``openai``, ``openai_compatible``, ``local``, ``ollama``, ``anthropic``, ``google``,
``mistral``, ``openrouter``) found by its provider name, never by an ``if`` in the run loop.

Keys come from the environment only, named by ``api_key_env`` or the provider's usual
variable; no key is put in a repr, a label or an error message.
"""

from aklab.llm.profiles._base import (
    DEFAULT_RETRIES,
    FAMILY_MODULES,
    BuildContext,
    Family,
    OutputMode,
    Profile,
    ResolvedModel,
    family,
    is_loopback,
    resolve,
)

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
    "resolve",
]
