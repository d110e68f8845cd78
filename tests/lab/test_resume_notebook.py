"""notebooks/08-resume.ipynb with a real kernel restart: the first part in one kernel, the
rest in a new one (nbval runs it straight through, where ``set_lab(None)`` stands in)."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "08-resume.ipynb"


def _run(cells: list[nbformat.NotebookNode], folder: Path) -> list[nbformat.NotebookNode]:
    nb = nbformat.v4.new_notebook(cells=cells)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    return [c for c in nb.cells if c.cell_type == "code"]


def _text(cell: nbformat.NotebookNode) -> str:
    out = []
    for o in cell.get("outputs", []):
        assert o.get("output_type") != "error", o
        out.append(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")))
    return "".join(out)


def test_the_resume_notebook_survives_a_real_kernel_restart(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    restart = next(i for i, c in enumerate(nb.cells) if "Now restart the kernel" in c.source)
    before = _run(nb.cells[:restart], tmp_path)  # the kernel is shut down at the end
    assert "@Manager (response)" in _text(before[-1])
    after = _run(nb.cells[restart:], tmp_path)  # a new kernel: nothing in memory
    texts = [_text(c) for c in after]
    assert any("resumed team 'dev-team'" in t and "1 earlier reply to @Human" in t for t in texts)
    # %transcript in the new kernel: the conversation before the restart, read back from the store
    assert any(t.startswith("@Human → @Manager (request): Ask the Developer for a haiku about tests.\n") for t in texts)
    assert any("Thanks. Now plan the login page." in t for t in texts)  # the history frame, across the restart
    assert "Ask the Developer for a haiku about tests." in texts[-1]


def test_running_the_whole_notebook_twice_in_one_kernel_keeps_the_second_conversation(tmp_path: Path) -> None:
    """Run All again without a restart: the first run's lab held the store the notebook deletes
    to start afresh, and the second run's asks went to the deleted file."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    again = [nbformat.v4.new_code_cell(c.source) for c in nb.cells if c.cell_type == "code"]  # fresh cell ids
    twice = _run([*nb.cells, *again], tmp_path)
    second = [_text(c) for c in twice[len(twice) // 2 :]]
    assert any("resumed team 'dev-team'" in t for t in second)
    assert "Ask the Developer for a haiku about tests." in second[-1]  # the second run's history frame
