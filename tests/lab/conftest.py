"""A real IPython shell with aklab loaded; the notebook's lab is closed afterwards."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell

from aklab.lab import set_lab


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext aklab")
    yield ip
    set_lab(None)
