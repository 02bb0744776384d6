"""The badge measured per question, the way a viewer meets it: full runs with the page's defaults, before and after.

Each test question is run twice through the engine with the page's default reader (base model + answer judge,
iterative, forward, w=1, K=15), once per badge rule:

    before   the judge's P(answer) alone: the card's gate and threshold, every agreeing answer Answered
    after    the support model (reading/support.py): gate and judge threshold at Weak support, Answered only from
             the support model's Answered threshold, Weak support between

Both runs of a question share the judge's readings and the model's replies (a window is read once, whichever rule
asks), so they differ only by the rule. One row per question goes to a JSONL as it finishes (a rerun resumes it);
`score` turns the rows into the record's `per_question` figures with Wilson intervals, plus the judge's page-level
AUC (answer-bearing vs answer-free pages of the top K, by P(answer) before and by support after) and the judge's
exact match as a reader on answer-bearing pages. Left out here: the command line (cli/badges.py), the figure
(lab/figures/experiments.py).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from lab.evaluation.positives import PositiveIndex
from lab.evaluation.rows_file import RowsFile, resumed
from lab.stats import auc, wilson
from raqa.config import RunSettings
from raqa.evaluation.metrics import answer_contained, exact_match
from raqa.evaluation.questions import QAItem
from raqa.models.base import Backend, Messages
from raqa.reading.engine import run
from raqa.reading.events import Final, RunFailed, WindowVerdict
from raqa.reading.judge import AnswerJudge
from raqa.reading.support import with_support
from raqa.retrieval.index import BM25Index

RULES = ("before", "after")


class SharedReplies(Backend):
    """A backend that replays a reply it has already streamed for the same messages and threshold."""

    def __init__(self, inner: Backend):
        self.inner, self.replies, self.calls = inner, {}, 0
        self.name, self.context_tokens = inner.name, inner.context_tokens

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def count_prompt_tokens(self, messages: Messages) -> int:
        return self.inner.count_prompt_tokens(messages)

    def reply(self, messages, plan=None, threshold: float = 0.5, max_new_tokens: int = 64) -> Iterator:
        key = (json.dumps(messages), threshold, max_new_tokens)
        if key not in self.replies:
            self.calls += 1
            self.replies[key] = list(self.inner.reply(messages, plan, threshold, max_new_tokens))
        yield from self.replies[key]


class RuleJudge:
    """The loaded judge under one badge rule: its readings of a question's pages are read once and shared."""

    def __init__(self, judge: AnswerJudge, support, readings: dict, lock: threading.Lock | None = None):
        self.judge, self.support, self.readings = judge, support, readings
        self.threshold, self.card = judge.threshold, judge.card
        self._lock = lock or threading.Lock()

    def gate(self, window: int) -> float:
        return (
            self.support.weak
            if self.support is not None
            else float((self.card.get("gate") or {}).get("thresholds", {}).get(str(window), self.threshold))
        )

    def read(self, question, pages):
        with self._lock:
            return self.judge.read(question, pages)

    def read_ranked(self, question, hits):
        key = (question, tuple(h.page.id for h in hits))
        with self._lock:
            if key not in self.readings:
                self.readings[key] = self.judge.read(question, hits)
            plain = self.readings[key]
            return plain if self.support is None else list(with_support(question, hits, plain, self.support))


def rule_settings(base: RunSettings, judge: RuleJudge) -> RunSettings:
    """The page's settings for the model + judge reader under the judge's rule."""
    if judge.support is None:
        gate = judge.gate(base.window)
        return base.replace(judge_threshold=judge.threshold, gate_threshold=gate, answered_threshold=None)
    weak = judge.support.weak
    return base.replace(judge_threshold=weak, gate_threshold=weak, answered_threshold=judge.support.answered)


def badge_row(
    item: QAItem,
    dataset: str,
    index: BM25Index,
    backend: SharedReplies,
    judges: dict,
    base: RunSettings,
    positives: PositiveIndex,
) -> dict:
    """One question run under every rule: its final answer and badge, and the judge's page readings."""
    row: dict = {
        "id": item.id,
        "dataset": dataset,
        "question": item.question,
        "answers": list(item.answers),
        "anywhere": positives.anywhere(item.answers),
    }
    for rule, judge in judges.items():
        events = list(run(item.question, index, backend, rule_settings(base, judge), judge))
        last = events[-1]
        if isinstance(last, RunFailed):
            row[rule] = {"failed": last.message}
            continue
        assert isinstance(last, Final)
        verdicts = [e for e in events if isinstance(e, WindowVerdict)]
        end = verdicts[-1] if last.answer is not None else None
        row[rule] = {
            "answer": last.answer,
            "verdict": last.verdict,
            "windows": last.windows_read,
            "support": end.grounding.support if end and end.grounding else None,
            "right": answer_contained(last.answer, item.answers),
        }
        if rule == "after":
            hits = index.search(item.question, base.k)
            readings = judge.read_ranked(item.question, hits)
            row["pages"] = [
                {
                    "rank": h.rank,
                    "positive": positives.is_positive(h.page, item.answers),
                    "p": round(r.p_answer, 4),
                    "support": r.support,
                    "exact": exact_match(r.answer, item.answers),
                }
                for h, r in zip(hits, readings, strict=True)
            ]
    row["model_calls"] = backend.calls
    return row


