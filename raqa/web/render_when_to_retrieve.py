"""When-to-retrieve events -> the pipeline view, the P(<RET>) slider's table and the evaluations' summaries. Everything
is escaped here.

`PipelineView` shows the steps of the one When-to-retrieve stream in order: the closed-book answer with its
confidence signals, the decision (answer from memory, or retrieve), the reading (the Ask tab's RunView renders the
windows), and the ending: an answer from memory, an answer from a page, or "I don't know". `ret_examples_html` marks
which example questions retrieve at a P(<RET>) threshold; `evaluation_summary` and `pipeline_summary` put the committed
experiment when_to_retrieve and experiment pipeline records in words. It imports no UI toolkit, so its escaping is
tested directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from raqa.web.render import RunView, esc
from raqa.when_to_retrieve.pipeline import (
    IDK,
    PIPELINE_TITLES,
    ClosedBookAnswered,
    PipelineEnded,
    PipelineEvent,
    RetrievalDecided,
)
from raqa.when_to_retrieve.uncertainty import SIGNAL_TITLES

DECISION_BADGES = {
    True: ("retrieved", "Retrieve"),
    False: ("memory", "Answer from memory"),
    None: ("undecided", "Cannot decide"),
}
# subtle: a memory answer is checked against nothing, so its badge is amber, never the green of a page's support
STEP_BADGES = {
    "memory": ("unchecked", "From memory, unchecked"),
    "pages": ("answered", "From a page that supports it"),
    "none": ("idk", IDK),
}


@dataclass
class PipelineView:
    question: str = ""
    closed: ClosedBookAnswered | None = None
    decision: RetrievalDecided | None = None
    run: RunView = field(default_factory=lambda: RunView(title="Iterative windows"))
    ended: PipelineEnded | None = None

    def add(self, event: PipelineEvent) -> None:
        if isinstance(event, ClosedBookAnswered):
            self.closed = event
        elif isinstance(event, RetrievalDecided):
            self.decision = event
        elif isinstance(event, PipelineEnded):
            self.ended = event
        else:
            self.run.update(event)

    def html(self) -> str:
        # the ending goes above the windows once it is known, as the Ask tab puts its answer above its windows
        steps = [self._closed_html(), self._decision_html(), self._ended_html()]
        if self.decision is not None and self.decision.retrieve:
            steps.append(
                f'<div class="raqa-pipe-step raqa-pipe-windows"><b>3. Read the windows</b>'
                f"{self.run.answer_html()}{self.run.windows_html()}</div>"
            )
        done = str(self.ended is not None).lower()
        question = f'<div class="raqa-meta">Question: <bdi>{esc(self.question)}</bdi></div>' if self.question else ""
        return f'{question}<div class="raqa-pipeline" data-done="{done}">{"".join(steps)}</div>'

    def _closed_html(self) -> str:
        if self.closed is None:
            return '<div class="raqa-pipe-step"><b>1. Answer closed-book</b> <span class="raqa-empty">thinking…</span></div>'
        signals = "".join(
            f"<li>{esc(SIGNAL_TITLES.get(name, name))}: {value:.3f}</li>" for name, value in self.closed.signals
        )
        answer = esc(self.closed.answer) or "<i>(empty reply)</i>"
        return (
            '<div class="raqa-pipe-step"><b>1. Answer closed-book</b> (the base model, no page): '
            f'<bdi class="raqa-pipe-answer">{answer}</bdi>'
            f"<details><summary>how sure it is (higher = surer)</summary><ul>{signals}</ul></details></div>"
        )

    def _decision_html(self) -> str:
        if self.decision is None:
            return ""
        css, label = DECISION_BADGES[self.decision.retrieve]
        return (
            f'<div class="raqa-pipe-step" data-retrieve="{str(self.decision.retrieve).lower()}"><b>2. Decide</b> '
            f'<span class="raqa-badge raqa-{css}">{label}</span> {esc(self.decision.reason)}</div>'
        )

    def _ended_html(self) -> str:
        if self.ended is None:
            return ""
        css, label = STEP_BADGES[self.ended.source]
        if self.ended.source == "pages" and self.run.final is not None and self.run.final.verdict == "weak":
            css, label = "weak", "From a page, weak support: unsure"  # the judge agrees but cannot vouch for it
        answer = esc(self.ended.answer) if self.ended.answer is not None else f"<i>{esc(IDK)}</i>"
        return (
            f'<div class="raqa-answer raqa-pipe-end" data-source="{esc(self.ended.source)}"><b>Answer</b> '
            f'<span class="raqa-badge raqa-{css}">{esc(label)}</span> <bdi class="raqa-final-text">{answer}</bdi> '
            f'<span class="raqa-meta">{esc(self.ended.reason)} · {self.ended.seconds:.1f} s</span></div>'
        )


def ret_examples_html(examples: Sequence[dict], threshold: float) -> str:
    """Each example question's P(<RET>) against the threshold: retrieve at or above it, else answer from memory."""
    if not examples:
        return (
            '<div class="raqa-empty">No example decisions committed yet: run python -m lab experiment pipeline.</div>'
        )
    rows = []
    for item in sorted(examples, key=lambda e: e["p_ret"]):
        retrieve = item["p_ret"] >= threshold
        css, label = ("retrieved", "Retrieve") if retrieve else ("memory", "From memory")
        width = max(0.0, min(1.0, item["p_ret"])) * 100
        rows.append(
            f'<tr data-retrieve="{str(retrieve).lower()}"><td><bdi>{esc(item["question"])}</bdi></td>'
            f'<td><div class="raqa-ret">{item["p_ret"]:.3f}<div class="raqa-ret-bar"><span style="width:{width:.1f}%">'
            f'</span></div></div></td><td><span class="raqa-badge raqa-{css}">{label}</span></td>'
            f'<td class="raqa-meta"><bdi>{esc(item.get("closed_book", ""))}</bdi></td></tr>'
        )
    retrieving = sum(e["p_ret"] >= threshold for e in examples)
    return (
        f'<div class="raqa-ret-examples" data-retrieving="{retrieving}"><b>At P(&lt;RET&gt;) ≥ {threshold:.2f}</b>: '
        f"{retrieving} of {len(examples)} retrieve.<table><tr><th>question</th><th>P(&lt;RET&gt;)</th><th>decision"
        f"</th><th>closed-book answer</th></tr>{''.join(rows)}</table></div>"
    )


