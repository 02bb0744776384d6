"""`python -m raqa eval-adapt`: NR-LLM, AR-LLM and Adapt-LLM (and the popularity baseline) on held-out questions.

Each question goes through router.decide for every policy, the same event stream the page shows, and is
scored two ways, both labelled: exact match (normalised reply == a normalised gold answer) and the paper's
"accuracy" (a normalised gold answer is contained in the normalised reply). For the paper's Table 3 the
Adapt-LLM adapter also answers each question the other way: without context when it asked for <RET>
(the closed-book prompt, <RET> forbidden), with the top page when it answered from memory. Shares carry 95% Wilson intervals;
differences between policies on the same questions carry 95% paired-bootstrap intervals.

Left out here: training (training/when_to_retrieve.py) and figures (web/figures_when_to_retrieve.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from raqa.evaluation.metrics import answer_contained, exact_match
from raqa.evaluation.questions import QAItem
from raqa.evaluation.rows_file import RowsFile, resumed
from raqa.stats import best_accuracy, mean_interval, proportion
from raqa.when_to_retrieve.policies import (
    Answer,
    Decision,
    PageRead,
    PolicyFailed,
    Popularity,
    closed_book_messages,
    context_messages,
    decide,
)
from raqa.when_to_retrieve.popularity import PopItem, tune_threshold

EVAL_POLICIES = ("never", "always", "adapt")


def _answer_record(events) -> dict:
    answer = next((e for e in events if isinstance(e, Answer)), None)
    page = next((e for e in events if isinstance(e, PageRead)), None)
    failed = next((e for e in events if isinstance(e, PolicyFailed)), None)
    return {
        "answer": answer.text if answer else None,
        "with_context": bool(answer and answer.with_context),
        "page": page.hit.page.title if page and page.hit else None,
        "failed": failed.message if failed else None,
    }


def _scores(text: str | None, golds: Sequence[str]) -> dict:
    return {"exact_match": exact_match(text, golds), "accuracy": answer_contained(text, golds)}


def evaluate_question(item: QAItem, model, search: Callable) -> dict:
    """Every policy's events for one question, scored, plus Adapt-LLM's counterfactual answer for Table 3."""
    row: dict = {"id": item.id, "question": item.question, "answers": list(item.answers)}
    contexts: dict[str, str] = {}
    for policy in EVAL_POLICIES:
        events = list(decide(item.question, policy, model, search))
        record = _answer_record(events)
        record.update(_scores(record["answer"], item.answers))
        decision = next(e for e in events if isinstance(e, Decision))
        page = next((e for e in events if isinstance(e, PageRead)), None)
        if page is not None:
            contexts[policy] = page.context
            record["page_has_answer"] = answer_contained(page.context, item.answers)
        if policy == "adapt":
            record["asked_ret"] = bool(decision.retrieve)
            record["ret_probability"] = decision.ret_probability
            record["first_reply"] = decision.first_reply
        row[policy] = record
    adapt = row["adapt"]
    if adapt["asked_ret"]:
        # subtle: under the parametric prompt with <RET> forbidden, the trained adapter writes near-spellings
        # ("<RET >", "<RETURN>", measured on all 600 test questions), so its memory is asked closed-book
        closed = model.generate(closed_book_messages(item.question), "adapt", ban_ret=True)
        row["adapt_other"] = {"answer": closed, "with_context": False, **_scores(closed, item.answers)}
    elif "always" in contexts:
        with_page = model.generate(context_messages(item.question, contexts["always"]), "adapt")
        row["adapt_other"] = {"answer": with_page, "with_context": True, **_scores(with_page, item.answers)}
    else:
        row["adapt_other"] = None
    return row


def _share(rows: Sequence[dict], get: Callable[[dict], bool]) -> dict:
    return proportion([bool(get(r)) for r in rows]).as_dict()


def _difference(rows: Sequence[dict], a: str, b: str, metric: str) -> dict:
    """a minus b on the same questions, with a paired bootstrap interval."""
    return mean_interval([float(r[a][metric]) - float(r[b][metric]) for r in rows]).as_dict()


def table3(rows: Sequence[dict]) -> dict:
    """The paper's Table 3: Adapt-LLM's accuracy with and without context, split by its <RET> decision."""
    out = {}
    for name, asked in (("asked_ret", True), ("answered_directly", False)):
        group = [r for r in rows if r["adapt"]["asked_ret"] == asked and r["adapt_other"] is not None]
        with_ctx = [r["adapt"] if asked else r["adapt_other"] for r in group]
        without = [r["adapt_other"] if asked else r["adapt"] for r in group]
        out[name] = {
            "n": len(group),
            "share_of_questions": _share(rows, lambda r, asked=asked: r["adapt"]["asked_ret"] == asked),
            "with_context": {m: proportion([x[m] for x in with_ctx]).as_dict() for m in ("accuracy", "exact_match")},
            "without_context": {m: proportion([x[m] for x in without]).as_dict() for m in ("accuracy", "exact_match")},
        }
    return out


def _both_ways(row: dict) -> tuple[dict, dict] | None:
    """Adapt-LLM's (closed-book, with-page) answers for a row: both are computed for every question."""
    other = row["adapt_other"]
    if other is None:
        return None
    return (other, row["adapt"]) if row["adapt"]["asked_ret"] else (row["adapt"], other)


