"""Reading measured on the questions the demo is for, per question, with the page's defaults: readers compared in one
run, and the grader's Answered threshold chosen on dev questions.

Questions of NQ-open and TriviaQA are split by whether a gold answer occurs in one of BM25's top 15 pages
("readable") or in none ("no answer in the pages"), and the first N of each kind are drawn from a seeded shuffle.
Every question is asked of every reader through `Service.plan` and `Service.events`, the page's own path, taking
turns question by question so the machine's load falls on each reader alike; each run's outcome is one row of a
JSON-lines file written as it goes (a stopped run resumes where it stopped).

    python -m lab.evaluation.reading_eval --split dev --per-kind 12 --readers qwen-1.5b --calibrate
    python -m lab.evaluation.reading_eval --split test --per-kind 15 --readers qwen-1.5b,qwen-1.5b@bm25,base+judge@bm25

A reader may name its retrieval after an @ (`qwen-1.5b@bm25`: the 1.5B reading BM25's pages); without one it reads
the page's default retrieval. Rows written before hybrid retrieval existed name their reader with "@bm25" (they read
BM25's pages). The readable / no-answer split is by BM25's top 15 for every reader, so the question set stays fixed.

"Right" is answer containment either way (a normalised gold answer occurs in the normalised answer, "Sir Alexander
Fleming" for "Alexander Fleming", or the answer in a gold one, "1917" for "in 1917"); exact match is reported too. With --calibrate (dev only) the grader's Answered threshold is
the lowest P(yes) at which dev answers are right at least 90% of the time (with at least MIN_GREEN of them), or none,
and the Weak support cut is the one of WEAK_CANDIDATES under which most readable dev questions end right with at most
10% of no-answer ones ending with an answer (the dev runs replayed at each cut); both are written to
assets/grader/grader.json with the command and data that chose them. Test questions only measure.

Left out: drawing the figures (web/) and the judge's own measurements (badges.py).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from lab.evaluation.rows_file import RowsFile
from lab.records import command_line, write_json
from lab.stats import proportion
from raqa.config import AppConfig, RunForm, RunSettings
from raqa.evaluation.fan_out import streamed
from raqa.evaluation.metrics import answer_contained, exact_match, is_positive
from raqa.evaluation.questions import QAItem, load_questions
from raqa.evaluation.records import RESULTS_DIR, provenance
from raqa.reading.engine import ending_window
from raqa.reading.events import Final, RunFailed, WindowStarted, WindowVerdict
from raqa.reading.grader import GRADER_FILE, WEAK

READING_RECORD = RESULTS_DIR / "reading-nq+triviaqa.json"
TOP_K = RunSettings.k  # the page's K: a question is readable when a gold answer is in its top K pages
PRECISION = 0.9  # the Answered badge's target precision on dev
MIN_GREEN = 8  # dev answers a green threshold must rest on


def draw(
    service, dataset: str, split: str, per_kind: int, seed: int, no_answer: int | None = None
) -> list[tuple[QAItem, str]]:
    """The first per_kind readable and per_kind (or no_answer) no-answer questions of a seeded shuffle, with their
    kind."""
    wanted = {"readable": per_kind, "no_answer": per_kind if no_answer is None else no_answer}
    items = load_questions(dataset, split)
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    drawn: dict[str, list] = {"readable": [], "no_answer": []}
    for i in order:
        item = items[i]
        hits = service.index.search(item.question, TOP_K)
        kind = "readable" if any(is_positive(h.page.text, item.answers) for h in hits) else "no_answer"
        if len(drawn[kind]) < wanted[kind]:
            drawn[kind].append((item, kind))
        if all(len(drawn[k]) >= n for k, n in wanted.items()):
            break
    return drawn["readable"] + drawn["no_answer"]


def is_right(answer: str | None, golds: Sequence[str]) -> bool:
    """A normalised gold answer occurs in the answer, or the answer in a gold one ("1917" for "in 1917").

    Example:
        >>> is_right("Sir Alexander Fleming", ["Alexander Fleming"]), is_right("1917", ["in 1917"])
        (True, True)
        >>> is_right("English", ["England and Ireland"]), is_right(None, ["x"])
        (False, False)
    """
    return bool(answer) and (answer_contained(answer, golds) or any(answer_contained(g, [answer]) for g in golds))


def reader_form(reader: str) -> RunForm:
    """The page's defaults for a reader spec: a reader's name, with its retrieval after an @ where it is not the
    default's.

    Example:
        >>> reader_form("qwen-1.5b@bm25").retrieval, reader_form("qwen-1.5b").retrieval
        ('bm25', 'hybrid')
    """
    name, _, retrieval = reader.partition("@")
    return RunForm(reader=name, retrieval=retrieval or RunForm.retrieval)


def run_row(service, item: QAItem, kind: str, dataset: str, reader: str) -> dict:
    """One question asked of one reader with the page's defaults: what the viewer ends with, and each window."""
    start, first_verdict, windows, asked = time.perf_counter(), None, [], 0
    final = None
    for event in service.events(service.plan(item.question, reader_form(reader))):
        if isinstance(event, WindowStarted) and event.prompt_tokens:
            asked += 1
        elif isinstance(event, WindowVerdict):
            first_verdict = first_verdict or time.perf_counter() - start
            support = event.grounding.support if event.grounding else None
            windows.append(
                {
                    "verdict": event.verdict,
                    "answer": event.reply.answer,
                    "support": support,
                    "right": is_right(event.reply.answer, item.answers),
                    "positive": any(is_positive(h.page.text, item.answers) for h in event.hits),
                }
            )
        elif isinstance(event, (Final, RunFailed)):
            final = event
    answer = final.answer if isinstance(final, Final) else None
    return {
        "id": item.id,
        "dataset": dataset,
        "kind": kind,
        "reader": reader,
        "question": item.question,
        "answers": list(item.answers),
        "answer": answer,
        "verdict": final.verdict if isinstance(final, Final) else "failed",
        "support": next((w["support"] for w in reversed(windows) if w["answer"] == answer), None) if answer else None,
        "right": is_right(answer, item.answers),
        "exact": exact_match(answer, item.answers),
        "windows": windows,
        "model_asked": asked,
        "seconds": time.perf_counter() - start,
        "first_verdict_s": first_verdict,
    }