def run_rows(
    items: Sequence[tuple[str, QAItem]],
    index,
    backend: Backend,
    judge: AnswerJudge,
    base: RunSettings,
    positives: PositiveIndex,
    rows_path: Path,
    progress: Callable[[], None] = lambda: None,
) -> list[dict]:
    """Every question's row, resuming from rows_path (rows already there are kept, the rest appended as each is
    made, fan_out.calls_at_once questions at a time); in the items' order. progress() is called once per row."""
    judge_lock = threading.Lock()  # the judge reads one question's pages at a time, whoever asks

    def make(work: tuple[str, QAItem]) -> dict:
        dataset, item = work
        readings: dict = {}  # this question's page readings, shared by both rules
        judges = {
            "before": RuleJudge(judge, None, readings, judge_lock),
            "after": RuleJudge(judge, judge.support, readings, judge_lock),
        }
        return badge_row(
            item, dataset, index, backend=SharedReplies(backend), judges=judges, base=base, positives=positives
        )

    with RowsFile(rows_path, None, lambda row: row["id"]) as rows:  # the file is named after its settings
        return resumed(items, rows, lambda work: work[1].id, make, progress)


def _share(flags: Sequence[bool]) -> dict:
    return wilson(sum(flags), len(flags)).as_dict()


def score_rule(rows: Sequence[dict], rule: str) -> dict:
    """The per-question figures of one rule over rows (one dataset)."""
    ran = [r for r in rows if "failed" not in r[rule]]
    green = [r[rule]["right"] for r in ran if r[rule]["verdict"] == "answered"]
    amber = [r[rule]["right"] for r in ran if r[rule]["verdict"] == "weak"]
    retrievable = [r for r in ran if any(p["positive"] for p in r.get("pages", []))]
    return {
        "questions": len(ran),
        "answered_precision": _share(green),
        "weak_precision": _share(amber),
        "ended_with_answer": _share([r[rule]["answer"] is not None for r in ran]),
        "right_and_answered": _share([r[rule]["verdict"] == "answered" and r[rule]["right"] for r in ran]),
        "right_and_answered_of_retrievable": _share(
            [r[rule]["verdict"] == "answered" and r[rule]["right"] for r in retrievable]
        ),
        "unanswerable_with_answer": _share([r[rule]["answer"] is not None for r in ran if not r["anywhere"]]),
        "unanswerable_answered_green": _share([r[rule]["verdict"] == "answered" for r in ran if not r["anywhere"]]),
    }


def page_scores(rows: Sequence[dict]) -> dict:
    """The judge over every top-K page: AUC of answer-bearing vs answer-free pages by P (before) and by support,
    P where there is none (after); exact match of its extraction on answer-bearing pages."""
    pages = [p for r in rows for p in r.get("pages", [])]
    by_p = ([p["p"] for p in pages if not p["positive"]], [p["p"] for p in pages if p["positive"]])
    score = [p["support"] if p["support"] is not None else 0.0 for p in pages]
    by_support = (
        [s for s, p in zip(score, pages, strict=True) if not p["positive"]],
        [s for s, p in zip(score, pages, strict=True) if p["positive"]],
    )
    return {
        "pages": len(pages),
        "answer_bearing": len(by_p[1]),
        "auc_before": auc(*by_p) if pages else None,
        "auc_after": auc(*by_support) if pages else None,
        "judge_exact_match_on_answer_bearing": _share([p["exact"] for p in pages if p["positive"]]),
    }


def score(rows: Sequence[dict]) -> dict:
    """The record's results: per dataset, per rule, the per-question figures; and the page-level ones."""
    out = {}
    for dataset in sorted({r["dataset"] for r in rows}):
        subset = [r for r in rows if r["dataset"] == dataset]
        out[dataset] = {
            "per_question": {rule: score_rule(subset, rule) for rule in RULES},
            "pages": page_scores(subset),
            "model_calls": sum(r["model_calls"] for r in subset),
        }
    return out
