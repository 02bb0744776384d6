"""The bench's start-up measurements: a fresh Python process with warm caches, timed until it is ready."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
