"""The When-to-retrieve pipeline's scores (experiment pipeline), from the evaluation's rows (when_to_retrieve.py).

Every configuration (closed-book at a signal's dev-chosen threshold, always retrieve, or
a policy deciding and a reader's windows ending it) by accuracy, coverage, selective accuracy and "I don't know" where
the corpus has no answer; thresholds by Youden's J on dev rows, never on test; risk-coverage curves and AUCs.
Left out: experiment when_to_retrieve's scores of the Adapt-LLM paper's policies (policy_scores.py), from the same rows.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from lab.evaluation.when_to_retrieve import READERS
from lab.stats import auc, proportion, youden
from raqa.when_to_retrieve.pipeline import POLICY_SIGNAL, decide_retrieval
from raqa.when_to_retrieve.uncertainty import SIGNALS

RESAMPLES = 1000
AUC_TARGET, IDK_TARGET = 0.70, 2 / 3


def confidence(row: dict, signal: str) -> float:
    value = row["closed_book"]["signals"][signal]
    return value if math.isfinite(value) else -1e9


def youden_threshold(rows: Sequence[dict], signal: str) -> float:
    """The confidence threshold (retrieve below it) that best separates wrong closed-book answers from right ones
    on these rows: max TPR - FPR, wrong = positive; with no right answer among them, retrieve always (inf)."""
    wrong = [confidence(r, signal) for r in rows if not r["closed_book"]["correct"]]
    right = [confidence(r, signal) for r in rows if r["closed_book"]["correct"]]
    if not right or not wrong:
        return math.inf if not right else -math.inf
    return youden(right, wrong, sorted({*wrong, *right}, reverse=True), lambda c, t: c < t, math.inf)


def policy_threshold(policy: str, confidence_threshold: float) -> float:
    """The threshold in the policy's own units: P(<RET>) for adapt (retrieve at or above), else the confidence."""
    if policy == "adapt":
        return (
            min(1.0, max(0.0, 1.0 - confidence_threshold))
            if math.isfinite(confidence_threshold)
            else (0.0 if confidence_threshold > 0 else 1.0)
        )
    return confidence_threshold


def outcome(row: dict, policy: str, threshold: float | None, reader: str | None) -> dict:
    """What one configuration does on one row: answered, correct, exact, retrieved."""
    if policy.startswith("closed_book:"):  # answer from memory only when sure enough, else "I don't know"
        sure = confidence(row, policy.split(":", 1)[1]) >= threshold
        return {k: v and sure if k != "retrieved" else v for k, v in _pick(row, False, None).items()}
    signals = {s: confidence(row, s) for s in SIGNALS}
    return _pick(row, decide_retrieval(policy, signals, _finite(policy, threshold)).retrieve, reader)


def _pick(row: dict, retrieve: bool, reader: str) -> dict:
    """The reader's ending when the decision is to retrieve, else the closed-book answer."""
    source = row["readers"][reader] if retrieve else row["closed_book"]
    answered = bool(source["answer"])
    return {
        "answered": answered,
        "correct": answered and source["correct"],
        "exact": answered and source["exact"],
        "retrieved": retrieve,
    }


def _finite(policy: str, threshold: float | None) -> float | None:
    if threshold is None or math.isfinite(threshold):
        return threshold
    if policy == "adapt":
        return 0.0 if threshold < 0 else 1.0
    return 1e18 if threshold > 0 else -1e18


def scores(rows: Sequence[dict], outcomes: Sequence[dict]) -> dict:
    answered = [o for o in outcomes if o["answered"]]
    lost = [o for r, o in zip(rows, outcomes, strict=True) if not r["answerable"]]
    return {
        "accuracy": proportion([o["correct"] for o in outcomes]).as_dict(),
        "exact_match": proportion([o["exact"] for o in outcomes]).as_dict(),
        "coverage": proportion([o["answered"] for o in outcomes]).as_dict(),
        "selective_accuracy": proportion([o["correct"] for o in answered]).as_dict(),
        "retrieval_rate": proportion([o["retrieved"] for o in outcomes]).as_dict(),
        "idk_unanswerable": proportion([not o["answered"] for o in lost]).as_dict(),
    }


