"""One reader scored on fixed answer-free and answer-bearing windows, and how honest its Answered badge is.

Shared by the negative-windows experiment (per shot count) and the reader comparison (per reader). With an
answer judge, each window is also read by the judge: the scores then include how well the judge's P(answer)
separates the two kinds of window (AUC). The badge is measured two ways on the very same replies: as the run
gives it (answer agreement with the judge, or the lexical check without a judge) and by the lexical grounding
check alone (grounding.check, the badge before the judge).
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.evaluation.call_journal import call_key, remembered
from lab.stats import auc, estimate
from raqa.config import RunSettings
from raqa.evaluation.fan_out import fan_out
from raqa.evaluation.metrics import answer_contained, exact_match
from raqa.evaluation.questions import QAItem
from raqa.reading import grounding
from raqa.reading.engine import window_verdict
from raqa.reading.events import WindowVerdict


def _answered(v: WindowVerdict) -> bool:
    return v.verdict in ("answered", "weak", "unsupported")


def badge_honesty(verdicts: Sequence[tuple[QAItem, WindowVerdict]], lexical: bool = False) -> dict:
    """Precision and recall of the Answered badge over the windows' answers.

    precision: of the answers badged Answered, the share that contain a gold answer;
    recall: of the answers that contain a gold answer, the share badged Answered.
    lexical=True judges the same replies by the lexical grounding check instead of the run's own badge.
    """
    answers = [(item, v) for item, v in verdicts if _answered(v)]

    def badged(item: QAItem, v: WindowVerdict) -> bool:
        return grounding.check(v.reply, v.hits, item.question).supported if lexical else v.verdict == "answered"

    flags = [(badged(i, v), answer_contained(v.reply.answer, i.answers)) for i, v in answers]
    return {
        "precision": estimate([right for badge, right in flags if badge]),
        "recall": estimate([badge for badge, right in flags if right]),
        "answers": len(flags),
    }


def _judge_p(v: WindowVerdict) -> float | None:
    return v.judge[v.judge_best].p_answer if v.judge else None


def read_fixed_window(question: str, window, backend, settings: RunSettings, judge=None) -> WindowVerdict:
    """engine.window_verdict, from the call journal when it holds it (call_journal.py)."""
    key = call_key("window", question, [h.page.id for h in window], settings=settings, backend=backend, judge=judge)
    return remembered(key, lambda: window_verdict(question, window, backend, settings, judge))


def score_windows(negative, positive, backend, settings: RunSettings, judge=None) -> dict:
    """One reader on fixed negative and positive windows: false answers, exact match, the badge, P(answer)."""
    verdicts = fan_out(
        lambda iw: (iw[0], read_fixed_window(iw[0].question, iw[1], backend, settings, judge)), [*negative, *positive]
    )
    on_negative, on_positive = verdicts[: len(negative)], verdicts[len(negative) :]
    answers = [v.reply.answer if _answered(v) else None for _, v in on_positive]
    every = on_negative + on_positive
    # a reply that ignored the format has no P(answer): 0, it did not say ANSWER; a server that reports no
    # log-probabilities has none at all: then the P(answer) scores are missing (None), never filled in
    missing = sum(v.p_answer is None for _, v in every)
    measured = missing < len(every)
    p_neg = [v.p_answer or 0.0 for _, v in on_negative]
    p_pos = [v.p_answer or 0.0 for _, v in on_positive]
    scores = {
        "false_answer_rate_on_negative": estimate([_answered(v) for _, v in on_negative]),
        "exact_match_on_positive": estimate(
            [exact_match(a, i.answers) for (i, _), a in zip(on_positive, answers, strict=True)]
        ),
        "contains_gold_on_positive": estimate(
            [answer_contained(a, i.answers) for (i, _), a in zip(on_positive, answers, strict=True)]
        ),
        "declined_on_positive": estimate([v.verdict == "not_found" for _, v in on_positive]),
        "grounded_share_of_answers": estimate([v.verdict == "answered" for _, v in every if _answered(v)]),
        "grounded_on_positive": estimate([v.verdict == "answered" for _, v in on_positive]),
        "mean_p_answer_negative": estimate(p_neg, "mean") if measured else None,
        "mean_p_answer_positive": estimate(p_pos, "mean") if measured else None,
        "auc_p_answer": auc(p_neg, p_pos) if measured else None,
        "p_answer_missing": missing,
        "badge": badge_honesty(every),
        "badge_lexical": badge_honesty(every, lexical=True),
        # what reading these windows cost: requests, and tokens as the model (or the server's usage report) counts
        "requests": len(every),
        "prompt_tokens": sum(v.prompt_tokens for _, v in every),
        "completion_tokens": sum(v.completion_tokens for _, v in every),
    }
    if judge is not None:
        scores["auc_judge"] = auc([_judge_p(v) for _, v in on_negative], [_judge_p(v) for _, v in on_positive])
    return scores