def message_html(text: str, failed: bool = True) -> str:
    css = "raqa-answer raqa-failed" if failed else "raqa-answer"
    return f'<div class="{css}">{esc(text)}</div>'


def evaluation_summary(record: dict) -> str:
    """One line per dataset of the committed experiment when_to_retrieve record: accuracy by policy and the <RET>
    rate."""
    names = {
        "never": "never",
        "always": "always",
        "adapt": "Adapt-LLM",
        "adapt_threshold": "Adapt-LLM with a threshold",
    }
    lines = []
    for dataset, d in record["results"]["datasets"].items():
        parts = ", ".join(
            f"{esc(names.get(p, p))} {v['accuracy']['value']:.1%}" for p, v in d["policies"].items() if "accuracy" in v
        )
        lines.append(
            f"<li><b>{esc(dataset)}</b> test (n={d['n']}): accuracy {parts}; Adapt-LLM asked for "
            f"&lt;RET&gt; on {d['ret_rate']['value']:.1%}</li>"
        )
    return f'<ul class="raqa-w2r-summary">{"".join(lines)}</ul>'


def _pct(estimate: dict) -> str:
    value = estimate.get("value")
    if value is None or value != value:
        return "–"
    return f'{value:.1%} <span class="raqa-meta">[{estimate["low"]:.0%}, {estimate["high"]:.0%}]</span>'


def _signed(diff: dict) -> str:
    """A difference of shares with its interval: +3.1% [-1.0%, +7.2%]."""
    if diff.get("value") is None:
        return "–"
    interval = f" [{diff['low']:+.1%}, {diff['high']:+.1%}]" if diff.get("low") is not None else ""
    return f"{diff['value']:+.1%}{interval}"


