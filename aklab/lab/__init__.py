"""aklab.lab: the Jupyter layer (Lab session, magics, DataFrames)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aklab.lab.session import Lab

__all__ = ["Lab", "get_lab", "load_ipython_extension", "set_lab"]

_lab: Lab | None = None
_lock = threading.Lock()


def get_lab() -> Lab:
    """The notebook's lab, started on first use with the built-in team."""
    global _lab
    with _lock:
        if _lab is None:
            from aklab.lab.session import Lab

            _lab = Lab()
        return _lab


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
    from aklab.lab.magics import AklabMagics

    ipython.register_magics(AklabMagics)
    threading.Thread(target=_warm_up, name="aklab-warm-up", daemon=True).start()


def __getattr__(name: str) -> Any:
    if name == "Lab":
        from aklab.lab.session import Lab

        return Lab
    raise AttributeError(f"module 'aklab.lab' has no attribute {name!r}")
