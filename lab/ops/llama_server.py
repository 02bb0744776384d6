"""llama.cpp's OpenAI-compatible server on loopback, serving a GGUF file: the real server the endpoint tests talk to.

It is the server xllamacpp embeds (the same prebuilt wheel that runs the page's 1.5B reader in-process: nothing
compiles), started in this process; it listens on a free loopback port from the moment it is built.
`llama_cpp_server(gguf)` starts it, waits until /v1/models answers, yields its base URL and stops it. It raises
RuntimeError when xllamacpp is missing or the server does not come up. Left out: GPU offload and server flags beyond
the context size, the slots and the threads.
"""

from __future__ import annotations

import contextlib
import importlib.util
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

START_TIMEOUT_S = 60.0
ALIAS = "smollm2"  # the model name the server answers to


@contextlib.contextmanager
def llama_cpp_server(gguf: Path, context_tokens: int = 4096, slots: int = 4, threads: int = 2) -> Iterator[str]:
    if importlib.util.find_spec("xllamacpp") is None:
        raise RuntimeError("llama.cpp's server is not installed: pip install -r requirements.txt (xllamacpp)")
    import xllamacpp  # lazy: only the tests and the bench start a server

    params = xllamacpp.CommonParams()
    params.model.path = str(gguf)
    params.model_alias = ALIAS
    params.n_parallel = slots
    params.n_ctx = slots * context_tokens
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.verbosity = -1
    try:
        server = xllamacpp.Server(params)
    except Exception as e:  # the extension raises its own types
        raise RuntimeError(f"llama.cpp's server could not start: {type(e).__name__}: {e}") from e
    url = server.listening_address.rstrip("/") + "/v1"
    try:
        _wait_until_up(url)
        yield url
    finally:
        del server  # stops its loop and frees the model


def _wait_until_up(url: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            if httpx.get(url + "/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"llama.cpp's server did not answer within {START_TIMEOUT_S:.0f} s")
        time.sleep(0.2)
