"""%aklab batch FILE runs the current team over a file of scenarios and returns the result."""

from __future__ import annotations

from pathlib import Path

from IPython.core.interactiveshell import InteractiveShell


def test_a_batch_from_a_file(shell: InteractiveShell, tmp_path: Path) -> None:
    scenarios = tmp_path / "questions.jsonl"
    scenarios.write_text('{"id": "a", "question": "What is 2+2?"}\n{"id": "b", "question": "Plan the login page."}\n')
    result = shell.run_cell(f"%aklab batch {scenarios} --concurrency 2")
    assert result.error_in_exec is None, result.error_in_exec
    frame = result.result.scenarios
    assert list(frame["id"]) == ["a", "b"] and set(frame["status"]) == {"ok"}


def test_a_bad_batch_line_is_one_line(shell: InteractiveShell, tmp_path: Path) -> None:
    result = shell.run_cell("%aklab batch nosuch.csv")
    assert result.error_in_exec is not None and "nosuch.csv" in str(result.error_in_exec)
    result = shell.run_cell(f"%aklab batch {tmp_path / 'x.csv'} --engine spark")
    assert result.error_in_exec is not None and "--engine" in str(result.error_in_exec)
