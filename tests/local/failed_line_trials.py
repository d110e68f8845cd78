"""Does a model call that failed, or was stopped, teach SmolLM2 to answer with aklab's own line?

Not a test (pytest does not collect it): the measurement behind ``aklab.llm.react.FAILED``.
Needs the ``local`` extra; about 5-10 s per trial on 2 cores::

    python -m tests.local.failed_line_trials --scenario fail --seeds 0-23 --out fail.jsonl
    python -m tests.local.failed_line_trials --summary fail.jsonl interrupt.jsonl

Per trial (seed ``s``): a fresh demo team (``Lab()``, no store) on SmolLM2-135M served by
llama-cpp-python (n_ctx 4096), behind a loopback proxy that puts ``seed: s`` in every chat
request. One question is answered; the next one fails (even seeds: the proxy refuses
connections; odd: it answers HTTP 500), is stopped while the server holds it (``interrupt``),
or is answered (``none``, the control). The human then asks that question again and two new
ones; each of the three answers is checked for a copy of one of aklab's lines (old or new
forms) and for the expected word. The questions are drawn from ``POOL`` by the seed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

POOL = [
    ("What is the capital of France?", ("paris",)),
    ("What is 2+2?", ("4", "four")),
    ("What is the chemical formula of water?", ("h2o", "h₂o")),
    ("Which planet is the largest in our solar system?", ("jupiter",)),
    ("What is the capital of Italy?", ("rome",)),
    ("What color is the sky on a clear day?", ("blue",)),
    ("How many days are in a week?", ("7", "seven")),
    ("What is the capital of Japan?", ("tokyo",)),
    ("Which animal is known as the king of the jungle?", ("lion",)),
    ("What is the opposite of hot?", ("cold",)),
    ("How many legs does a spider have?", ("8", "eight")),
    ("What is the largest ocean on Earth?", ("pacific",)),
]
#: aklab's lines, the old "[failed: ...]"/"[interrupted: ...]" answers and the notes since: an
#: answer holding one of these copied it.
COPY = re.compile(
    r"\[(failed|interrupted|interruption)\b|could not answer|cannot reach the model server|the model server failed"
    r"|stopped before it was answered|take it up again|proxy: scripted failure|no answer was (sent|given)"
    r"|got no answer|model call failed|not answered|went unanswered|it was stopped|\(no answer",
    re.IGNORECASE,
)
FOLLOW_UPS = ("again", "next1", "next2")
ASK_TIMEOUT = 120.0


class Proxy:
    """Loopback HTTP proxy to the model server: sets each chat request's seed; on demand it
    refuses connections (``down``), answers 500 (``mode = "fail500"``) or holds a request
    until released (``mode = "hold"``, ``held`` is set when one arrives)."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.seed = 0
        self.mode = "pass"
        self.held = threading.Event()
        self.release = threading.Event()
        self.port = 0
        self._server: ThreadingHTTPServer | None = None
        self.up()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def up(self) -> None:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.loads(raw) if raw else {}
                if isinstance(body, dict) and "messages" in body:
                    body["seed"] = proxy.seed
                if proxy.mode == "fail500":
                    self._send(500, json.dumps({"error": {"message": "proxy: scripted failure", "code": 500}}).encode())
                elif proxy.mode == "hold":
                    proxy.held.set()
                    proxy.release.wait(120)
                    self.close_connection = True
                else:
                    self._forward(json.dumps(body).encode())

            def _forward(self, data: bytes | None) -> None:
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=300)
                skip = ("host", "content-length", "connection")
                headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
                if data is not None:
                    headers["Content-Length"] = str(len(data))
                conn.request(self.command, self.path, body=data, headers=headers)
                resp = conn.getresponse()
                self._send(resp.status, resp.read(), resp.getheader("Content-Type", "application/json"))
                conn.close()

            def _send(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Connection", "close")  # no kept-alive connection outlives a down()
                self.end_headers()
                self.close_connection = True
                self.wfile.write(payload)

        class Server(ThreadingHTTPServer):
            allow_reuse_address = True
            daemon_threads = True

        self._server = Server(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def down(self) -> None:
        """Refuse connections: the listening socket is closed (``up()`` binds the same port again)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def close(self) -> None:
        self.release.set()
        self.down()


def trial(server: Any, proxy: Proxy, seed: int, scenario: str) -> dict[str, Any]:
    from aklab.agent import Notice
    from aklab.lab.session import Lab

    first, failing, second, third = random.Random(seed).sample(POOL, 4)
    proxy.seed = seed
    record: dict[str, Any] = {"seed": seed, "scenario": scenario, "asks": []}
    with Lab(model=server.model_config(base_url=proxy.base_url), store=False) as lab:

        def ask(question: tuple[str, tuple[str, ...]], role: str) -> None:
            replies = lab.ask(question[0], timeout=ASK_TIMEOUT)
            answer = "\n".join(m.content for m in replies if not isinstance(m, Notice) and m.content.strip())
            record["asks"].append(
                {
                    "role": role,
                    "q": question[0],
                    "answer": answer,
                    "notices": [m.content for m in replies if isinstance(m, Notice)],
                    "copied": bool(COPY.search(answer)),
                    "expected": any(word in answer.lower() for word in question[1]),
                }
            )

        ask(first, "first")
        if scenario == "fail":
            refuse = seed % 2 == 0
            if refuse:
                proxy.down()
            else:
                proxy.mode = "fail500"
            try:
                ask(failing, "failed")
            finally:
                if refuse:
                    proxy.up()
                proxy.mode = "pass"
        elif scenario == "interrupt":
            proxy.mode = "hold"
            proxy.held.clear()
            proxy.release.clear()
            lab.send(failing[0])
            if not proxy.held.wait(60):
                raise RuntimeError("the question never reached the server")
            lab.interrupt()
            proxy.mode = "pass"
            proxy.release.set()
            lab.wait(30)
        else:
            ask(failing, "answered")
        for question, role in zip((failing, second, third), FOLLOW_UPS, strict=True):
            ask(question, role)
    return record


def seeds(spec: str) -> list[int]:
    out: list[int] = []
    for chunk in spec.split(","):
        low, _, high = chunk.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


def summary(path: str) -> str:
    with open(path) as f:
        records = [json.loads(line) for line in f]
    follow = [a for r in records for a in r["asks"] if a["role"] in FOLLOW_UPS]
    again = [a for a in follow if a["role"] == "again"]
    for a in follow:
        a["copied"] = bool(COPY.search(a["answer"]))
    sessions = sum(any(a["copied"] for a in r["asks"] if a["role"] in FOLLOW_UPS) for r in records)
    return (
        f"{path}: {len(records)} sessions; copied an aklab line in {sum(a['copied'] for a in follow)}/{len(follow)} "
        f"answers ({sessions} sessions; the question asked again: {sum(a['copied'] for a in again)}/{len(again)}); "
        f"expected word {sum(a['expected'] for a in follow)}/{len(follow)} "
        f"(the question asked again: {sum(a['expected'] for a in again)}/{len(again)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=["fail", "interrupt", "none"])
    parser.add_argument("--seeds", default="0-23")
    parser.add_argument("--out", help="JSON lines, appended to")
    parser.add_argument("--summary", nargs="+", metavar="JSONL")
    args = parser.parse_args()
    if args.summary:
        print("\n".join(summary(path) for path in args.summary))
        return
    if not (args.scenario and args.out):
        parser.error("--scenario and --out, or --summary")
    from aklab.llm.local_server import LocalServer

    with LocalServer(n_ctx=4096) as server:
        proxy = Proxy(server.base_url)
        try:
            with open(args.out, "a") as out:
                for seed in seeds(args.seeds):
                    started = time.monotonic()
                    record = trial(server, proxy, seed, args.scenario)
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
                    out.flush()
                    follow = [a for a in record["asks"] if a["role"] in FOLLOW_UPS]
                    copied, expected = sum(a["copied"] for a in follow), sum(a["expected"] for a in follow)
                    print(f"seed {seed}: {time.monotonic() - started:.0f}s, copied {copied}, expected {expected}")
        finally:
            proxy.close()
    print(summary(args.out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
