"""Router events -> the "When to retrieve" cards: one card per policy, side by side. Everything is escaped here.

`RouteView` folds the events of router.decide for each policy into a card: the decision (answered from
memory, retrieved, cannot decide), Adapt-LLM's P(<RET>) as a bar, the page read with the context the
model saw, and the answer. It imports no UI toolkit, so its escaping is tested directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raqa.web.render import esc
from raqa.when_to_retrieve.policies import (
    POLICIES,
    POLICY_TITLES,
    Answer,
    Decision,
    PageRead,
    PolicyEvent,
    PolicyFailed,
)

DECISION_BADGES = {
    True: ("retrieved", "Retrieved"),
    False: ("memory", "From memory"),
    None: ("undecided", "Cannot decide"),
}


@dataclass
class PolicyCard:
    policy: str
    decision: Decision | None = None
    page: PageRead | None = None
    answer: Answer | None = None
    failed: str | None = None

    def add(self, event: PolicyEvent) -> None:
        if isinstance(event, Decision):
            self.decision = event
        elif isinstance(event, PageRead):
            self.page = event
        elif isinstance(event, Answer):
            self.answer = event
        elif isinstance(event, PolicyFailed):
            self.failed = event.message

    def html(self, busy: bool) -> str:
        head = f'<div class="raqa-route-head"><b>{esc(POLICY_TITLES[self.policy])}</b> {self._badge(busy)}</div>'
        body = []
        d = self.decision
        if d is not None:
            body.append(f'<div class="raqa-route-reason">{esc(d.reason)}</div>')
            if d.ret_probability is not None:
                width = max(0.0, min(1.0, d.ret_probability)) * 100
                body.append(
                    f'<div class="raqa-ret" title="P(&lt;RET&gt;)">P(&lt;RET&gt;) = {d.ret_probability:.3f}'
                    f'<div class="raqa-ret-bar"><span style="width:{width:.1f}%"></span></div></div>'
                )
            if d.first_reply is not None and d.retrieve:
                body.append(f'<div class="raqa-meta">first reply: <bdi>{esc(d.first_reply)}</bdi></div>')
        if self.page is not None and self.page.hit is not None:
            hit = self.page.hit
            body.append(
                f'<details class="raqa-route-page"><summary>page #{hit.rank}: <bdi>{esc(hit.page.title)}</bdi> '
                f'(BM25 {hit.score:.2f})</summary><div class="raqa-page-text">{esc(self.page.context)}</div></details>'
            )
        if self.answer is not None:
            where = "with the page" if self.answer.with_context else "from memory"
            body.append(
                f'<div class="raqa-route-answer"><span class="raqa-meta">answer ({esc(where)}):</span> '
                f"<bdi>{esc(self.answer.text) or '<i>(empty reply)</i>'}</bdi></div>"
            )
        if self.failed:
            body.append(f'<div class="raqa-warning">{esc(self.failed)}</div>')
        if busy and self.answer is None and not self.failed:
            body.append('<div class="raqa-empty">thinking…</div>')
        return f'<div class="raqa-route-card raqa-route-{self.policy}">{head}{"".join(body)}</div>'

    def _badge(self, busy: bool) -> str:
        if self.decision is None:
            css, label = ("reading", "Deciding…") if busy else ("undecided", "Waiting")
        else:
            css, label = DECISION_BADGES[self.decision.retrieve]
        return f'<span class="raqa-badge raqa-{css}">{esc(label)}</span>'


@dataclass
class RouteView:
    question: str = ""
    cards: dict[str, PolicyCard] = field(default_factory=lambda: {p: PolicyCard(p) for p in POLICIES})
    busy: str | None = None  # the policy being computed now
    done: bool = False  # every policy has finished (the page marks the grid so tests and viewers can tell)

    def add(self, event: PolicyEvent) -> None:
        self.cards[event.policy].add(event)

    def html(self) -> str:
        cards = "".join(card.html(card.policy == self.busy) for card in self.cards.values())
        question = f'<div class="raqa-meta">Question: <bdi>{esc(self.question)}</bdi></div>' if self.question else ""
        return f'{question}<div class="raqa-route-grid" data-done="{str(self.done).lower()}">{cards}</div>'


def message_html(text: str, failed: bool = True) -> str:
    css = "raqa-answer raqa-failed" if failed else "raqa-answer"
    return f'<div class="{css}">{esc(text)}</div>'


def evaluation_summary(record: dict) -> str:
    """One line per dataset of the committed eval-adapt record: accuracy by policy and the <RET> rate."""
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
    return f'<ul class="raqa-route-summary">{"".join(lines)}</ul>'
