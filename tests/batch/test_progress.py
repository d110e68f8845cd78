"""Progress: text lines outside a kernel, a widget with a fixed text/plain in one, any callback."""

from __future__ import annotations

import io

import pytest

import aklab.batch as batch
from aklab.batch.progress import ProgressState, TextProgress, WidgetProgress, make_sink
from aklab.errors import ConfigError


def test_text_progress_writes_a_line_per_tenth_and_a_final_one() -> None:
    stream = io.StringIO()
    result = batch.run([f"Plan feature {i}" for i in range(5)], concurrency=2, progress=TextProgress(stream, steps=5))
    lines = stream.getvalue().splitlines()
    assert lines[0] == "batch (local): 0/5 done · 0 tokens · $0.0000"  # nothing asked yet: nothing spent
    assert [line.split(":")[1].split("/")[0].strip() for line in lines[:-1]] == ["0", "1", "2", "3", "4", "5"]
    assert lines[-1].startswith(f"batch (local): 5/5 done · {result.state().tokens:,} tokens · cost n/a · ")


def test_a_callback_sees_every_state_and_the_last_one_is_finished() -> None:
    states: list[ProgressState] = []
    batch.run(["Plan it", "Test it"], progress=states.append)
    assert states[-1].finished and states[-1].done == 2 and states[-1].ok == 2
    assert any(s.running for s in states) and [s.done for s in states] == sorted(s.done for s in states)


def test_outside_a_kernel_progress_true_is_text_and_bad_values_are_refused() -> None:
    assert isinstance(make_sink(True, 3, "local"), TextProgress)
    with pytest.raises(ConfigError, match="progress must be"):
        make_sink(3, 3, "local")  # type: ignore[arg-type]


def test_the_widget_shows_counts_and_keeps_a_fixed_text_plain() -> None:
    sink = WidgetProgress(4, "process")
    assert sink._repr_mimebundle_()["text/plain"] == "<batch progress: 4 scenarios, process>"
    sink.close(ProgressState("process", 4, done=4, ok=3, failed=1, requests=4, tokens=1200))
    assert sink.bar.value == 4 and sink.bar.bar_style == "danger"
    assert sink.text.value == "4/4 done · 1 failed · 1,200 tokens · cost n/a"
    assert repr(sink) == "<batch progress: 4 scenarios, process>"
    sink.widget.close()
    sink.bar.close()
    sink.text.close()


def test_a_result_renders_as_html_with_its_summary_and_a_plot() -> None:
    result = batch.run(["Plan it", "Test it"], progress=False)
    html = result._repr_html_()
    assert "batch (local): 2/2 done" in html and "<table" in html and html.count("<table") == 2
    fig = result.plot()
    assert len(fig.axes) == 2 and fig.axes[0].get_title() == "scenarios by status"


def test_the_line_gives_the_checks_mean_score_over_the_scenarios_they_scored() -> None:
    from aklab.batch import Scenario

    stream = io.StringIO()
    result = batch.run(
        [
            Scenario("yes", "Plan it", check=lambda answer: True),
            Scenario("no", "Test it", check=lambda answer: False),
            Scenario("half", "Ship it", check=lambda answer: 0.5),
            Scenario("unchecked", "Fix it"),
        ],
        progress=TextProgress(stream, steps=4),
    )
    assert list(result.scenarios["score"].iloc[:3]) == [1.0, 0.0, 0.5] and result.scenarios["score"].isna().iloc[3]
    assert result.state().line().startswith("4/4 done · score 0.50 of 3 · ")
    assert stream.getvalue().splitlines()[-1].startswith("batch (local): 4/4 done · score 0.50 of 3 · ")
    assert "score" not in ProgressState("local", 2, done=2, ok=2).line()  # nothing checked: nothing said