def configurations(thresholds: dict[str, float]) -> dict[str, tuple[str, float | None, str | None]]:
    """name -> (policy, threshold in the policy's units, reader) for every configuration scored."""
    configs: dict[str, tuple[str, float | None, str | None]] = {"never": ("never", None, None)}
    for signal in SIGNALS:
        configs[f"closed_book:{signal}"] = (f"closed_book:{signal}", thresholds[signal], None)
    for reader in READERS:
        configs[f"always:{reader}"] = ("always", None, reader)
        for policy, signal in POLICY_SIGNAL.items():
            configs[f"pipeline:{policy}:{reader}"] = (policy, policy_threshold(policy, thresholds[signal]), reader)
    return configs


def signal_auc(rows: Sequence[dict], signal: str, seed: int = 0) -> dict:
    """AUC of the signal's uncertainty (minus its confidence) against "the closed-book answer is wrong", with a
    95% percentile-bootstrap interval over questions."""

    def value(sample: Sequence[dict]) -> float:
        right = [-confidence(r, signal) for r in sample if r["closed_book"]["correct"]]
        wrong = [-confidence(r, signal) for r in sample if not r["closed_book"]["correct"]]
        return auc(right, wrong)

    point = value(rows)
    rng = random.Random(seed)
    boots = sorted(v for v in (value(rng.choices(rows, k=len(rows))) for _ in range(RESAMPLES)) if v == v)
    low, high = (boots[int(0.025 * len(boots))], boots[int(0.975 * len(boots)) - 1]) if boots else (None, None)
    return {
        "value": None if point != point else round(point, 4),
        "low": low,
        "high": high,
        "n": len(rows),
        "wrong": sum(not r["closed_book"]["correct"] for r in rows),
    }


def closed_book_curve(rows: Sequence[dict], signal: str) -> dict:
    """Answer the most confident first: risk (wrong among answered) at every coverage, and its mean (AURC)."""
    ranked = sorted(rows, key=lambda r: -confidence(r, signal))
    points, wrong = [], 0
    for i, row in enumerate(ranked, 1):
        wrong += not row["closed_book"]["correct"]
        points.append((i / len(ranked), wrong / i))
    return {
        "coverage": [round(c, 4) for c, _ in points],
        "risk": [round(r, 4) for _, r in points],
        "aurc": round(sum(r for _, r in points) / len(points), 4) if points else None,
    }


def pipeline_curve(rows: Sequence[dict], policy: str, reader: str) -> dict:
    """Sweep the policy's threshold from never to always retrieving: (coverage, risk) at each, and the area."""
    signal = POLICY_SIGNAL[policy]
    cuts = sorted({confidence(r, signal) for r in rows}) + [math.inf]
    points = []
    for t in [-math.inf, *cuts]:  # retrieve when the confidence is below t
        got = [_pick(r, confidence(r, signal) < t, reader) for r in rows]
        answered = [o for o in got if o["answered"]]
        if answered:
            points.append((len(answered) / len(rows), 1 - sum(o["correct"] for o in answered) / len(answered)))
    points.sort()
    if len(points) < 2:
        return {"coverage": [p[0] for p in points], "risk": [p[1] for p in points], "aurc": None}
    area = sum((c2 - c1) * (r1 + r2) / 2 for (c1, r1), (c2, r2) in zip(points, points[1:], strict=False))
    span = points[-1][0] - points[0][0]
    return {
        "coverage": [round(c, 4) for c, _ in points],
        "risk": [round(r, 4) for _, r in points],
        "aurc": round(area / span, 4) if span > 0 else round(points[0][1], 4),
    }


