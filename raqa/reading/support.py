"""One support probability per answer: how likely the judge's answer on a page is right, and the badge it earns.

The answer judge (judge.py) gives each page a P(the page states the answer) that ranks pages well but is no
frequency: on fresh questions a page it reads at P = 0.83 can still hold the wrong name ("Atlantic Ocean" from
"...the second largest of the world's five oceans"). Here a small logistic regression combines what is known
about one page's extraction among the run's top pages into one probability that the extraction answers the
question right (`support`):

    logit_p        the judge's own P(answer) on the page, as a logit
    agreement      how much the other top pages' readings agree with it (their P summed where answers agree)
    mentions       how many other top pages name the extracted answer anywhere in their text
    log_rank       the page's BM25 rank, and score_ratio its score over the top page's
    lead           its P over the best P of the other pages (is it the page the judge prefers?)
    overlap        words its sentence shares with the question
    type_match     a year or number for "when"/"how many" questions (+1), none (-1), other questions (0)
    title_answer   the extraction is the page's own title (the page names its subject, not an answer)
    answer_words   the extraction's length in words

The weights, the thresholds and their measured precision live in `support.json` beside the judge, fitted by
`python -m lab train support` on the judge's held-out dev questions (training/support_fit.py). The badge:
**Answered** at or above `answered` (chosen for a measured precision of at least 90% per question; None when no
threshold reached it), **Weak support** from `weak` up, **Unsupported** below.
Cross-page features count only the pages ranked 1 to CONTEXT_RANKS, so K changes what is read, not the scale.
Left out here: reading pages (judge.py), the fit (training/support_fit.py) and the model's own answer
(agreement.py decides whether it matches the judge's).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from raqa.retrieval.index import Hit
from raqa.text import agrees, normalize_answer, normalize_for_matching, restates_question

SUPPORT_FILE = "support.json"  # a SupportModel beside the answer judge, written by train support
CONTEXT_RANKS = 15  # cross-page features count the pages ranked 1..15 (BM25's top 15, as fitted)
FEATURES = (
    "logit_p",
    "agreement",
    "mentions",
    "log_rank",
    "score_ratio",
    "lead",
    "overlap",
    "type_match",
    "title_answer",
    "answer_words",
)
Level = Literal["answered", "weak", "unsupported"]
_NUMBER_QUESTION = re.compile(r"\b(when|what year|which year|what date|how many|how much|how old|how long)\b")


class SupportError(ValueError):
    """support.json is missing a field or holds a wrong one; the message names the file and the field."""


def logit(p: float) -> float:
    """log(p / (1 - p)), p kept within [1e-6, 1 - 1e-6] so 0 and 1 stay finite."""
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def type_match(question: str, answer: str) -> float:
    """+1 when a "when"/"how many" question gets an answer with a digit, -1 when it gets none, 0 otherwise.

    Example:
        >>> type_match("When did the Titanic sink?", "1912"), type_match("How many moons?", "Phobos")
        (1.0, -1.0)
    """
    if not _NUMBER_QUESTION.search(question.lower()):
        return 0.0
    return 1.0 if any(ch.isdigit() for ch in answer) else -1.0


def page_features(
    question: str,
    hits: Sequence[Hit],
    p: Sequence[float],
    answers: Sequence[str | None],
    sentences: Sequence[str | None],
) -> list[dict[str, float] | None]:
    """Per page: the FEATURES of its extraction among the hits (same order), or None where there is no answer
    to judge (no span, or one made only of the question's words)."""
    context = [i for i, h in enumerate(hits) if h.rank <= CONTEXT_RANKS] or list(range(len(hits)))
    texts = {i: f" {normalize_for_matching(hits[i].page.title + ' ' + hits[i].page.text)} " for i in context}
    top_score = max((h.score for h in hits), default=1.0) or 1.0
    question_words = set(normalize_answer(question).split())
    out: list[dict[str, float] | None] = []
    for i, (hit, answer) in enumerate(zip(hits, answers, strict=True)):
        if not answer or restates_question(answer, question):
            out.append(None)
            continue
        others = [j for j in context if j != i]
        needle = normalize_for_matching(answer)
        out.append(
            {
                "logit_p": logit(p[i]),
                "agreement": math.log1p(sum(p[j] for j in others if answers[j] and agrees(answer, answers[j]))),
                "mentions": math.log1p(sum(1 for j in others if needle and f" {needle} " in texts[j])),
                "log_rank": math.log(max(hit.rank, 1)),
                "score_ratio": hit.score / top_score,
                "lead": p[i] - max((p[j] for j in others), default=0.0),
                "overlap": float(min(5, len(set(normalize_answer(sentences[i] or "").split()) & question_words))),
                "type_match": type_match(question, answer),
                "title_answer": float(normalize_answer(answer) == normalize_answer(hit.page.title)),
                "answer_words": float(min(10, len(normalize_answer(answer).split()))),
            }
        )
    return out


@dataclass(frozen=True)
class SupportModel:
    """Logistic regression on standardised FEATURES, with the badge's two thresholds and what they measured."""

    weights: tuple[float, ...]  # one per FEATURES name, on standardised values
    bias: float
    mean: tuple[float, ...]  # standardisation fitted with the weights
    scale: tuple[float, ...]
    weak: float  # support from here up: Weak support (the page may support it; the judge is unsure)
    answered: float | None  # support from here up: Answered; None: no threshold reached the precision asked
    card: dict  # the rest of support.json (data, measured precision, command), for the card and the page

    def probability(self, features: dict[str, float]) -> float:
        z = self.bias + sum(
            w * (features[name] - m) / s
            for name, w, m, s in zip(FEATURES, self.weights, self.mean, self.scale, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))

    def level(self, support: float) -> Level:
        """The badge an answer with this support earns.

        Example:
            >>> model = SupportModel((0.0,) * 10, 0.0, (0.0,) * 10, (1.0,) * 10, 0.2, 0.8, {})
            >>> model.level(0.9), model.level(0.5), model.level(0.1)
            ('answered', 'weak', 'unsupported')
        """
        if self.answered is not None and support >= self.answered:
            return "answered"
        return "weak" if support >= self.weak else "unsupported"

    def to_dict(self) -> dict:
        return {
            **self.card,
            "features": list(FEATURES),
            "weights": list(self.weights),
            "bias": self.bias,
            "mean": list(self.mean),
            "scale": list(self.scale),
            "weak": self.weak,
            "answered": self.answered,
        }

    @classmethod
    def from_dict(cls, data: object, source: str = "support.json") -> SupportModel:
        """The model a support.json holds; SupportError naming the field when it is malformed."""
        if not isinstance(data, dict):
            raise SupportError(f"{source}: expected a JSON object.")
        if data.get("features") != list(FEATURES):
            raise SupportError(f"{source}: 'features' must be {list(FEATURES)}, got {data.get('features')!r}.")
        vectors = {}
        for key in ("weights", "mean", "scale"):
            value = data.get(key)
            if not isinstance(value, list) or len(value) != len(FEATURES) or not all(_finite(v) for v in value):
                raise SupportError(f"{source}: {key!r} must be {len(FEATURES)} finite numbers.")
            vectors[key] = tuple(float(v) for v in value)
        if any(s <= 0 for s in vectors["scale"]):
            raise SupportError(f"{source}: every 'scale' must be above 0.")
        for key in ("bias", "weak"):
            if not _finite(data.get(key)):
                raise SupportError(f"{source}: {key!r} must be a number, got {data.get(key)!r}.")
        answered = data.get("answered")
        if answered is not None and not _finite(answered):
            raise SupportError(f"{source}: 'answered' must be a number or null, got {answered!r}.")
        known = {"features", "weights", "mean", "scale", "bias", "weak", "answered"}
        return cls(
            vectors["weights"],
            float(data["bias"]),
            vectors["mean"],
            scale=vectors["scale"],
            weak=float(data["weak"]),
            answered=None if answered is None else float(answered),
            card={k: v for k, v in data.items() if k not in known},
        )

    @classmethod
    def load(cls, path: Path) -> SupportModel:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise SupportError(f"{path}: not readable JSON ({e}).") from None
        return cls.from_dict(data, str(path))


def shipped(folder: Path) -> SupportModel | None:
    """The support model beside the judge in folder (what the page's legend quotes), or None when there is none
    or it cannot be read (the judge's loader reports that)."""
    try:
        return SupportModel.load(Path(folder) / SUPPORT_FILE) if (Path(folder) / SUPPORT_FILE).is_file() else None
    except SupportError:
        return None


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def with_support(question: str, hits: Sequence[Hit], readings: Sequence, model: SupportModel) -> tuple:
    """The readings (judge.JudgeReading, one per hit) with `support` set by the model (None: nothing to judge)."""
    features = page_features(
        question, hits, [r.p_answer for r in readings], [r.answer for r in readings], [r.sentence for r in readings]
    )
    return tuple(
        replace(r, support=None if f is None else round(model.probability(f), 4))
        for r, f in zip(readings, features, strict=True)
    )
