"""experiment when_to_retrieve's scores, from the When-to-retrieve evaluation's rows (when_to_retrieve.py): the
Adapt-LLM paper's policies (never, always, Adapt-LLM, popularity) by accuracy and exact match, its Table 3, a
cross-fitted threshold on P(<RET>) and paired differences. Left out: the pipeline's configurations
(when_to_retrieve_scores.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from lab.evaluation.when_to_retrieve import EVAL_POLICIES
from lab.stats import auc, best_accuracy, mean_interval, proportion

METRICS = ("accuracy", "exact_match")  # a gold answer contained, exact match


def _share(rows: Sequence[dict], get: Callable[[dict], bool]) -> dict:
    return proportion([bool(get(r)) for r in rows]).as_dict()


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


def _at_threshold(rows: Sequence[dict], t: float) -> tuple[list[bool], dict[str, list[bool]]]:
    """(retrieved, correct by metric) per row when Adapt-LLM retrieves exactly when P(<RET>) >= t."""
    went = [r["adapt"]["ret_probability"] >= t for r in rows]
    picked = [_both_ways(r)[go] for r, go in zip(rows, went, strict=True)]
    return went, {m: [bool(answer[m]) for answer in picked] for m in METRICS}


def _cuts(rows: Sequence[dict]) -> list[float]:
    return sorted({r["adapt"]["ret_probability"] for r in rows} | {0.0, 1.01}, reverse=True)


def threshold_curve(rows: Sequence[dict]) -> list[dict]:
    """Accuracy and retrieval rate for every threshold on P(<RET>): from never (t above all) to always (t=0)."""
    usable = [r for r in rows if _both_ways(r) is not None]
    n, points = len(usable) or 1, []
    for t in _cuts(usable):
        went, correct = _at_threshold(usable, t)
        points.append({"threshold": t, "retrieval_rate": sum(went) / n, **{m: sum(c) / n for m, c in correct.items()}})
    return points


def cross_fitted_threshold(rows: Sequence[dict], seed: int = 0) -> dict:
    """Adapt-LLM with a threshold on P(<RET>) instead of its greedy token, out of fold: the best threshold on one
    seeded half of the questions (ties: the one that retrieves least) decides the other half, and vice versa."""
    usable = [r for r in rows if _both_ways(r) is not None]
    order = random.Random(seed).sample(range(len(usable)), len(usable))
    folds = [[usable[i] for i in order[: len(order) // 2]], [usable[i] for i in order[len(order) // 2 :]]]
    retrieved, scores, thresholds = [], {m: [] for m in METRICS}, []
    for tune_on, apply_to in ((folds[0], folds[1]), (folds[1], folds[0])):
        correct_at = lambda t, on=tune_on: sum(_at_threshold(on, t)[1]["accuracy"])  # noqa: E731
        thresholds.append(best_accuracy(_cuts(tune_on), correct_at) if tune_on else 1.01)
        went, correct = _at_threshold(apply_to, thresholds[-1])
        retrieved += went
        for metric in METRICS:
            scores[metric] += correct[metric]
    return {
        "thresholds": thresholds,
        "retrieval_rate": proportion(retrieved).as_dict(),
        **{metric: proportion(flags).as_dict() for metric, flags in scores.items()},
    }


def _auc(rows: Sequence[dict]) -> float | None:
    known = [r["adapt"]["ret_probability"] for r in rows if r["never"]["accuracy"]]
    unknown = [r["adapt"]["ret_probability"] for r in rows if not r["never"]["accuracy"]]
    value = auc(known, unknown)
    return None if value != value else round(value, 4)  # NaN (one group empty) -> null


def summarise_policies(rows: Sequence[dict]) -> dict:
    """experiment when_to_retrieve's summary of one question set (with the popularity policy where the rows have it:
    PopQA test)."""
    if not rows:
        raise ValueError("No evaluated questions to summarise.")
    named = [p for p in (*EVAL_POLICIES, "popularity") if p in rows[0]]
    policies = {p: {m: _share(rows, lambda r, p=p, m=m: r[p][m]) for m in METRICS} for p in named}
    asked = [r["adapt"]["ret_probability"] for r in rows if r["adapt"]["asked_ret"]]
    direct = [r["adapt"]["ret_probability"] for r in rows if not r["adapt"]["asked_ret"]]
    fitted = cross_fitted_threshold(rows)
    policies["adapt_threshold"] = {m: fitted[m] for m in METRICS}
    summary = {
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
            f"adapt_minus_{b}": {m: _difference(rows, "adapt", b, m) for m in METRICS} for b in ("never", "always")
        },
        "table3": table3(rows),
    }
    if "popularity" in named:
        summary["popularity_retrieval_rate"] = _share(rows, lambda r: r["popularity"]["retrieved"])
    return summary


def _difference(rows: Sequence[dict], a: str, b: str, metric: str) -> dict:
    """a minus b on the same questions, with a paired bootstrap interval."""
    return mean_interval([float(r[a][metric]) - float(r[b][metric]) for r in rows]).as_dict()
