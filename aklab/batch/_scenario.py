"""Scenarios: what a batch asks, one team session each.

A scenario is a question (``"Plan the login page"``), a list of turns asked one after
the other in the same session, or a :class:`Scenario` with an id, its own team or model,
an ``expected`` answer fragment, a ``check`` that scores the final answer, and metadata
that is carried into the result frame. Files of scenarios (CSV, JSONL, YAML) load with
:func:`load_scenarios`.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aklab.errors import ConfigError

if TYPE_CHECKING:
    from aklab.batch.checks import Check
    from aklab.lab.teams import TeamSpec
    from aklab.llm import ModelConfig

__all__ = ["Scenario", "ScenarioLike", "load_scenarios", "normalize"]

_FIELDS = ("id", "question", "turns", "team", "model", "expected")


@dataclass(frozen=True)
class Scenario:
    """One team session of a batch.

    ``turns`` are asked in order in one session (a string is one turn); the answer is
    what the team sent back to the last one. ``team`` and ``model`` override the
    batch's for this scenario. ``check`` scores that answer: a callable
    ``check(answer) -> bool | float``, or an evaluator object with an ``evaluate(ctx)``
    method (pydantic-evals style; ``ctx`` has ``inputs``, ``output``, ``expected_output``
    and ``metadata``). Without a check, an ``expected`` text makes the score 1.0 when the
    answer contains it (case-insensitive), not counting where the answer quotes a question
    whole, and 0.0 otherwise.
    """

    id: str
    turns: tuple[str, ...]
    team: str | Path | TeamSpec | None = None
    model: str | ModelConfig | None = None
    check: Check | None = None
    expected: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        id: str,
        turns: str | Iterable[str],
        *,
        team: str | Path | TeamSpec | None = None,
        model: str | ModelConfig | None = None,
        check: Check | None = None,
        expected: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(id, str) or not id.strip():
            raise ConfigError(f"Scenario id must be a non-empty string, not {id!r}")
        items = (turns,) if isinstance(turns, str) else tuple(turns)
        if not items or any(not isinstance(t, str) or not t.strip() for t in items):
            raise ConfigError(f"scenario {id!r}: turns must be one or more non-empty strings, not {turns!r}")
        if check is not None and not (callable(check) or callable(getattr(check, "evaluate", None))):
            raise ConfigError(
                f"scenario {id!r}: check must be a callable(answer) -> bool | float or an object with evaluate(ctx)"
            )
        object.__setattr__(self, "id", id.strip())
        object.__setattr__(self, "turns", items)
        object.__setattr__(self, "team", team)
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "check", check)
        object.__setattr__(self, "expected", expected)
        object.__setattr__(self, "metadata", dict(metadata or {}))

    @property
    def question(self) -> str:
        """The first turn (what a one-question scenario asks)."""
        return self.turns[0]


ScenarioLike = str | list[str] | tuple[str, ...] | Scenario | Mapping[str, Any]


def normalize(scenarios: Iterable[ScenarioLike] | str | Path) -> list[Scenario]:
    """Scenarios from questions, turn lists, mappings, ``Scenario`` objects or a file path.

    Questions without an id are numbered ``s1``, ``s2``, ... in order; ids must be unique.
    """
    if isinstance(scenarios, Path) or (isinstance(scenarios, str) and _looks_like_file(scenarios)):
        return load_scenarios(scenarios)
    if isinstance(scenarios, str):
        raise ConfigError(
            "scenarios is one string: give a list of questions (['...', '...']) or a file path ending "
            ".csv, .jsonl or .yaml"
        )
    out: list[Scenario] = []
    for i, item in enumerate(scenarios):
        out.append(_one(item, default_id=f"s{i + 1}"))
    if not out:
        raise ConfigError("no scenarios: give at least one question")
    seen: set[str] = set()
    for s in out:
        if s.id in seen:
            raise ConfigError(f"scenario id {s.id!r} appears twice: ids must be unique")
        seen.add(s.id)
    return out


def _looks_like_file(text: str) -> bool:
    return "\n" not in text and Path(text).suffix.lower() in (".csv", ".jsonl", ".yaml", ".yml", ".json")


def _one(item: ScenarioLike, *, default_id: str) -> Scenario:
    if isinstance(item, Scenario):
        return item
    if isinstance(item, str):
        return Scenario(default_id, item)
    if isinstance(item, list | tuple):
        return Scenario(default_id, list(item))
    if isinstance(item, Mapping):
        return _from_mapping(item, default_id=default_id)
    raise ConfigError(
        f"scenario {default_id}: got {type(item).__name__}; give a question string, a list of turns, "
        "a mapping or a Scenario"
    )


def _from_mapping(row: Mapping[str, Any], *, default_id: str) -> Scenario:
    data = {str(k).strip(): v for k, v in row.items() if k is not None}
    sid = str(data.get("id") or default_id)
    turns: Any = data.get("turns")
    if isinstance(turns, str):  # a CSV cell: a JSON list, or one turn
        text = turns.strip()
        try:
            turns = json.loads(text) if text.startswith("[") else [text] if text else None
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"scenario {sid!r}: its turns {_short(text)} are not a JSON list ({exc.msg}, column {exc.colno}); "
                'write them as ["first turn", "second turn"]'
            ) from None
    if not turns:
        turns = data.get("question")
    if not turns:
        fields = ", ".join(sorted(k for k, v in data.items() if v not in (None, ""))) or "none"
        raise ConfigError(f"scenario {sid!r}: give a 'question' or 'turns' field (it has: {fields})")
    given = data.get("metadata") or {}
    if not isinstance(given, Mapping):
        raise ConfigError(f"scenario {sid!r}: metadata must be a mapping of names to values, not {_short(given)}")
    metadata = dict(given)
    metadata.update({k: v for k, v in data.items() if k not in (*_FIELDS, "metadata")})
    expected = data.get("expected")
    return Scenario(
        sid,
        turns,
        team=data.get("team") or None,
        model=data.get("model") or None,
        expected=None if expected in (None, "") else str(expected),
        metadata=metadata,
    )


def load_scenarios(path: str | Path) -> list[Scenario]:
    """Scenarios from a file: CSV, JSONL (one object a line), YAML or JSON (a list, or a
    mapping with a ``scenarios`` list).

    Fields: ``question`` (or ``turns``: a list; in CSV a JSON list), and optionally ``id``,
    ``team``, ``model``, ``expected``; any other field (or a ``metadata`` mapping) becomes
    metadata, shown as columns of the result.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no scenario file {str(path)!r}")
    suffix = path.suffix.lower()
    text = path.read_text(encoding="utf-8")
    rows: Any
    try:
        if suffix == ".csv":
            rows = _csv(text, path.name)
        elif suffix == ".jsonl":
            rows = _jsonl(text)
        elif suffix in (".yaml", ".yml"):
            import yaml

            rows = yaml.safe_load(text)
        elif suffix == ".json":
            rows = json.loads(text)
        else:
            raise ConfigError(f"scenario file {path.name!r}: use .csv, .jsonl, .yaml or .json")
    except (ValueError, ImportError) as exc:  # json and yaml errors are ValueErrors or YAMLError
        raise ConfigError(f"scenario file {path.name!r} cannot be read: {_first_line(exc)}") from exc
    except Exception as exc:
        if type(exc).__module__.startswith("yaml"):
            raise ConfigError(f"scenario file {path.name!r} cannot be read: {_first_line(exc)}") from exc
        raise
    if isinstance(rows, Mapping):
        rows = rows.get("scenarios")
    if not isinstance(rows, list):
        raise ConfigError(f"scenario file {path.name!r}: expected a list of scenarios (or a 'scenarios' list)")
    try:
        return normalize(rows)
    except ConfigError as exc:
        raise ConfigError(f"scenario file {path.name!r}: {exc}") from exc


