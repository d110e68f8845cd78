"""Re-execute the notebooks in place so their saved outputs are current.

    .venv/bin/python notebooks/regenerate.py [notebooks/01-quickstart.ipynb ...]

Run it after a change that alters what a notebook shows, review the diff, commit.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def regenerate(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(nb, path)
    print(f"regenerated {path}")


if __name__ == "__main__":
    here = Path(__file__).parent
    targets = [Path(p) for p in sys.argv[1:]] or sorted(here.glob("[0-9][0-9]-*.ipynb"))
    for target in targets:
        regenerate(target)