def _config_title(name: str) -> str:
    parts = name.split(":")
    if parts[0] == "closed_book":
        return f"closed-book, answer only when {SIGNAL_TITLES[parts[1]]} ≥ threshold"
    if parts[0] == "always":
        return f"always retrieve, {parts[1]} reader"
    if parts[0] == "pipeline":
        return f"pipeline: {PIPELINE_TITLES[parts[1]]}, {parts[2]} reader"
    return "never retrieve (closed-book)"


def pipeline_summary(record: dict) -> str:
    """The committed experiment pipeline record per test set: targets, AUCs, and every configuration's scores."""
    out = []
    for dataset, d in record["results"]["datasets"].items():
        t = d["targets"]
        aucs = ", ".join(
            f"{esc(SIGNAL_TITLES[s])} {a['value']:.2f}" for s, a in d["auc"].items() if a["value"] is not None
        )
        rows = "".join(
            f'<tr class="{"raqa-differs" if name == t["best_pipeline"] else ""}"><td>{esc(_config_title(name))}</td>'
            f"<td>{_pct(s['coverage'])}</td><td>{_pct(s['accuracy'])}</td><td>{_pct(s['selective_accuracy'])}</td>"
            f"<td>{_pct(s['idk_unanswerable'])}</td></tr>"
            for name, s in d["table"].items()
        )
        diff = t["selective_accuracy_minus_always_base"]
        gap = _signed(diff)
        lead = (
            f"<b>{esc(dataset)}</b> test, n={d['n']} ({d['n'] - d['answerable']} with no answer in the corpus), "
            f"thresholds from {d['dev_n']} dev questions; closed-book right on {_pct(d['closed_book_correct'])}. "
            f"AUC against wrong closed-book answers: {aucs}. Best pipeline (marked): "
            f"{esc(_config_title(t['best_pipeline']))}, accuracy among answered minus always-retrieve (base): "
            f"{gap}. Best that can say I don't know: {esc(_config_title(t['best_abstaining_pipeline']))}, "
            f"{_signed(t['best_abstaining_minus_always_base'])}."
        )
        out.append(
            f'<details class="raqa-pipe-summary"><summary>{lead}</summary><table><tr><th>configuration</th>'
            f"<th>coverage</th><th>accuracy</th><th>accuracy among answered</th><th>I don't know, no answer in "
            f"corpus</th></tr>{rows}</table></details>"
        )
    return "".join(out)


def ret_signal_summary(record: dict) -> str:
    """experiment ret_signal's record in a sentence per test set: each adapter's AUC and the paired difference."""
    results = record["results"]
    made_by = (record.get("adapters") or {}).get("candidate") or "?"
    verdict = (
        "ranks wrong closed-book answers better on every test set"
        if results["candidate_higher_on_every_test_set"]
        else "does not rank wrong closed-book answers better on every test set"
    )
    parts = []
    for name, group in results["groups"].items():
        auc, spread = group["auc"], group["spread"]
        diff = auc["difference"]
        interval = f" [{diff['low']:+.3f}, {diff['high']:+.3f}]" if diff.get("low") is not None else ""
        change = f"{diff['value']:+.3f}{interval}" if diff.get("value") is not None else "–"
        parts.append(
            f"<li><b>{esc(name)}</b> (n={auc['n']}, {auc['needs_retrieval']} needing retrieval): AUC "
            f"{auc['baseline']['value']} → {auc['candidate']['value']}, difference {change}; P(&lt;RET&gt;) median "
            f"{spread['baseline']['median']} → {spread['candidate']['median']}, "
            f"≥ 0.5 on {spread['baseline']['at_or_above_half']:.0%} → {spread['candidate']['at_or_above_half']:.0%}</li>"
        )
    return (
        f'<details class="raqa-pipe-summary"><summary><b>Two Adapt-LLM adapters compared</b>: the candidate '
        f"adapter ({esc(made_by)}) {verdict} than the baseline.</summary><ul>{''.join(parts)}</ul></details>"
    )
