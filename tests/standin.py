"""Stand-ins for ``llama_cpp.server``: child processes that start, answer, die or hang
like it, so LocalServer's life cycle is tested without the model or the local extra."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from aklab.llm.local_server import LocalServer

# A stand-in for llama_cpp.server: answers GET /v1/models on the port it is given.
ANSWERS = """
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "smollm2"}]}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
print("loading the stand-in model", flush=True)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""
DIES = "import sys; print('boom: cannot load model', file=sys.stderr); sys.exit(3)"
HANGS = "import threading; print('loading forever', flush=True); threading.Event().wait()"


class StandIn(LocalServer):
    def __init__(self, script: str, tmp_path: Path, **kwargs: Any) -> None:
        model = tmp_path / "model.gguf"
        model.write_bytes(b"GGUF")
        super().__init__(model, **kwargs)
        self.script = script

    def _command(self, path: Path) -> list[str]:
        return [sys.executable, "-c", self.script, str(self.port)]


class RevivalWaits:
    """What each wait of a refused loopback request for aklab's server returned
    (``aklab.llm.revival.wait_until_serving``); ``begun`` is set when the first one starts."""

    def __init__(self) -> None:
        self.results: list[bool] = []
        self.begun = threading.Event()