def _threshold_outcome(rows: Sequence[dict], t: float, metric: str) -> tuple[list[bool], list[bool]]:
    """(retrieved, correct) per row when Adapt-LLM retrieves exactly when P(<RET>) >= t."""
    retrieved, correct = [], []
    for row in rows:
        closed, with_page = _both_ways(row)
        go = row["adapt"]["ret_probability"] >= t
        retrieved.append(go)
        correct.append(bool((with_page if go else closed)[metric]))
    return retrieved, correct


def threshold_curve(rows: Sequence[dict]) -> list[dict]:
    """Accuracy and retrieval rate for every threshold on P(<RET>): from never (t above all) to always (t=0)."""
    usable = [r for r in rows if _both_ways(r) is not None]
    points = []
    for t in sorted({r["adapt"]["ret_probability"] for r in usable} | {0.0, 1.01}, reverse=True):
        retrieved, correct = _threshold_outcome(usable, t, "accuracy")
        _, exact = _threshold_outcome(usable, t, "exact_match")
        n = len(usable) or 1
        points.append(
            {
                "threshold": t,
                "retrieval_rate": sum(retrieved) / n,
                "accuracy": sum(correct) / n,
                "exact_match": sum(exact) / n,
            }
        )
    return points


def _tune(rows: Sequence[dict]) -> float:
    """The threshold with the best accuracy on these rows (ties: the one that retrieves least)."""
    candidates = sorted({r["adapt"]["ret_probability"] for r in rows} | {0.0, 1.01}, reverse=True)
    return best_accuracy(candidates, lambda t: sum(_threshold_outcome(rows, t, "accuracy")[1]))


