"""The magics in a real Jupyter kernel: an interrupt during %%ask cancels the runs in
flight, the agents survive, and the next %%ask works."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

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
        # %%ask shows the live transcript panel, then waits: that display is our cue.
        if msg["msg_type"] == "display_data" and not interrupted:
            interrupted = True
            km.interrupt_kernel()

    out = _run(client, "%%ask\nPlan the release.\n", on_output=interrupt_once_the_ask_is_under_way)
    assert interrupted
    assert "aklab: interrupted; cancelled the runs of @Manager" in out
    assert "Run interrupted. (@Manager)" in out
    out = _run(client, "%%ask\nPlan the next release.\n")
    assert out.startswith("@Manager → @Human (response):\nHere is what @Developer came back with")
    usage = _run(
        client, "print(sorted(get_lab().usage()['agent']))".replace("get_lab", "__import__('aklab.lab').lab.get_lab")
    )
    assert usage.strip() == "['@Developer', '@Manager']"  # the interrupted run's usage is kept too


def test_the_stop_button_does_not_wait_for_the_model_request_in_flight(
    kernel: tuple[KernelManager, BlockingKernelClient],
) -> None:
    km, client = kernel
    assert _run(client, SETUP.format(latency=60)) == ""  # a model that takes a minute to answer
    started = 0.0

    def interrupt_once_the_ask_is_under_way(msg: dict[str, Any]) -> None:
        nonlocal started
        if msg["msg_type"] == "display_data" and not started:
            started = time.monotonic()
            km.interrupt_kernel()

    out = _run(client, "%%ask\nPlan the release.\n", on_output=interrupt_once_the_ask_is_under_way, timeout=20)
    assert "aklab: interrupted; cancelled the runs of @Manager" in out
    assert time.monotonic() - started < 10
