"""`python -m raqa gate-with-model`: the Weak support gate measured on dev runs with the model, not a simulation.

fit-support chooses the gate in a simulation that takes the judge's answer as the model's. In a real run a window
ends with an answer only when the model, asked because a page reached the gate, answers so that the page's reader
accepts it (the model + judge reader: the judge finds the same answer). Here, for held-out dev questions (train-judge's
split, never trained on; NQ-open and TriviaQA dev), the judge reads BM25's top K pages with the shipped support model,
and every page whose support reaches `floor` is read as a one-page window by the page's reader with the gate at
floor; its verdict says whether the run would end there. For any gate g >= floor, a run with the page's defaults
(forward, one page a window) ends at the first page, in rank order, whose support reaches g and whose window ended
with an answer. `sweep` scores candidate gates that way: answers given, the share right, and unanswerable questions
(no gold answer anywhere in the corpus) ending with one, with Wilson intervals. Nothing shipped changes here.
Left out: the simulation and the support model (support_fit.py), the engine (reading/engine.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from raqa.evaluation.metrics import answer_contained
from raqa.reading.engine import accepted, read_window
from raqa.reading.events import WindowVerdict
from raqa.stats import wilson

GATES = (0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.0451, 0.06, 0.08, 0.1)


def question_pages(item, index, backend, settings, judge, positives, floor: float) -> dict:
    """One question: each top-K page whose support reaches floor, read as a window of its own, with whether the run
    would end there and whether that answer is right."""
    hits = tuple(index.search(item.question, settings.k))
    readings = judge.read_ranked(item.question, hits) if hits else []
    pages = []
    for hit, reading in zip(hits, readings, strict=True):
        if reading.support is None or reading.support < floor:
            continue
        events = read_window(item.question, (hit,), 1, 1, backend, settings, judge, (reading,))
        verdict = next(e for e in events if isinstance(e, WindowVerdict))
        ends = accepted(verdict.verdict, settings) and verdict.reply.answer is not None
        answer = verdict.reply.answer if ends else None
        pages.append(
            {
                "rank": hit.rank,
                "support": round(reading.support, 4),
                "verdict": verdict.verdict,
                "answer": answer,
                "right": bool(answer) and answer_contained(answer, item.answers),
            }
        )
    return {"id": item.id, "question": item.question, "anywhere": positives.anywhere(item.answers), "pages": pages}


def collect(items: Iterable, progress: Callable[[Iterable], Iterable] = iter, **reading) -> list[dict]:
    """question_pages of each (dataset, item), with its dataset."""
    return [{"dataset": dataset, **question_pages(item, **reading)} for dataset, item in progress(list(items))]


def end_of(row: dict, gate: float) -> dict | None:
    """The page a run with this gate ends on: the first, in rank order, at or above the gate whose window ended."""
    return next((p for p in row["pages"] if p["support"] >= gate and p["answer"] is not None), None)


def sweep(rows: Sequence[dict], gates: Sequence[float] = GATES, floor: float = 0.0) -> list[dict]:
    """Per candidate gate (those at or above floor): the per-question figures of runs with the page's defaults."""
    out = []
    for gate in (g for g in gates if g >= floor):
        ends = [end_of(row, gate) for row in rows]
        given = [end for end in ends if end]
        unanswerable = [end is not None for end, row in zip(ends, rows, strict=True) if not row["anywhere"]]
        out.append(
            {
                "gate": gate,
                "ended_with_answer": wilson(len(given), len(rows)).as_dict(),
                "answers_right": wilson(sum(end["right"] for end in given), len(given)).as_dict(),
                "right_of_all": wilson(sum(end["right"] for end in given), len(rows)).as_dict(),
                "unanswerable_with_answer": wilson(sum(unanswerable), len(unanswerable)).as_dict(),
            }
        )
    return out


def lowest_gate(swept: Sequence[dict], max_unanswerable: float) -> float | None:
    """The lowest gate whose unanswerable questions end with an answer at most max_unanswerable of the time."""
    return next((s["gate"] for s in swept if s["unanswerable_with_answer"]["value"] <= max_unanswerable), None)