def _share(flags: Sequence[bool]) -> dict:
    return proportion(flags).as_dict()


def _percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summarise_reading(rows: Sequence[dict]) -> dict:
    """The targets' figures for one reader's rows (any mix of sets), with n and 95% intervals."""
    readable = [r for r in rows if r["kind"] == "readable"]
    no_answer = [r for r in rows if r["kind"] == "no_answer"]
    green = [r for r in rows if r["verdict"] == "answered"]
    right = [r for r in rows if r["right"]]
    seconds = [r["seconds"] for r in rows]
    first = [r["first_verdict_s"] for r in rows if r["first_verdict_s"] is not None]
    return {
        "per_question": {
            "readable": {
                "right": _share([r["right"] for r in readable]),
                "exact": _share([r["exact"] for r in readable]),
            },
            "no_answer": {"answered": _share([r["answer"] is not None for r in no_answer])},
        },
        "badge": {
            "green": {
                "precision": _share([r["right"] for r in green]),
                "coverage": _share([r["verdict"] == "answered" for r in right]),
            },
            "amber": {"precision": _share([r["right"] for r in rows if r["verdict"] == "weak"])},
        },
        "windows_without_model": sum(len(r["windows"]) - r["model_asked"] for r in rows),
        "seconds": {"p50": _percentile(seconds, 0.5), "p95": _percentile(seconds, 0.95)},
        "first_verdict_seconds": {"p50": _percentile(first, 0.5), "p95": _percentile(first, 0.95)},
        "n": len(rows),
    }


WEAK_CANDIDATES = (0.5, 0.55, 0.6)  # dev rows read at a cut up to 0.6 replay exactly for these
MAX_NO_ANSWER = 0.1  # of no-answer questions ending with an answer


def replay_cut(rows: Sequence[dict], weak: float) -> list[dict]:
    """The rows as runs with Weak support from `weak` would have ended: at the first window whose support reaches it.
    Exact for a cut at or below the one the rows were read with (a run read on past every window below it)."""
    ended = []
    for r in rows:
        end = ending_window([w["support"] for w in r["windows"]], weak)
        stop = r["windows"][end] if end is not None else None
        answer = stop["answer"] if stop else None
        support = stop["support"] if stop else None
        ended.append({**r, "answer": answer, "support": support, "right": is_right(answer, r["answers"])})
    return ended


def choose_weak(rows: Sequence[dict]) -> float:
    """The Weak support cut of WEAK_CANDIDATES under which most readable dev questions end right while at most
    MAX_NO_ANSWER of the no-answer ones end with an answer (ties: the higher cut)."""

    def score(cut: float) -> tuple[int, float]:
        ended = replay_cut(rows, cut)
        no_answer = [r for r in ended if r["kind"] == "no_answer"]
        answered = sum(r["answer"] is not None for r in no_answer) / max(len(no_answer), 1)
        right = sum(r["right"] for r in ended if r["kind"] == "readable")
        return (right if answered <= MAX_NO_ANSWER else -1, cut)

    return max(WEAK_CANDIDATES, key=score)