def _csv(text: str, name: str) -> list[dict[str, Any]]:
    """The rows under the header. A row with more cells than the header is refused: its
    extra cells would be dropped, and the usual cause is a question with an unquoted comma
    (``Plan the login page, then test it`` kept only ``Plan the login page``)."""
    reader = csv.DictReader(text.splitlines(), restkey=_EXTRA)
    rows = []
    for row in reader:
        extra = row.pop(_EXTRA, None)
        if extra:
            header = len(reader.fieldnames or ())
            raise ConfigError(
                f"scenario file {name!r}: line {reader.line_num} has {header + len(extra)} cells where the header has "
                f"{header} (extra: {_short(', '.join(map(str, extra)))}); "
                'put a question that contains a comma in double quotes: "Plan it, then test it"'
            )
        rows.append(row)
    return rows


_EXTRA = "\0extra"


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _jsonl(text: str) -> list[Any]:
    """One JSON value a line; an error names the file's line, not a column of the fragment."""
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {number}, column {exc.colno}: {exc.msg}") from exc
    return rows


def _first_line(exc: BaseException) -> str:
    """The error's first line, with where a YAML error is (its ``problem_mark``: 1-based line)."""
    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    mark = getattr(exc, "problem_mark", None)
    if mark is not None and getattr(mark, "line", None) is not None:
        problem = getattr(exc, "problem", None)
        return f"line {mark.line + 1}: {problem or line}"
    return line
