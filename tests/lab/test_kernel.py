"""The magics in a real Jupyter kernel: an interrupt during %%ask stops the ask and fails
the cell, the agents survive, and the next %%ask works; %stop withdraws an ask queued
behind a run; an aklab error fails the cell with one line (nbclient stops there)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

from aklab.lab._magic_show import LIVE_TEXT, LIVE_TEXT_BG

SETUP = """
%load_ext aklab
from aklab.lab import Lab, set_lab
from aklab.llm import ModelConfig
set_lab(Lab("dev-team", model=ModelConfig(demo_latency={latency})))
"""


@pytest.fixture
def kernel() -> Iterator[tuple[KernelManager, BlockingKernelClient]]:
    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    client = km.client()
    client.start_channels()
    client.wait_for_ready(timeout=60)
    try:
        yield km, client
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)


def _run(client: BlockingKernelClient, code: str, *, on_output: Any = None, timeout: float = 60) -> str:
    """Execute ``code``; return its stream text. ``on_output(msg)`` sees every iopub message."""
    msg_id = client.execute(code)
    text: list[str] = []
    while True:
        msg = client.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if on_output is not None:
            on_output(msg)
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            text.append(content["text"])
        elif kind in ("execute_result", "display_data"):
            plain = content["data"].get("text/plain", "")
            if plain != LIVE_TEXT:
                text.append(plain + "\n")
        elif kind == "error":
            text.append(f"{content['ename']}: {content['evalue']}")
        elif kind == "status" and content["execution_state"] == "idle":
            return "".join(text)


def test_an_interrupt_cancels_the_runs_and_the_next_ask_works(
    kernel: tuple[KernelManager, BlockingKernelClient],
) -> None:
    km, client = kernel
    assert _run(client, SETUP.format(latency=0.5)) == ""
    interrupted = False

    def interrupt_once_the_ask_is_under_way(msg: dict[str, Any]) -> None:
        nonlocal interrupted
        # %%ask's live transcript says "@Manager working…" once its run has started: our cue.
        # (The panel's first display came too early: an interrupt before the Manager took
        # the message withdraws the ask instead, "Stopped: withdrew 1 ask not started yet.")
        if _says_working(msg, "@Manager") and not interrupted:
            interrupted = True
            km.interrupt_kernel()

    out = _run(client, "%%ask\nPlan the release.\n", on_output=interrupt_once_the_ask_is_under_way)
    assert interrupted
    assert "Run interrupted. (@Manager)" in out
    # the cell fails (Run All stops), with one line saying what the stop did
    assert out.endswith("AskInterrupted: interrupted. Stopped: interrupted the run of @Manager.")
    out = _run(client, "%%ask\nPlan the next release.\n")
    assert out.startswith("@Manager (response):\nHere is what @Developer came back with")
    usage = _run(
        client, "print(sorted(get_lab().usage()['agent']))".replace("get_lab", "__import__('aklab.lab').lab.get_lab")
    )
    assert usage.strip() == "['@Developer', '@Manager']"  # the interrupted run's usage is kept too


def _says_working(msg: dict[str, Any], agent: str) -> bool:
    """Whether ``msg`` updates a live transcript to show ``agent`` working (its run started)."""
    if msg["msg_type"] != "comm_msg":
        return False
    value = msg["content"].get("data", {}).get("state", {}).get("value", "")
    working = f'class="aklab-working"[^>]*><b>{re.escape(agent)}</b>'
    return isinstance(value, str) and re.search(working, value) is not None


def test_the_stop_button_does_not_wait_for_the_model_request_in_flight(
    kernel: tuple[KernelManager, BlockingKernelClient],
) -> None:
    km, client = kernel
    assert _run(client, SETUP.format(latency=60)) == ""  # a model that takes a minute to answer
    started = 0.0

    def interrupt_once_the_ask_is_under_way(msg: dict[str, Any]) -> None:
        nonlocal started
        if _says_working(msg, "@Manager") and not started:
            started = time.monotonic()
            km.interrupt_kernel()

    out = _run(client, "%%ask\nPlan the release.\n", on_output=interrupt_once_the_ask_is_under_way, timeout=20)
    assert "interrupted. Stopped: interrupted the run of @Manager." in out
    assert time.monotonic() - started < 10


# -- through nbclient, as Run All / papermill run a notebook -----------------------------

GATED = """
%load_ext aklab
import asyncio, json, threading
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from aklab.lab import Lab, get_lab, set_lab
from aklab.lab.teams import builtin_team
from aklab.llm import ModelConfig

started, gate, calls = threading.Event(), threading.Event(), []

async def gated(messages, info):
    # the first request holds the team until a later cell opens the gate (no sleep)
    calls.append(len(messages))
    started.set()
    await asyncio.to_thread(gate.wait, 60)
    args = {"messages": [{"recipient": "@Human", "message_type": "response", "message": "answered"}]}
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, json.dumps(args))])

set_lab(Lab(builtin_team("dev-team").with_model(ModelConfig(model=FunctionModel(gated)))))
"""


def _notebook(*sources: str) -> Any:
    import nbformat

    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s.strip("\n")) for s in sources])


def _execute(nb: Any, tmp_path: Any) -> None:
    from nbclient import NotebookClient

    NotebookClient(nb, timeout=90, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()


def _text(cell: Any) -> str:
    parts = []
    for out in cell.outputs:
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(out.data.get("text/plain", ""))
    return "".join(parts)


def test_stop_withdraws_an_ask_queued_behind_a_run_and_it_never_answers(tmp_path: Any) -> None:
    nb = _notebook(
        GATED,
        "%%ask --bg --out first\nPlan the release.",
        'assert started.wait(30); print("first ask under way")',
        "%%ask --bg --out queued\nThen plan the one after.",
        "%stop",
        "gate.set()\nprint(get_lab().wait(30), [m.content for m in queued.wait(30)], len(calls))",
    )
    _execute(nb, tmp_path)
    for sent in (nb.cells[1], nb.cells[3]):  # each --bg cell leaves its ask's live transcript
        assert _text(sent) == f"Sent to @Manager; the team works in the background. %stop stops it.\n{LIVE_TEXT_BG}"
        assert any("application/vnd.jupyter.widget-view+json" in out.get("data", {}) for out in sent.outputs)
    stop = _text(nb.cells[4])
    assert stop == "Stopped: interrupted the run of @Manager; withdrew 1 ask not started yet.\n"
    # the team is quiet, the queued ask got no reply, and the model was asked once (for the first ask)
    assert _text(nb.cells[5]) == "True [] 1\n"


def test_an_aklab_error_fails_the_cell_with_one_line_and_the_run_stops_there(tmp_path: Any) -> None:
    from nbclient.exceptions import CellExecutionError

    nb = _notebook("%load_ext aklab", "%%ask @Ghost\nhello", 'print("not reached")')
    with pytest.raises(CellExecutionError) as failed:
        _execute(nb, tmp_path)
    assert failed.value.ename == "RoutingError"
    [error] = nb.cells[1].outputs
    assert error.output_type == "error"
    assert error.traceback == ["aklab: no team member @Ghost; members: @Human, @Manager"]
    assert nb.cells[2].outputs == []  # nbclient stopped at the failed cell
