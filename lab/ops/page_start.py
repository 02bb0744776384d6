"""Time `python app.py` from its launch to a usable page, as Spaces starts it: `python app.py` in the checkout,
with SPACE_ID set when asked (the app then installs the data packages if they are missing, and keeps the public
page's limits). The page is usable when Gradio serves its config (`/config`): app.py loads the service before it
launches the server, so the first answer means the page, its model and its index are ready.

A fresh start (a new virtual environment with requirements.txt only, an empty cache) includes installing the data
packages, building the BM25 index and dequantising the model; a warm one (the same again) only loads them. Left
out: creating the virtual environment (time `pip install -r requirements.txt` for that) and the browser's part.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from lab.ops.bench_start import child_env
from lab.ops.reliability import free_port
from lab.records import ROOT

PAGE_TIMEOUT_S = 900.0  # a fresh start on a busy 2-core machine: installs, index, dequantising
REHEARSAL_SPACE_ID = "rehearsal/raqa"  # what SPACE_ID holds when a start is timed as on a Space


@dataclass(frozen=True)
class PageStart:
    seconds: float  # from launching `python app.py` to the page's first answer
    url: str  # where the page is served (loopback)
    python: str  # the interpreter that ran app.py
    space: bool  # SPACE_ID was set
    rss_mib: float | None = None  # the app's resident memory when its page first answered (None: not readable)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "config", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def process_rss_mib(pid: int) -> float | None:
    """A process's resident memory in MiB, from /proc (None where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return None


def fresh_and_warm(python: str = sys.executable, space: bool = True) -> dict:
    """Two starts on one new, empty cache: fresh (joins the 1.5B's GGUF from its package parts, builds the index)
    and warm (the same again: only loads). The data packages are installed already: a Space's start also installs
    them (docs/deploy.md). Each start with the app's resident memory when the page first answered."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="raqa-start-") as cache:
        for name in ("fresh", "warm"):
            with started_app(python, space=space, cache=Path(cache)) as start:
                out[name] = {"seconds": start.seconds, "rss_mib": start.rss_mib}
    return out


@contextmanager
def started_app(
    python: str = sys.executable,
    space: bool = True,
    cache: Path | None = None,
    log: Path | None = None,
    timeout: float = PAGE_TIMEOUT_S,
) -> Iterator[PageStart]:
    """Launch app.py with python (on loopback, a free port), wait for a usable page and yield its start time; the
    app is stopped on leaving the block. RuntimeError, with the end of its output, when it exits or times out."""
    port = free_port()
    env = child_env()
    env.update(GRADIO_SERVER_NAME="127.0.0.1", PORT=str(port), GRADIO_ANALYTICS_ENABLED="False")
    env.pop("GRADIO_SERVER_PORT", None)
    if space:
        env["SPACE_ID"] = REHEARSAL_SPACE_ID
    if cache is not None:
        env["RAQA_CACHE"] = str(cache)
    log_path = log or Path(tempfile.mkstemp(prefix="raqa-app-", suffix=".log")[1])
    url = f"http://127.0.0.1:{port}/"
    with log_path.open("w") as out:
        start = time.perf_counter()
        app = subprocess.Popen([python, "app.py"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            while not _answers(url):
                if app.poll() is not None or time.perf_counter() - start > timeout:
                    tail = log_path.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"`python app.py` did not serve a page (exit {app.poll()}):\n{tail}")
                time.sleep(0.25)
            yield PageStart(time.perf_counter() - start, url, python, space, process_rss_mib(app.pid))
        finally:
            app.terminate()
            try:
                app.wait(timeout=30)
            except subprocess.TimeoutExpired:
                app.kill()
                app.wait()
