"""aklab.lab: the Jupyter layer (Lab session, magics, DataFrames)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aklab.lab.session import Lab
    from aklab.lab.teamfile import load_team_file

__all__ = ["Lab", "get_lab", "load_ipython_extension", "load_team_file", "set_lab"]

_lab: Lab | None = None
_lock = threading.Lock()


def get_lab() -> Lab:
    """The notebook's lab, started on first use with the built-in team."""
    global _lab
    with _lock:
        if _lab is None:
            from aklab.lab._settings import settings
            from aklab.lab.session import Lab

            defaults = settings()  # %config Aklab.default_team / default_model
            _lab = Lab(defaults.default_team, model=defaults.default_model or None)
        return _lab


def running_lab() -> Lab | None:
    """The notebook's lab if one runs, without starting one."""
    with _lock:
        return _lab


def current_spec() -> Any:
    """The team the notebook's lab runs (its ``TeamSpec``), else the team it would start
    with (``%config Aklab.default_team``), without starting one: ``%aklab model`` restarts
    that team on another model, and a lab started only to be replaced at once would leave
    an empty team in the event store."""
    with _lock:
        if _lab is not None:
            return _lab.spec
    from aklab.lab._settings import settings

    return settings().default_team


def set_lab(lab: Lab | None) -> None:
    """Replace the notebook's lab (closing the old one)."""
    global _lab
    with _lock:
        if _lab is not None and _lab is not lab:
            if lab is not None and _lab._dashboard is not None:
                from aklab.lab.panels import carry_panels

                carry_panels(_lab, lab)  # panels shown earlier follow the new team
            _lab.close()
        _lab = lab


def _warm_up() -> None:
    # Heavy imports (pydantic-ai, pandas) happen here, off the kernel's thread.
    import pandas  # noqa: F401

    import aklab.lab.session  # noqa: F401


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext aklab``: the magics, their tab completion, and the ``Aklab`` defaults
    (``%config Aklab.default_model = "local:smollm2"``)."""
    from aklab.lab._magic_complete import install_completer
    from aklab.lab._settings import settings
    from aklab.lab.magics import AklabMagics, protect_questions

    ipython.register_magics(AklabMagics)
    cleanup = getattr(ipython, "input_transformers_cleanup", None)
    if cleanup is not None and protect_questions not in cleanup:
        cleanup.append(protect_questions)  # `%ask Why?` is a question, not a help lookup
    settings(ipython)
    install_completer(ipython)
    threading.Thread(target=_warm_up, name="aklab-warm-up", daemon=True).start()


def __getattr__(name: str) -> Any:
    # Imported when first asked for: %load_ext stays light.
    if name == "Lab":
        from aklab.lab.session import Lab

        return Lab
    if name == "load_team_file":
        from aklab.lab.teamfile import load_team_file

        return load_team_file
    raise AttributeError(f"module 'aklab.lab' has no attribute {name!r}")
