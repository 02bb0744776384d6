"""The bench's start-up measurements, each in a fresh Python process with warm caches: the app (until
Service.load is ready) and the command line (`python -m raqa ask --json` until its first window verdict)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

from raqa.config import AppConfig


class StartTime(NamedTuple):
    process_s: float  # from launching the interpreter to a ready Service (what a user waits for)
    in_process_s: float  # from the first import of raqa to a ready Service


START_SCRIPT = """
import json, sys, time
start = time.perf_counter()
from raqa.config import AppConfig
from raqa.service import Service
Service.load(AppConfig.from_env(**json.loads(sys.argv[1])), progress=lambda message: None)
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def child_env() -> dict[str, str]:
    """This process's environment, with this checkout of raqa first on the child's import path."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env


def cached_start(config: AppConfig) -> StartTime:
    """Launch a fresh interpreter that imports raqa and loads the Service from the (warm) cache."""
    overrides = {"corpus": config.corpus, "model": config.model, "adapter": config.adapter}
    overrides["cache_dir"] = str(config.cache_dir)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", START_SCRIPT, json.dumps(overrides)],
        capture_output=True,
        text=True,
        env=child_env(),
        check=False,
    )
    process_s = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"The start-up process failed: {done.stderr.strip()[-500:]}")
    in_process_s = json.loads(done.stdout.strip().splitlines()[-1])["seconds"]
    return StartTime(process_s, in_process_s)


ASK_QUESTION = "Who painted the Mona Lisa?"  # fixed, so runs compare; its pages are in the embedded corpus
ASK_TIMEOUT_S = 600.0


class AskStart(NamedTuple):
    question: str
    run_started_s: (
        float | None
    )  # from launching `python -m raqa ask --json` to its run_started line (loaded; what the target judges)
    first_verdict_s: float | None  # ... to its first window_verdict line
    final_s: float | None  # ... to its final (or run_failed) line; None when it never printed one


def ask_command(config: AppConfig, question: str = ASK_QUESTION) -> list[str]:
    """`python -m raqa ask QUESTION --json` with the bench's corpus, model, adapter and cache passed through."""
    argv = [sys.executable, "-m", "raqa", "ask", question, "--json", "--cache", str(config.cache_dir)]
    for flag, value in (("--corpus", config.corpus), ("--model", config.model), ("--adapter", config.adapter)):
        if value:
            argv += [flag, str(value)]
    return argv


def ask_start(config: AppConfig, question: str = ASK_QUESTION, timeout: float = ASK_TIMEOUT_S) -> AskStart:
    """Launch `python -m raqa ask --json` in a fresh interpreter (warm cache) and read its stdout line by line,
    timing its first event (the service is ready), its first window_verdict and its final event from the launch."""
    run_started_s = first_verdict_s = final_s = None
    with tempfile.TemporaryFile(mode="w+") as errors:
        start = time.perf_counter()
        child = subprocess.Popen(
            ask_command(config, question), stdout=subprocess.PIPE, stderr=errors, text=True, env=child_env()
        )
        watchdog = threading.Timer(timeout, child.kill)
        watchdog.start()
        try:
            for line in child.stdout:
                kind = _event_type(line)
                if kind == "run_started" and run_started_s is None:
                    run_started_s = time.perf_counter() - start
                elif kind == "window_verdict" and first_verdict_s is None:
                    first_verdict_s = time.perf_counter() - start
                elif kind in ("final", "run_failed"):
                    final_s = time.perf_counter() - start
            returncode = child.wait()
        finally:
            watchdog.cancel()
            child.stdout.close()
        if returncode != 0:
            errors.seek(0)
            raise RuntimeError(f"`python -m raqa ask` failed ({returncode}): {errors.read().strip()[-500:]}")
    return AskStart(question, run_started_s, first_verdict_s, final_s)


def _event_type(line: str) -> str | None:
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return None
    return event.get("type") if isinstance(event, dict) else None
