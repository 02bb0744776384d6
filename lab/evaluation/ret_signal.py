"""`python -m lab experiment ret_signal`: is one Adapt-LLM adapter's P(<RET>) more informative than another's?

Both adapters are asked for P(the reply starts with <RET>) on the same questions (the parametric prompt the
pipeline's adapt policy reads), as named adapters on one copy of the base weights:

    test      the pipeline record's test questions: AUC of P(<RET>) against "the closed-book answer is wrong"
              (the decision's own job), per test set, with 95% bootstrap intervals and a paired interval on
              the difference (the same resampled questions score both adapters)
    dev       the record's dev questions (where the pipeline's thresholds are chosen)
    training  the questions Algorithm 1 labelled (training_data.jsonl): AUC against "not known zero-shot",
              in sample, to tell "learned nothing" from "learned the training questions only"

and how spread out P(<RET>) is (a threshold can only separate questions whose probabilities differ).
"More informative" = a higher test AUC on every test set. Both adapters' test values are also compared with the
ones the record holds: one of them must reproduce them (the baseline's before `--update-record`, the candidate's
after). `rescored_rows` gives the record's rows with the candidate's P(<RET>) in place of the baseline's.
Left out here: training (training/when_to_retrieve.py) and scoring the pipeline (when_to_retrieve_scores.py).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence

from lab.evaluation.when_to_retrieve_scores import RESAMPLES
from lab.stats import auc
from raqa.when_to_retrieve.prompts import parametric_messages

ADAPTER_NAMES = ("baseline", "candidate")


def ret_probabilities(model, questions: Sequence[str], adapter: str, progress: Callable[[], None]) -> list[float]:
    """P(<RET>) of the named adapter for each question (the pipeline's adapt policy reads exactly this)."""

    out = []
    for question in questions:
        out.append(round(model.ret_probability(parametric_messages(question), adapter), 6))
        progress()
    return out


def _auc(p_ret: Sequence[float], needs_retrieval: Sequence[bool]) -> float:
    """P(<RET>) against "needs retrieval" (the closed-book answer is wrong, or the question was not known)."""
    return auc(
        [p for p, n in zip(p_ret, needs_retrieval, strict=True) if not n],
        [p for p, n in zip(p_ret, needs_retrieval, strict=True) if n],
    )


def _interval(values: list[float]) -> tuple[float | None, float | None]:
    values = sorted(v for v in values if v == v)
    if not values:
        return None, None
    return round(values[int(0.025 * len(values))], 4), round(values[int(0.975 * len(values)) - 1], 4)


def paired_auc(baseline: Sequence[float], candidate: Sequence[float], needs: Sequence[bool], seed: int = 0) -> dict:
    """Both AUCs with 95% percentile-bootstrap intervals, and candidate minus baseline on the same resamples.

    Example:
        >>> r = paired_auc([0.5, 0.5, 0.5, 0.5], [0.1, 0.2, 0.8, 0.9], [False, False, True, True])
        >>> r["baseline"]["value"], r["candidate"]["value"], r["difference"]["value"]
        (0.5, 1.0, 0.5)
    """
    rng = random.Random(seed)
    index = range(len(needs))
    boots: dict[str, list[float]] = {"baseline": [], "candidate": [], "difference": []}
    for _ in range(RESAMPLES):
        sample = rng.choices(index, k=len(needs))
        flags = [needs[i] for i in sample]
        a, b = _auc([baseline[i] for i in sample], flags), _auc([candidate[i] for i in sample], flags)
        boots["baseline"].append(a)
        boots["candidate"].append(b)
        boots["difference"].append(b - a)
    a, b = _auc(baseline, needs), _auc(candidate, needs)
    points = {"baseline": a, "candidate": b, "difference": b - a}
    out = {}
    for name, point in points.items():
        low, high = _interval(boots[name])
        out[name] = {"value": None if point != point else round(point, 4), "low": low, "high": high}
    out["n"], out["needs_retrieval"] = len(needs), sum(needs)
    return out


def spread(p_ret: Sequence[float]) -> dict:
    """How P(<RET>) is spread over questions: quantiles and the share the default 0.5 threshold sends to pages.

    Example:
        >>> spread([0.2, 0.6, 0.9])["at_or_above_half"]
        0.6667
    """
    ordered = sorted(p_ret)
    quartiles = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else [ordered[0]] * 3
    return {
        "min": round(ordered[0], 4),
        "q1": round(quartiles[0], 4),
        "median": round(quartiles[1], 4),
        "q3": round(quartiles[2], 4),
        "max": round(ordered[-1], 4),
        "stdev": round(statistics.pstdev(ordered), 4),
        "at_or_above_half": round(sum(p >= 0.5 for p in ordered) / len(ordered), 4),
    }


def compare(groups: dict[str, dict], recorded: dict[str, list[float]]) -> dict:
    """groups: name -> {"needs": [bool], "baseline": [P], "candidate": [P]}; recorded: test set -> the record's
    P(<RET>) for its questions (1 - not_ret), in the same order as groups[f"test:{set}"]."""
    out: dict = {"groups": {}}
    for name, g in groups.items():
        out["groups"][name] = {
            "auc": paired_auc(g["baseline"], g["candidate"], g["needs"]),
            "spread": {adapter: spread(g[adapter]) for adapter in ADAPTER_NAMES},
        }
    tests = [n for n in groups if n.startswith("test:")]
    out["candidate_higher_on_every_test_set"] = bool(tests) and all(
        (out["groups"][n]["auc"]["difference"]["value"] or 0.0) > 0 for n in tests
    )
    out["record_matches"] = {
        adapter: {
            name: round(max(abs(a - b) for a, b in zip(groups[f"test:{name}"][adapter], values, strict=True)), 6)
            for name, values in recorded.items()
        }
        for adapter in ADAPTER_NAMES
    }  # largest |measured - recorded| P(<RET>) per adapter and test set: ~0 for the one that made the record
    return out


def rescored_rows(rows: Sequence[dict], p_ret: dict[tuple[str, str, str], float]) -> list[dict]:
    """The record's rows with not_ret = 1 - the candidate's P(<RET>), keyed by (dataset, split, id)."""
    out = []
    for row in rows:
        value = 1.0 - p_ret[(row["dataset"], row["split"], row["id"])]
        signals = {**row["closed_book"]["signals"], "not_ret": value}
        out.append({**row, "closed_book": {**row["closed_book"], "signals": signals}})
    return out
