"""Binder's files alone make an environment that runs every notebook.

Builds a fresh virtual environment the way repo2docker does for this repository
(``pip install -r binder/requirements.txt``, then ``binder/postBuild``), and executes
each notebook in a kernel from that environment. Slow (a venv and an install), so it
runs under ``make test-binder``, not ``make test``.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))

pytestmark = pytest.mark.binder


@pytest.fixture(scope="module")
def binder_kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("binder")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "-r", str(ROOT / "binder" / "requirements.txt")],
        check=True,
        env=env,
    )
    checkout = base / "repo"
    skip = shutil.ignore_patterns(".venv", ".git", "*.egg-info", "__pycache__", ".aklab")
    shutil.copytree(ROOT, checkout, ignore=skip)
    subprocess.run(["bash", str(checkout / "binder" / "postBuild")], check=True, cwd=checkout, env=env)
    # A kernelspec pointing at the Binder environment's Python, found through JUPYTER_PATH.
    spec_dir = base / "jupyter" / "kernels" / "aklab-binder"
    spec_dir.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec_dir / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "binder", "language": "python"}))
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(base / "jupyter")
    try:
        yield "aklab-binder"
    finally:
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_notebook_runs_in_the_binder_environment(
    binder_kernel: str, path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AKLAB_STORE", raising=False)  # as on Binder: the store goes under the kernel's folder
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    # cells nbval is told not to compare (a real model's words, a path) are checked only for errors
    compared = [not _ignores_output(c) for c in code]
    saved = [c.get("outputs", []) for c in code]
    NotebookClient(
        nb, timeout=300, kernel_name=binder_kernel, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    fresh = [c.get("outputs", []) for c in code]
    errors = [o for outputs in fresh for o in outputs if o.get("output_type") == "error"]
    assert not errors, f"{path.name}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
    # the streamed text (what %%ask prints) matches what the notebook shows
    assert [_streams(o) for o, keep in zip(fresh, compared, strict=True) if keep] == [
        _streams(o) for o, keep in zip(saved, compared, strict=True) if keep
    ]


def _ignores_output(cell: nbformat.NotebookNode) -> bool:
    """The same markers nbval honours: a ``# NBVAL_IGNORE_OUTPUT`` line or an nbval tag."""
    tags = cell.get("metadata", {}).get("tags", [])
    if "nbval-ignore-output" in tags or "nbval-skip" in tags:
        return True
    lines = str(cell.source).splitlines()
    return any(line.strip() in ("# NBVAL_IGNORE_OUTPUT", "# NBVAL_SKIP") for line in lines[:3])


def _streams(outputs: list[dict[str, object]]) -> str:
    text = "".join(str(o.get("text", "")) for o in outputs if o.get("output_type") == "stream")
    for pattern, replace in SANITIZE:  # ids and times, as nbval sanitizes them
        text = pattern.sub(replace, text)
    return text


def _sanitizers() -> list[tuple[re.Pattern[str], str]]:
    config = configparser.ConfigParser()
    config.read(ROOT / "notebooks" / "sanitize.cfg")
    return [(re.compile(config[s]["regex"]), config[s]["replace"]) for s in config.sections()]


SANITIZE = _sanitizers()
