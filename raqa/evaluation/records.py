"""Result files with their provenance: which command, data, model and code version made each number.

Every committed JSON under assets/results/ is written here, by experiments, evaluations and measurements
alike, so every record carries the same provenance fields (`provenance()`); the page reads them back with
`load_results()` and recomputes nothing.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import time
from dataclasses import dataclass
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


DEMO_VERBS = ("ask", "route", "batch", "record", "pipeline", "record-pipeline")  # python -m raqa's; the rest: lab's


def command_line(program: str, *arguments: object, **options: object) -> str:
    """The command that reruns a record's work, as the record states it: `python -m raqa VERB` for the demo's verbs,
    `python -m lab VERB` for the lab's (or `python -m PROGRAM` for a module, lab.ops.*), its arguments, then `--option value` for each option in order. None and False
    leave an option out, True is a bare flag, a list or tuple is joined with commas; every value is shell-quoted.

    Example:
        >>> command_line("eval-badges", datasets=["nq", "triviaqa"], limit=30, endpoint=None, grounded_only=True)
        'python -m lab eval-badges --datasets nq,triviaqa --limit 30 --grounded-only'
        >>> command_line("ask", "Who wrote Emma?", json=True)
        "python -m raqa ask 'Who wrote Emma?' --json"
    """
    package = "raqa" if program in DEMO_VERBS else "lab"
    parts = ["python -m", program if "." in program else f"{package} {program}"]
    return " ".join([*parts, *(shlex.quote(str(a)) for a in arguments)]) + options_line(**options)


def options_line(**options: object) -> str:
    """The options part of command_line, each after a space ("" for none): to extend a command already stated."""
    words = []
    for name, value in options.items():
        if value is None or value is False:
            continue
        words.append(f" --{name.replace('_', '-')}")
        if value is not True:
            words.append(
                " " + shlex.quote(",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value))
            )
    return "".join(words)


def provenance() -> dict:
    """What every record says about when, where and with which code it was made."""
    return {
        "code_version": code_version(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "load_average_before": os.getloadavg()[0],
    }


def write_json(path: Path, record: dict) -> Path:
    """Write a record atomically (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def write(name: str, dataset: str, results: dict, about: dict, out_dir: Path = RESULTS_DIR) -> Path:
    """An experiment's record: its name and dataset, what made it (`about`: command, sample, model...),
    the common provenance, the paper's number where there is one, and the results."""
    record = {
        "experiment": name,
        "dataset": dataset,
        **about,
        **provenance(),
        "paper": PAPER.get(name, {}),
        "results": results,
    }
    return write_json(out_dir / f"{name}-{dataset}.json", record)


def load_results(out_dir: Path = RESULTS_DIR) -> dict[str, dict]:
    """Every committed result file, keyed by file stem; unreadable files are reported, not raised."""
    results = {}
    for path in sorted(out_dir.glob("*.json")):
        try:
            results[path.stem] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            results[path.stem] = {"error": f"{path.name}: {e}"}
    return results


def timed(fn, *args, **kwargs) -> tuple[object, float]:
    """fn(*args, **kwargs) and the seconds it took."""
    start = time.perf_counter()
    return fn(*args, **kwargs), time.perf_counter() - start


@dataclass(frozen=True)
class Run:
    """A finished experiment or evaluation: its results, its record's provenance and its wall time."""

    results: dict
    about: dict  # command, sample, model, adapter, corpus, settings, seconds
    seconds: float