def green_threshold(rows: Sequence[dict], weak: float = WEAK) -> float | None:
    """The lowest P(yes) from weak up whose answers at or above it are right at least PRECISION of the time, counting
    only cuts that keep MIN_GREEN answers or more; None when no cut does."""
    answered = sorted(
        (r["support"], r["right"]) for r in rows if r["answer"] is not None and (r["support"] or 0) >= weak
    )
    for i, (cut, _) in enumerate(answered):
        kept = [right for _, right in answered[i:]]
        if len(kept) >= MIN_GREEN and sum(kept) / len(kept) >= PRECISION:
            return round(cut, 4)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.evaluation.reading_eval", description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="nq,triviaqa")
    parser.add_argument("--split", default="test", choices=("dev", "test"))
    parser.add_argument("--per-kind", type=int, default=15, help="readable and no-answer questions a set")
    parser.add_argument("--no-answer", type=int, help="no-answer questions a set (default: --per-kind)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--readers", default="qwen-1.5b,base+judge", help="reader names, the first the 'after'")
    parser.add_argument(
        "--width",
        type=int,
        default=2,
        help="questions read at once (llama.cpp's slots); runs of one reader wait in its line, and their seconds and "
        "first verdict count that wait: time one reader with --width 1",
    )
    parser.add_argument("--rows", type=Path, help="JSON-lines file of runs (default: beside the record)")
    parser.add_argument("--calibrate", action="store_true", help="dev only: choose the grader's Answered threshold")
    args = parser.parse_args(argv)
    if args.calibrate and args.split != "dev":
        parser.error("--calibrate chooses a threshold on dev questions; test questions only measure.")
    from raqa.service import Service  # lazy: loads models

    service = Service.load(AppConfig.from_env(), progress=lambda m: print(m, file=sys.stderr))
    readers = args.readers.split(",")
    rows_path = args.rows or RESULTS_DIR / f"reading-{args.split}-rows.jsonl"
    rows = RowsFile(rows_path, None, lambda r: (r["dataset"], r["id"], r["reader"]))
    work = []
    for dataset in args.datasets.split(","):
        for item, kind in draw(
            service, dataset, args.split, per_kind=args.per_kind, seed=args.seed, no_answer=args.no_answer
        ):
            work += [(dataset, item, kind, reader) for reader in readers]
    todo = [w for w in work if rows.get((w[0], w[1].id, w[3])) is None]
    print(f"{len(work)} runs, {len(todo)} to do", file=sys.stderr)
    for done, row in enumerate(streamed(lambda w: run_row(service, w[1], w[2], w[0], w[3]), todo, args.width), 1):
        rows.add(row)
        print(
            f"[{done}/{len(todo)}] {row['reader']} {row['kind']}: {row['question']} -> {row['answer']} "
            f"({row['verdict']}, right={row['right']}, {row['seconds']:.1f} s)",
            file=sys.stderr,
            flush=True,
        )
    # rows are scored again as this code scores them (a row written by an earlier version keeps its golds)
    mine = [
        {**row, "right": is_right(row["answer"], row["answers"])}
        for w in work
        if (row := rows.get((w[0], w[1].id, w[3])))
    ]
    command = command_line(
        "lab.evaluation.reading_eval",
        datasets=args.datasets,
        split=args.split,
        per_kind=args.per_kind,
        no_answer=args.no_answer,
        seed=args.seed,
        readers=args.readers,
        calibrate=args.calibrate,
        width=args.width,
    )
    about = {
        "command": command,
        "data": f"NQ-open and TriviaQA {args.split} (pyserini 0.17.0's Anserini jar), seed {args.seed}, "
        f"{args.per_kind} readable and {args.per_kind if args.no_answer is None else args.no_answer} no-answer "
        f"questions a set, split by BM25's top {TOP_K} over the embedded Wikipedia lead sections; page defaults "
        "for every reader, its retrieval after an @ where it is not the default (hybrid)",
        "rows": str(rows_path.relative_to(RESULTS_DIR.parent.parent))
        if rows_path.is_relative_to(RESULTS_DIR.parent.parent)
        else str(rows_path),
        **provenance(),
    }
    results = {
        reader: {
            "all": summarise_reading([r for r in mine if r["reader"] == reader]),
            **{
                d: summarise_reading([r for r in mine if r["reader"] == reader and r["dataset"] == d])
                for d in args.datasets.split(",")
            },
        }
        for reader in readers
    }
    if args.calibrate:
        weak = choose_weak([r for r in mine if r["reader"] == readers[0]])
        graded = replay_cut([r for r in mine if r["reader"] == readers[0]], weak)
        threshold = green_threshold(graded, weak)
        answered = [r for r in graded if r["answer"] is not None and r["support"] is not None]
        green = [r["right"] for r in answered if threshold is not None and r["support"] >= threshold]
        amber = [
            r["right"] for r in answered if weak <= r["support"] and (threshold is None or r["support"] < threshold)
        ]
        cuts = {
            str(c): summarise_reading(replay_cut([r for r in mine if r["reader"] == readers[0]], c))
            for c in WEAK_CANDIDATES
        }
        dev = {
            "green_precision": _share(green),
            "weak_precision": _share(amber),
            **summarise_reading(graded),
            "cuts": cuts,
        }
        record = {"weak": weak, "answered": threshold, "precision_target": PRECISION, "min_answers": MIN_GREEN}
        write_json(GRADER_FILE, {**record, "reader": readers[0], **about, "dev": dev})
        print(f"Answered threshold: {threshold}", file=sys.stderr)
    else:
        write_json(READING_RECORD, {"measurement": "reading", **about, "results": results, "readers": readers})
    print(json.dumps({r: v["all"] for r, v in results.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
