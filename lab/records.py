"""Writing result records: the command that reruns a record's work, the atomic write, and a run's outcome.

Every committed JSON under assets/results/ is written here, by experiments, evaluations and measurements alike, with
the provenance raqa/evaluation/records.py states (the page reads the records back there).
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from raqa.config import ASSETS_DIR
from raqa.evaluation.records import PAPER, RESULTS_DIR, provenance

ROOT = ASSETS_DIR.parent  # the repository

DEMO_VERBS = ("ask", "route", "record", "pipeline", "record-pipeline")  # python -m raqa's; the rest: lab's


def command_line(program: str, *arguments: object, **options: object) -> str:
    """The command that reruns a record's work, as the record states it: `python -m raqa VERB` for the demo's verbs,
    `python -m lab VERB` for the lab's (or `python -m PROGRAM` for a module, lab.ops.*), its arguments, then `--option value` for each option in order. None and False
    leave an option out, True is a bare flag, a list or tuple is joined with commas; every value is shell-quoted.

    Example:
        >>> command_line("experiment badges", datasets=["nq", "triviaqa"], limit=30, endpoint=None, grounded_only=True)
        'python -m lab experiment badges --datasets nq,triviaqa --limit 30 --grounded-only'
        >>> command_line("ask", "Who wrote Emma?", json=True)
        "python -m raqa ask 'Who wrote Emma?' --json"
    """
    package = "raqa" if program in DEMO_VERBS else "lab"
    parts = ["python -m", program if "." in program else f"{package} {program}"]
    return " ".join([*parts, *(shlex.quote(str(a)) for a in arguments)]) + options_line(**options)


def stated(args: object, *names: str) -> dict:
    """The named options of a command's parsed arguments, by name, for command_line or a settings record.

    Example:
        >>> from types import SimpleNamespace
        >>> command_line("bench soak", **stated(SimpleNamespace(runs=3, out=None), "runs", "out"))
        'python -m lab bench soak --runs 3'
    """
    return {name: getattr(args, name) for name in names}


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


def write_json(path: Path, record: dict) -> Path:
    """Write a record atomically (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def write_record(name: str, dataset: str, results: dict, about: dict, out_dir: Path = RESULTS_DIR) -> Path:
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
