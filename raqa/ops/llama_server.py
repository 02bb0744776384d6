"""llama.cpp's OpenAI-compatible server (llama-cpp-python[server], a test dependency) on loopback, serving a GGUF
file: the bench's reference for per-window speed, and the real server the endpoint tests talk to.

`llama_cpp_server(gguf)` starts it, waits until /v1/models answers, yields its base URL and stops it. It raises
RuntimeError, with the log's last lines, when the package is missing or the server does not come up. Left out:
GPU offload and server flags beyond the context size (it uses every core, as our model does).
"""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from raqa.ops.reliability import free_port

START_TIMEOUT_S = 180.0
ALIAS = "smollm2"  # the model name the server answers to


@contextlib.contextmanager
def llama_cpp_server(gguf: Path, context_tokens: int = 4096) -> Iterator[str]:
    if importlib.util.find_spec("llama_cpp") is None:
        raise RuntimeError(
            "llama.cpp's server is not installed: pip install -r requirements-server.txt (see its comment)"
        )
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "server.log"
        with log_path.open("w") as log:
            command = [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(gguf),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                str(context_tokens),
                "--model_alias",
                ALIAS,
                # its default cuts a streaming reply short, as if finished, when another request arrives:
                # with requests in flight at once, every reply but the newest would end early
                "--interrupt_requests",
                "False",
            ]
            server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
            url = f"http://127.0.0.1:{port}/v1"
            try:
                _wait_until_up(server, url, log_path)
                yield url
            finally:
                server.terminate()
                server.wait(timeout=30)


def _wait_until_up(server: subprocess.Popen, url: str, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if server.poll() is not None:
            tail = log_path.read_text(errors="replace")[-1500:]
            raise RuntimeError(f"llama.cpp's server exited with status {server.returncode}:\n{tail}")
        try:
            if httpx.get(url + "/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"llama.cpp's server did not answer within {START_TIMEOUT_S:.0f} s")
        time.sleep(0.5)