def _selective_difference(rows, a: tuple, b: tuple, seed: int = 0) -> dict:
    """Selective accuracy of configuration a minus b on the same questions, 95% paired-bootstrap interval."""

    def sel(sample, config) -> float:
        got = [outcome(r, *config) for r in sample]
        answered = [o for o in got if o["answered"]]
        return sum(o["correct"] for o in answered) / len(answered) if answered else float("nan")

    point = sel(rows, a) - sel(rows, b)
    rng = random.Random(seed)
    boots = []
    for _ in range(RESAMPLES // 4):  # a quarter: each resample scores two configurations on every row
        sample = rng.choices(rows, k=len(rows))
        d = sel(sample, a) - sel(sample, b)
        if d == d:
            boots.append(d)
    boots.sort()
    low, high = (boots[int(0.025 * len(boots))], boots[int(0.975 * len(boots)) - 1]) if boots else (None, None)
    return {"value": point if point == point else None, "low": low, "high": high, "resamples": len(boots)}


def targets(rows: Sequence[dict], table: dict, configs: dict, aucs: dict) -> dict:
    """The issue's targets on one test set: the best full pipeline against always-retrieve with the base reader."""
    baseline = table["always:base"]
    base_cov = baseline["coverage"]["value"]
    pipelines = {n: t for n, t in table.items() if n.startswith("pipeline:")}
    eligible = {n: t for n, t in pipelines.items() if t["coverage"]["value"] >= base_cov}
    pool = eligible or pipelines
    best = max(pool, key=lambda n: pool[n]["selective_accuracy"]["value"] or 0.0)
    difference = _selective_difference(rows, configs[best], configs["always:base"])
    best_auc = max((a["value"] or 0.0 for a in aucs.values()), default=0.0)
    # the judge's pipelines can say "I don't know"; at the base reader's full coverage nothing can
    abstaining = {n: t for n, t in pipelines.items() if n.endswith(":base+judge")}
    best_abstaining = max(abstaining, key=lambda n: abstaining[n]["selective_accuracy"]["value"] or 0.0)
    covering = {n: t for n, t in table.items() if t["coverage"]["value"] >= base_cov}
    best_overall = max(covering, key=lambda n: covering[n]["selective_accuracy"]["value"] or 0.0)
    return {
        "best_configuration_at_always_base_coverage": best_overall,
        "best_pipeline": best,
        "best_pipeline_has_coverage_of_always_base": best in eligible,
        "selective_accuracy_minus_always_base": difference,
        "selective_accuracy_separated": bool(difference["low"] is not None and difference["low"] > 0),
        "best_pipeline_idk_unanswerable": pool[best]["idk_unanswerable"],
        "idk_target_met": (pool[best]["idk_unanswerable"]["value"] or 0.0) >= IDK_TARGET,
        "best_abstaining_pipeline": best_abstaining,
        "best_abstaining_minus_always_base": _selective_difference(
            rows, configs[best_abstaining], configs["always:base"]
        ),
        "best_signal_auc": best_auc,
        "auc_target_met": best_auc >= AUC_TARGET,
    }


def summarise_scores(dev_rows: Sequence[dict], test_rows: Sequence[dict]) -> dict:
    """Per test set: thresholds (from its dev rows), the table of every configuration, AUCs, curves, targets."""
    out: dict = {"datasets": {}, "rows": {"dev": list(dev_rows), "test": list(test_rows)}}
    for dataset in sorted({r["dataset"] for r in test_rows}):
        test = [r for r in test_rows if r["dataset"] == dataset]
        dev = [r for r in dev_rows if r["dataset"] == dataset]
        thresholds = {s: youden_threshold(dev, s) for s in SIGNALS}
        configs = configurations(thresholds)
        table = {name: scores(test, [outcome(r, *c) for r in test]) for name, c in configs.items()}
        aucs = {s: signal_auc(test, s) for s in SIGNALS}
        out["datasets"][dataset] = {
            "n": len(test),
            "answerable": sum(r["answerable"] for r in test),
            "dev_n": len(dev),
            "closed_book_correct": proportion([r["closed_book"]["correct"] for r in test]).as_dict(),
            "thresholds": {s: (t if math.isfinite(t) else str(t)) for s, t in thresholds.items()},
            "configurations": {
                n: {"policy": c[0], "threshold": _json_number(c[1]), "reader": c[2]} for n, c in configs.items()
            },
            "table": table,
            "auc": aucs,
            "curves": {
                "closed_book": {s: closed_book_curve(test, s) for s in SIGNALS},
                "pipeline": {
                    f"{p}:{reader}": pipeline_curve(test, p, reader) for p in POLICY_SIGNAL for reader in READERS
                },
            },
            "targets": targets(test, table, configs, aucs),
        }
    return out


def _json_number(value):
    return value if value is None or math.isfinite(value) else str(value)
