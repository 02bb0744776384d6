"""Resumable batch runs: many questions through a bounded pool of workers, one JSONL line per finished item.

Each result is appended as one line `{"id": ..., ...}`, flushed and fsynced as soon as its item finishes, so a
run that is stopped or killed loses at most the items still in flight. Started again on the same file, a batch
reads the ids already there and runs only the rest. A crash can leave the last line cut short: it is dropped
(the file is truncated to the last whole line) and that item runs again. No id is ever written twice: results
are written by one thread, and the file is locked (flock) so two batches cannot append to it at once.

An item whose work raises is not written (it is reported, and the next run retries it); a run that ends in
RunFailed is a result like any other and is written.

Left out: retrying work within a run (the endpoint backend retries its own calls), and merging files.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

from raqa.evaluation.metrics import exact_match, f1
from raqa.reading.events import Final, RunEvent, to_json

if TYPE_CHECKING:
    from raqa.service import RunPlan


class HasId(Protocol):
    id: str


class BatchError(RuntimeError):
    """The results file cannot be resumed or written; the message names the file and what is wrong."""


@dataclass(frozen=True)
class BatchSummary:
    total: int  # items asked for
    skipped: int  # already in the file when the run started
    written: int  # finished and written by this run
    errors: dict[str, str] = field(default_factory=dict)  # id -> what its work raised; not written


def _record_id(line: bytes) -> str | None:
    """The id of one results line, or None if the line is not a JSON object with a string "id"."""
    try:
        record = json.loads(line)
    except ValueError:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None
    return record["id"] if isinstance(record, dict) and isinstance(record.get("id"), str) else None


def read_finished(path: Path) -> tuple[set[str], int]:
    """The ids in a results file, and how many of its bytes to keep: everything but an unreadable last line.

    A crash can cut the last line short (or, on power loss, fill it with garbage); a bad line anywhere else
    raises BatchError. Blank lines are skipped.
    """
    if not path.exists():
        return set(), 0
    data = path.read_bytes()
    *whole, tail = data.split(b"\n")  # tail: what follows the last newline (empty when the file ends with one)
    ids: set[str] = set()
    keep = 0
    for number, line in enumerate(whole, start=1):
        record_id = _record_id(line)
        if record_id is None and line.strip():
            if number == len(whole) and not tail:
                break
            raise BatchError(
                f'{path}, line {number}: not a JSON object with a string "id"; '
                "only the last line may be cut short by a crash."
            )
        if record_id is not None:
            ids.add(record_id)
        keep += len(line) + 1
    if tail and (record_id := _record_id(tail)) is not None:  # a whole record that lacks only its newline
        ids.add(record_id)
        keep = len(data)
    return ids, keep


def _open_locked(path: Path) -> IO[bytes]:
    path.parent.mkdir(parents=True, exist_ok=True)
    out = open(path, "a+b")  # noqa: SIM115 - closed by run_batch; appends, and reads its last byte
    try:
        fcntl.flock(out.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        out.close()
        raise BatchError(f"{path}: another batch is writing to this file.") from None
    return out


def _repair(out: IO[bytes], path: Path, keep: int) -> None:
    """Cut the file to `keep` bytes, and end it with a newline if its last record lacks one."""
    if keep < path.stat().st_size:
        os.truncate(path, keep)
    if keep and os.pread(out.fileno(), 1, keep - 1) != b"\n":
        out.write(b"\n")
    out.flush()
    os.fsync(out.fileno())


def run_batch(
    items: Sequence[HasId],
    work: Callable[[HasId], dict],
    out_path: str | Path,
    concurrency: int = 8,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> BatchSummary:
    """Run work(item) for every item not yet in out_path, at most `concurrency` at once; append each result.

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
    path = Path(out_path)
    out = _open_locked(path)
    try:
        finished, keep = read_finished(path)
        _repair(out, path, keep)
        todo = [item for item in items if item.id not in finished]
        skipped = len(items) - len(todo)
        progress(skipped, len(items))
        written, errors = 0, {}
        for item, outcome in _pooled(todo, work, concurrency):
            if isinstance(outcome, BaseException):
                errors[item.id] = f"{type(outcome).__name__}: {outcome}"
            else:
                try:
                    line = json.dumps({**outcome, "id": item.id}, ensure_ascii=False).encode() + b"\n"
                except (TypeError, ValueError) as e:
                    errors[item.id] = f"the result is not JSON: {e}"
                else:
                    out.write(line)
                    out.flush()
                    os.fsync(out.fileno())
                    written += 1
            progress(skipped + written + len(errors), len(items))
        return BatchSummary(len(items), skipped, written, errors)
    finally:
        out.close()


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


def summarise(path: str | Path, ids: Sequence[str]) -> dict:
    """Counts and mean EM/F1 over the records of the given ids in a results file."""
    wanted = set(ids)
    records = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("id") in wanted:
            records.append(record)
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
