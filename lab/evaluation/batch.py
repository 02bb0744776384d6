"""Resumable batch runs: many questions through a bounded pool of workers, one row per finished item.

The results are a RowsFile keyed by item id (rows_file.py, the one resumable JSONL every evaluation uses): each
result is appended as one line `{"id": ..., ...}`, flushed and fsynced as soon as its item finishes, so a run that
is stopped or killed loses at most the items still in flight; started again on the same file, a batch runs only the
ids not there yet. The file is locked while the batch runs, and results are written by one thread, so no id is ever
written twice.

An item whose work raises is not written (it is reported, and the next run retries it); a run that ends in
RunFailed is a result like any other and is written.

Left out: retrying work within a run (the endpoint backend retries its own calls), and merging files.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from lab.evaluation.rows_file import RowsFile
from raqa.evaluation.metrics import exact_match, f1
from raqa.reading.events import Final, RunEvent, to_json

if TYPE_CHECKING:
    from raqa.service import RunPlan


class HasId(Protocol):
    id: str


@dataclass(frozen=True)
class BatchSummary:
    total: int  # items asked for
    skipped: int  # already in the file when the run started
    written: int  # finished and written by this run
    errors: dict[str, str] = field(default_factory=dict)  # id -> what its work raised; not written


def result_id(row: dict) -> str:
    """A result's key: its string id (TypeError for any other, so a line without one is unreadable)."""
    if not isinstance(row["id"], str):
        raise TypeError("a result's id is a string")
    return row["id"]


def run_batch(
    items: Sequence[HasId],
    work: Callable[[HasId], dict],
    out_path: str | Path,
    concurrency: int = 8,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> BatchSummary:
    """Run work(item) for every item not yet in out_path, at most `concurrency` at once; append each result.
    RowsFileError when the file cannot be resumed (another run holds it, a line before the last is unreadable).

    progress(done, total) counts items already in the file as done.

    Example:
        run_batch(load_questions("nq", limit=100), lambda q: {"n": len(q.question)}, "runs.jsonl", 32)
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be 1 or more, got {concurrency}.")
    ids = [item.id for item in items]
    if len(set(ids)) != len(ids):
        twice = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"Item ids must be unique; {twice!r} occurs more than once.")
    with RowsFile(out_path, None, result_id) as rows:
        rows.claim()
        todo = [item for item in items if rows.get(item.id) is None]
        skipped = len(items) - len(todo)
        progress(skipped, len(items))
        written, errors = 0, {}
        for item, outcome in _pooled(todo, work, concurrency):
            if isinstance(outcome, BaseException):
                errors[item.id] = f"{type(outcome).__name__}: {outcome}"
            else:
                try:
                    rows.add({**outcome, "id": item.id})
                except (TypeError, ValueError) as e:
                    errors[item.id] = f"the result is not JSON: {e}"
                else:
                    written += 1
            progress(skipped + written + len(errors), len(items))
        return BatchSummary(len(items), skipped, written, errors)


def _pooled(items: Sequence[HasId], work: Callable, concurrency: int) -> Iterator[tuple[HasId, object]]:
    """(item, result or exception) in the order they finish; at most `concurrency` run and as many wait queued."""
    pending: dict[Future, HasId] = {}
    queue = iter(items)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="batch")
    try:
        while True:
            for item in queue:
                pending[pool.submit(work, item)] = item
                if len(pending) >= 2 * concurrency:
                    break
            if not pending:
                return
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                item = pending.pop(future)
                error = future.exception()
                yield item, error if error is not None else future.result()
    finally:
        # subtle: on Ctrl-C or an abandoned run, queued items are dropped; running ones finish unwritten
        pool.shutdown(wait=False, cancel_futures=True)


def question_work(plan: Callable[[str], RunPlan], events: Callable[[RunPlan], Iterable[RunEvent]]) -> Callable:
    """The work for one QAItem: the run `plan(question)` decides (Service.plan, as the page and `ask` make it),
    streamed by `events` (Service.events), its last event, and EM/F1 against the gold answers."""

    def work(item) -> dict:
        chosen = plan(item.question)
        (last,) = deque(events(chosen), maxlen=1)
        answer = last.answer if isinstance(last, Final) else None
        return {
            "question": item.question,
            "answers": list(item.answers),
            "model": chosen.backend.name,
            "reader": chosen.reader.name,
            "settings": asdict(chosen.settings),
            "result": to_json(last),
            "em": exact_match(answer, item.answers),
            "f1": round(f1(answer, item.answers), 4),
        }

    return work


def summarise_batch(path: str | Path, ids: Sequence[str]) -> dict:
    """Counts and mean EM/F1 over the records of the given ids in a results file."""
    rows = RowsFile(path, None, result_id).rows
    records = [rows[i] for i in dict.fromkeys(ids) if i in rows]
    finals = [r["result"] for r in records if r.get("result", {}).get("type") == "final"]
    n = len(records)
    return {
        "questions": n,
        "answered": sum(not f["abstained"] for f in finals),
        "abstained": sum(f["abstained"] for f in finals),
        "run_failed": n - len(finals),
        "em": sum(bool(r.get("em")) for r in records) / n if n else 0.0,
        "f1": sum(float(r.get("f1") or 0) for r in records) / n if n else 0.0,
    }