def cross_fitted_threshold(rows: Sequence[dict], seed: int = 0) -> dict:
    """Adapt-LLM with a threshold on P(<RET>) instead of its greedy token, scored out of fold.

    The questions are split in two halves (seeded); the threshold tuned on one half decides the other, so
    no question is scored with a threshold chosen on itself.
    """
    usable = [r for r in rows if _both_ways(r) is not None]
    order = random.Random(seed).sample(range(len(usable)), len(usable))
    folds = [[usable[i] for i in order[: len(order) // 2]], [usable[i] for i in order[len(order) // 2 :]]]
    retrieved, scores, thresholds = [], {"accuracy": [], "exact_match": []}, []
    for tune_on, apply_to in ((folds[0], folds[1]), (folds[1], folds[0])):
        t = _tune(tune_on) if tune_on else 1.01
        thresholds.append(t)
        for metric in scores:
            went, correct = _threshold_outcome(apply_to, t, metric)
            scores[metric] += correct
        retrieved += went
    return {
        "thresholds": thresholds,
        "retrieval_rate": proportion(retrieved).as_dict(),
        **{metric: proportion(flags).as_dict() for metric, flags in scores.items()},
    }


def _auc(rows: Sequence[dict]) -> float | None:
    from raqa.stats import auc

    known = [r["adapt"]["ret_probability"] for r in rows if r["never"]["accuracy"]]
    unknown = [r["adapt"]["ret_probability"] for r in rows if not r["never"]["accuracy"]]
    value = auc(known, unknown)
    return None if value != value else round(value, 4)  # NaN (one group empty) -> null


def summarise(rows: Sequence[dict]) -> dict:
    if not rows:
        raise ValueError("No evaluated questions to summarise.")
    policies = {
        p: {m: _share(rows, lambda r, p=p, m=m: r[p][m]) for m in ("accuracy", "exact_match")} for p in EVAL_POLICIES
    }
    asked = [r["adapt"]["ret_probability"] for r in rows if r["adapt"]["asked_ret"]]
    direct = [r["adapt"]["ret_probability"] for r in rows if not r["adapt"]["asked_ret"]]
    fitted = cross_fitted_threshold(rows)
    policies["adapt_threshold"] = {m: fitted[m] for m in ("accuracy", "exact_match")}
    return {
        "n": len(rows),
        "policies": policies,
        "adapt_threshold": fitted,
        "threshold_curve": threshold_curve(rows),
        "ret_rate": _share(rows, lambda r: r["adapt"]["asked_ret"]),
        "mean_ret_probability": {
            "asked_ret": sum(asked) / len(asked) if asked else None,
            "answered_directly": sum(direct) / len(direct) if direct else None,
        },
        # does P(<RET>) rank the questions NR-LLM gets wrong (retrieval needed) above those it gets right?
        "ret_probability_auc": _auc(rows),
        "top_page_has_answer": _share(rows, lambda r: r["always"].get("page_has_answer")),
        "nr_knows": _share(rows, lambda r: r["never"]["accuracy"]),
        "differences": {
            f"adapt_minus_{b}": {m: _difference(rows, "adapt", b, m) for m in ("accuracy", "exact_match")}
            for b in ("never", "always")
        },
        "table3": table3(rows),
    }


def adapt_rows(path: Path | None, settings_key: str) -> RowsFile:
    """eval-adapt's resumable rows (None: in memory), by (group, question id); group: the dataset, popqa-dev/-test."""
    return RowsFile(path, settings_key, lambda row: (row["group"], row["id"]))


def evaluate(items: Iterable[QAItem], model, search: Callable, progress: Callable[[], None] = lambda: None,
             rows: RowsFile | None = None, group: str = "") -> list[dict]:  # fmt: skip
    """Each question's row (evaluate_question), from rows where it is there, else made (fan_out.calls_at_once
    questions at a time) and added to them; in the items' order. progress() is called once per row."""

    def make(item: QAItem) -> dict:
        return {"group": group, **evaluate_question(item, model, search)}

    rows = rows if rows is not None else adapt_rows(None, "")
    return resumed(items, rows, lambda item: (group, item.id), make, progress)


def popularity_baseline(
    items: Sequence[PopItem], model, search: Callable, seed: int = 0, progress=lambda: None, rows=None
) -> dict:
    """Tune the popularity threshold on half the PopQA questions (seeded), score all four policies on the rest."""
    if len(items) < 4:
        raise ValueError(f"The popularity baseline needs at least 4 PopQA questions, got {len(items)}.")
    shuffled = random.Random(seed).sample(list(items), len(items))
    dev, test = shuffled[: len(shuffled) // 2], shuffled[len(shuffled) // 2 :]
    qa = {it.id: QAItem(it.id, it.question, it.answers) for it in shuffled}
    dev_rows = evaluate([qa[it.id] for it in dev], model, search, progress, rows, "popqa-dev")
    tuned = tune_threshold(
        [it.popularity for it in dev],
        [r["never"]["accuracy"] for r in dev_rows],
        [r["always"]["accuracy"] for r in dev_rows],
    )
    test_rows = evaluate([qa[it.id] for it in test], model, search, progress, rows, "popqa-test")
    for it, row in zip(test, test_rows, strict=True):
        events = list(
            decide(it.question, "popularity", _Reuse(row), search, Popularity(it.popularity, tuned.threshold))
        )
        record = _answer_record(events)
        record.update(_scores(record["answer"], it.answers))
        record["retrieved"] = it.popularity < tuned.threshold
        row["popularity"] = record
    summary = summarise(test_rows)
    summary["policies"]["popularity"] = {
        m: _share(test_rows, lambda r, m=m: r["popularity"][m]) for m in ("accuracy", "exact_match")
    }
    summary["popularity_retrieval_rate"] = _share(test_rows, lambda r: r["popularity"]["retrieved"])
    return {"threshold": tuned._asdict(), "dev_n": len(dev), "summary": summary, "rows": test_rows}


class _Reuse:
    """A stand-in model for the popularity policy: it returns the NR and AR answers already computed for a row,
    so the baseline costs no model calls and picks exactly between the answers the table reports."""

    name = "reuse"

    def __init__(self, row: dict):
        self._row = row

    def generate(self, messages, adapter: str, ban_ret: bool = False) -> str:
        if messages == closed_book_messages(self._row["question"]):
            return self._row["never"]["answer"] or ""
        return self._row["always"]["answer"] or ""

    def ret_probability(self, messages, adapter: str) -> float:
        raise AssertionError("The popularity policy never asks for P(<RET>).")

    def count_tokens(self, text: str) -> int:
        return len(text.split())
