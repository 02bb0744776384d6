"""Result files with their provenance: which command, data, model and code version made each number.

Every committed JSON under assets/results/ carries the same provenance fields (`provenance()`); the page reads them
back with `load_results()` and recomputes nothing. The lab writes them (lab/records.py), raqa only reads them.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from raqa import __version__
from raqa.config import ASSETS_DIR

RESULTS_DIR = ASSETS_DIR / "results"
# Published numbers we can state with confidence: the paper's headline false-answer rate of a strong
# model on negative windows, zero-shot. Other tables are not repeated from memory.
PAPER = {"negative_windows": {"false_answer_rate_zero_shot": 0.543}}


def code_version() -> str:
    try:
        commit = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return f"raqa {__version__} ({commit})"


def provenance() -> dict:
    """What every record says about when, where and with which code it was made."""
    return {
        "code_version": code_version(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "load_average_before": os.getloadavg()[0],
    }


def load_results(out_dir: Path = RESULTS_DIR) -> dict[str, dict]:
    """Every committed result file, keyed by file stem; unreadable files are reported, not raised."""
    results = {}
    for path in sorted(out_dir.glob("*.json")):
        try:
            results[path.stem] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            results[path.stem] = {"error": f"{path.name}: {e}"}
    return results
