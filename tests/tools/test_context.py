from __future__ import annotations

from aklab.tools import ContextUpdater, ToolState


def _updater(values: dict[str, str]) -> tuple[ContextUpdater, ToolState]:
    state = ToolState()
    providers = {title: (lambda t=title: values[t]) for title in values}
    return ContextUpdater(providers, lambda: state), state


def test_the_first_block_is_a_full_snapshot_and_nothing_changed_means_no_block() -> None:
    values = {"Team": "- @A (A)", "Plan": "nothing yet"}
    updater, state = _updater(values)
    first = updater.compose(set())
    assert first is not None
    assert first.splitlines()[0] == "**Context update 1** — current state."
    assert "## Team\n- @A (A)" in first and "## Plan\nnothing yet" in first
    assert updater.compose({1}) is None
    assert state.counter == 1


def test_a_change_sends_only_the_changed_section() -> None:
    values = {"Team": "- @A (A)", "Plan": "nothing yet"}
    updater, _ = _updater(values)
    updater.compose(set())
    values["Team"] = "- @A (A)\n- @B (B)"
    block = updater.compose({1})
    assert block is not None
    assert block.splitlines()[0] == "**Context update 2** — state has changed since the last update."
    assert "## Team" in block and "## Plan" not in block


def test_a_marker_gone_from_the_history_means_a_full_snapshot_with_a_monotonic_counter() -> None:
    values = {"Team": "- @A (A)", "Plan": "p"}
    updater, state = _updater(values)
    updater.compose(set())
    values["Plan"] = "q"
    updater.compose({1})  # block 2
    block = updater.compose(set())  # history lost its blocks (compaction)
    assert block is not None
    assert block.splitlines()[0] == "**Context update 3** — current state."
    assert "## Team" in block and "## Plan" in block
    assert state.counter == 3


def test_a_counter_behind_the_history_catches_up_and_keeps_its_baselines() -> None:
    values = {"Team": "- @A (A)"}
    updater, state = _updater(values)
    updater.compose(set())
    state.counter = 0  # a crash lost the checkpoint after block 1 was appended... and more
    values["Team"] = "- @A (A)\n- @B (B)"
    block = updater.compose({1, 4})
    assert block is not None
    assert block.startswith("**Context update 5** — state has changed")


def test_reset_starts_again_at_block_one() -> None:
    updater, _ = _updater({"Team": "x"})
    updater.compose(set())
    updater.reset()
    block = updater.compose(set())
    assert block is not None and block.startswith("**Context update 1** — current state.")


def test_a_section_whose_block_was_folded_away_is_sent_again_though_later_deltas_remain() -> None:
    """Compaction folds old turns into a digest: the full block that carried a section can go
    while a later delta stays. The model no longer sees that section, so it comes back."""
    values = {"Team": "- @A (A)", "Roles you can hire": "- Developer"}
    updater, state = _updater(values)
    updater.compose(set())  # block 1: both sections
    values["Team"] = "- @A (A)\n- @B (B)"
    updater.compose({1})  # block 2: Team only
    block = updater.compose({2})  # block 1 folded into the digest, block 2 still there
    assert block is not None and block.startswith("**Context update 3**")
    assert "## Roles you can hire\n- Developer" in block and "## Team" not in block
    assert updater.compose({2, 3}) is None  # both seen now: nothing to send
    assert state.delivered_in == {"Team": 2, "Roles you can hire": 3}


def test_a_state_stored_before_sections_were_numbered_starts_with_a_full_snapshot() -> None:
    values = {"Team": "- @A (A)", "Plan": "p"}
    updater, state = _updater(values)
    state.counter, state.baselines = 4, dict(values)  # as a resume reads an older agent state
    block = updater.compose({4})
    assert block is not None and block.startswith("**Context update 5** — current state.")
    assert "## Team" in block and "## Plan" in block
