"""Defaults of the magics, as a traitlets ``Configurable`` named ``Aklab``.

``%load_ext aklab`` registers one with the shell, so IPython's own ways of configuring
apply: ``%config Aklab.default_model = "local:smollm2"`` in a notebook, or
``c.Aklab.default_model = ...`` in ``ipython_config.py``; ``%config Aklab`` lists them.
A default takes effect the next time it is read: the model and team when the next lab
starts (the first magic, or ``%aklab team``), the format, timeout and ``fail_on_notice`` at the next ``%%ask``.
"""

from __future__ import annotations

import math
from typing import Any

from traitlets import Bool, Enum, Float, TraitError, Unicode, validate
from traitlets.config import Configurable

from aklab.lab._magic_args import FORMATS

__all__ = ["Aklab", "settings"]


class Aklab(Configurable):  # type: ignore[misc]
    """Defaults of the aklab magics (``%config Aklab.<name> = value``)."""

    default_team = Unicode(
        "dev-team", help="Team the first magic starts: a built-in team name or a team file path."
    ).tag(config=True)
    default_model = Unicode(
        "", help="Model spec every member uses when a lab starts, e.g. 'local:smollm2' ('' keeps the team's own)."
    ).tag(config=True)
    default_format = Enum(list(FORMATS), "markdown", help="How %%ask shows the replies: markdown, text or json.").tag(
        config=True
    )
    timeout = Float(300.0, help="Seconds %%ask waits for the team before giving up (the team keeps working).").tag(
        config=True
    )

    fail_on_notice = Bool(
        False,
        help=(
            "Fail a %%ask cell whose ask was not ok (it ended in a notice: a failed model call, a limit, "
            "an undelivered message; or it was stopped), after showing its replies: for notebooks run "
            "as pipelines (papermill, nbclient), which then stop there."
        ),
    ).tag(config=True)

    @validate("default_model")
    def _check_model(self, proposal: Any) -> str:
        value = str(proposal["value"]).strip()
        if value:
            from aklab.errors import AklabError
            from aklab.llm import ModelConfig

            try:
                ModelConfig.parse(value)
            except AklabError as exc:
                raise TraitError(f"Aklab.default_model: {exc}") from exc
        return value

    @validate("timeout")
    def _check_timeout(self, proposal: Any) -> float:
        value = float(proposal["value"])
        if not (math.isfinite(value) and value > 0):
            raise TraitError(f"Aklab.timeout must be a positive number of seconds, e.g. 60 (got {value!r})")
        return value


_settings: Aklab | None = None


def settings(shell: Any = None) -> Aklab:
    """The shell's ``Aklab`` (registered with ``shell`` on first call), else a default one."""
    global _settings
    if shell is not None:
        configurables: list[Any] = getattr(shell, "configurables", [])
        found = next((c for c in configurables if isinstance(c, Aklab)), None)
        if found is None:
            found = Aklab(parent=shell)  # reads c.Aklab.* from the shell's config
            configurables.append(found)
        _settings = found
    if _settings is None:
        _settings = Aklab()
    return _settings
