"""The lab's progress on the terminal: a bar over an experiment's items, a counter of a known total, and the line
that says where a measurement's record was written."""

from __future__ import annotations

import sys
from pathlib import Path

from lab.records import write_json
from raqa.cli.output import say


def progress_bar(label: str):
    """progress(items) for the experiments: a tqdm bar on stderr over the items."""
    from tqdm import tqdm

    return lambda items: tqdm(items, desc=label, file=sys.stderr)


def counter_bar(label: str, total: int):
    """A tqdm bar of a known total on stderr (use as a context manager; .update(1) per item)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=label, file=sys.stderr)


def write_and_say(path: str | Path, record: dict) -> None:
    """Write a measurement's record (atomically, as every record is) and say where."""
    out = write_json(Path(path), record)
    say(f"wrote {out}")
