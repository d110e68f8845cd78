"""B4 start: ``import aklab``, ``%load_ext aklab``, and the first ``%%ask`` reply, each fresh.

- ``import aklab`` and ``%load_ext aklab`` are timed inside a fresh ``python -c`` (the
  interpreter's own start is not counted; IPython's ``InteractiveShell`` is created before
  the clock starts, as a kernel has it ready). ``%load_ext`` starts a background warm-up of
  the heavy imports; the time until that warm-up finishes is reported alongside.
- The first ``%%ask`` is timed from a jupyter_client in a fresh ipykernel: the round trip
  of ``%%ask`` sent right after ``%load_ext aklab``, on the default team (demo model,
  itself a zero-latency FunctionModel). Kernel start-up is reported alongside.

Each is best of ``repeat`` fresh processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from bench.common import REPO, Figure

__all__ = ["run"]

ID = "B4"

_IMPORT = """
import json, time
t = time.perf_counter()
import aklab
print(json.dumps({"seconds": time.perf_counter() - t}))
"""

_LOAD_EXT = """
import json, threading, time
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
t = time.perf_counter()
shell.run_line_magic("load_ext", "aklab")
load_ext = time.perf_counter() - t
for thread in threading.enumerate():
    if thread.name == "aklab-warm-up":
        thread.join()
print(json.dumps({"seconds": load_ext, "warm_up_done_s": time.perf_counter() - t}))
"""


def _python_json(code: str) -> dict[str, Any]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"python -c failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = wall
    return result


def first_ask_in_fresh_kernel() -> dict[str, float]:
    """Start a kernel, ``%load_ext aklab``, then time the first ``%%ask`` round trip."""
    from jupyter_client.manager import start_new_kernel

    start = time.perf_counter()
    km, kc = start_new_kernel(kernel_name="python3", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kernel_start = time.perf_counter() - start
    outputs: list[str] = []

    def hook(msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "stream":
            outputs.append(msg["content"]["text"])
        elif msg["msg_type"] in ("execute_result", "display_data"):  # %%ask's replies are the cell's value
            outputs.append(msg["content"]["data"].get("text/plain", ""))

    def execute(code: str) -> float:
        t = time.perf_counter()
        reply = kc.execute_interactive(code, timeout=120, output_hook=hook)
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"{code.splitlines()[0]} failed in the kernel: {reply['content']}")
        return time.perf_counter() - t

    try:
        load_ext = execute("%load_ext aklab")
        ask = execute("%%ask\nPlan the login page.")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    if not any("@Manager (response)" in text for text in outputs):
        raise RuntimeError(f"the first %%ask showed no reply: {outputs!r}")
    return {"seconds": ask, "kernel_start_s": kernel_start, "load_ext_cell_s": load_ext}


def _best(results: list[dict[str, Any]]) -> dict[str, Any]:
    best = min(results, key=lambda r: r["seconds"])
    return {**best, "all_s": [r["seconds"] for r in results]}


def run(*, smoke: bool = False, repeat: int = 3, context: dict[str, Any] | None = None) -> list[Figure]:
    repeat = 1 if smoke else repeat
    imp = _best([_python_json(_IMPORT) for _ in range(repeat)])
    ext = _best([_python_json(_LOAD_EXT) for _ in range(repeat)])
    figures = [
        Figure(
            ID,
            "start: `import aklab` in a fresh interpreter",
            "wall time",
            imp["seconds"],
            "s",
            note=f"whole `python -c` process {imp['process_wall_s']:.2f} s",
            details=imp,
        ),
        Figure(
            ID,
            "start: `%load_ext aklab` in a fresh IPython shell",
            "wall time",
            ext["seconds"],
            "s",
            budget_max=0.3,
            note=f"background warm-up (pydantic-ai, pandas) done after {ext['warm_up_done_s']:.2f} s",
            details=ext,
        ),
    ]
    try:
        import jupyter_client  # noqa: F401
    except ImportError:
        figures.append(
            Figure(ID, "start: first `%%ask` reply in a fresh kernel", "wall time", None, "s", status="skipped")
        )
        return figures
    ask = _best([first_ask_in_fresh_kernel() for _ in range(repeat)])
    figures.append(
        Figure(
            ID,
            "start: first `%%ask` reply in a fresh kernel (right after `%load_ext`, demo model)",
            "wall time",
            ask["seconds"],
            "s",
            note=f"kernel start {ask['kernel_start_s']:.2f} s, `%load_ext` cell {ask['load_ext_cell_s']:.3f} s",
            details=ask,
        )
    )
    return figures
