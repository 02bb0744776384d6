"""Events -> HTML for the web page. Every string from a page, a question or a model is escaped here.

`RunView` folds the event stream of one run into what the page shows: the final answer with its
evidence, a card per window (pages, streamed reply, verdict badge, confidence, grounding note,
highlighted passage), and every retrieved page readable in full. It holds no model or retrieval
logic and imports no UI toolkit, so its escaping is tested directly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html import escape

from raqa.reading.attribution import MATTERS, can_attribute, shown_p
from raqa.reading.events import (
    Attribution,
    Final,
    InLine,
    Notice,
    ReplyDelta,
    Retrieved,
    RunEvent,
    RunFailed,
    RunStarted,
    WindowStarted,
    WindowVerdict,
)
from raqa.retrieval.index import Hit
from raqa.text import split_sentences, wait_text

BADGES = {
    "answered": ("answered", "Answered"),
    "weak": ("weak", "Weak support"),
    "unsupported": ("unsupported", "Unsupported"),
    "not_found": ("not-found", "Not found"),
    "unparseable": ("unparseable", "Unparseable"),
    "reading": ("reading", "Reading…"),
    "waiting": ("waiting", "In line"),
    "stopped": ("stopped", "Stopped"),
}


def esc(text: object) -> str:
    """Escape any value for HTML text or attribute context."""
    return escape(str(text), quote=True)


def failed_html(message: object) -> str:
    """A message in place of a run's answers: bad input, a refused run, a run that failed."""
    return f'<div class="raqa-answer raqa-failed">{esc(message)}</div>'


def badge(verdict: str) -> str:
    css, label = BADGES.get(verdict, ("unparseable", verdict))
    return f'<span class="raqa-badge raqa-{css}">{esc(label)}</span>'


# The page after Stop, given (answers, windows): whatever was still being read is marked stopped, the rest stays
# as it was. It runs in the browser, on the values shown at that moment, so it never answers with a page older
# than the one on screen (a round trip to the server could, while a run's last updates are still arriving).
_MARK = f"""(shown) => shown.map(
    (html) => typeof html === "string"
        ? html.split({json.dumps(badge("reading"))}).join({json.dumps(badge("stopped"))})
              .split({json.dumps(badge("waiting"))}).join({json.dumps(badge("stopped"))})
        : html
)"""
MARK_STOPPED_JS = f"(...shown) => {{ window.__raqaStoppedAt = Date.now(); return ({_MARK})(shown); }}"
# Again when the stopped event has ended, once, and only after a Stop: an event also ends when a newer run of the page
# replaced it (page_runs.py), and marking then would call the newer run's window stopped.
MARK_AFTER_STOP_JS = f"""(...shown) => {{
  if (!(Date.now() - (window.__raqaStoppedAt || 0) < 30000)) return shown;
  window.__raqaStoppedAt = 0;
  return ({_MARK})(shown);
}}"""


Effects = dict[int, tuple[float, float]]  # sentence number -> (log P(answer) without it, with the whole window)


def effect_class(without: float, with_all: float) -> str:
    """The colour of a sentence by what leaving it out does to log P(answer): needed (at least halves P), helps,
    none, or against (the answer is at least twice as likely without it)."""
    drop = with_all - without
    if drop >= MATTERS:
        return "raqa-why-strong"
    if drop >= MATTERS / 3:
        return "raqa-why-some"
    return "raqa-why-against" if drop <= -MATTERS else "raqa-why-none"


def highlighted_page_text(text: str, sentence: int | None, effects: Effects | None = None) -> str:
    """The page text as escaped sentences, with the 1-based `sentence` wrapped in <mark>; with effects (attribution),
    each sentence the model was shown is coloured by what leaving it out does to P(answer)."""
    parts = []
    for number, s in enumerate(split_sentences(text), start=1):
        body = esc(s)
        if number == sentence:
            body = f'<mark class="raqa-evidence">{body}</mark>'
        css, title = "raqa-sentence", f"sentence {number}"
        if effects and number in effects:
            without, with_all = effects[number]
            css += " " + effect_class(without, with_all)
            title += f": without it, P(answer) {shown_p(with_all)} → {shown_p(without)}"
        parts.append(f'<span class="{css}" title="{esc(title)}" data-sentence="{number}">{body}</span>')
    return " ".join(parts)


def page_details(hit: Hit, sentence: int | None = None, open_: bool = False, effects: Effects | None = None) -> str:
    """A retrieved page as a <details> element: rank, score, title and id, then the full text."""
    page = hit.page
    similarity = "" if hit.similarity is None else f" · similarity {hit.similarity:.2f}"
    if hit.similarity is not None and hit.score == 0:
        similarity += " (found by meaning: no word shared with the question)"
    summary = (
        f'<span class="raqa-rank">#{hit.rank}</span> <bdi>{esc(page.title)}</bdi> '
        f'<span class="raqa-meta">id {esc(page.id)} · BM25 {hit.score:.2f}{similarity}</span>'
    )
    body = highlighted_page_text(page.text, sentence, effects)
    return (
        f'<details class="raqa-page"{" open" if open_ else ""} data-page-id="{esc(page.id)}">'
        f'<summary>{summary}</summary><div class="raqa-page-text" dir="auto">{body}</div></details>'
    )


def judge_html(v: WindowVerdict) -> str:
    """The answer judge's reading of a window: its P(a page states the answer), and what the best page says."""
    i = v.judge_best
    reading, page = v.judge[i], v.hits[i].page
    says = (
        f' · page <bdi>{esc(page.title)}</bdi> says: <q dir="auto">{esc(reading.answer)}</q>'
        + (f' <span class="raqa-meta" dir="auto">({esc(reading.sentence)})</span>' if reading.sentence else "")
        if reading.answer
        else ""
    )
    support = f" (support {reading.support:.2f})" if reading.support is not None else ""
    return (
        '<div class="raqa-judge" title="An extractive reader fine-tuned to find the answer in one page, or none">'
        f"Answer judge: P(this window states the answer) {reading.p_answer:.2f}{support}{says}</div>"
    )


def why_html(a: Attribution) -> str:
    """An attribution's finding, its numbers and the key to the sentence colours."""
    cited = f" · without page {esc(a.cited_page)} {shown_p(a.without_page)}" if a.without_page is not None else ""
    return (
        f'<div class="raqa-why-result" data-finding="{esc(a.finding)}"><b>Why this answer?</b> '
        f'<span dir="auto">{esc(a.summary)}</span><div class="raqa-meta">P(answer) with the window '
        f"{shown_p(a.logprob)} · with no page {shown_p(a.without_pages)}{cited} · "
        f"{len(a.sentences)} sentences left out one at a time, {a.seconds:.1f} s</div>"
        '<div class="raqa-why-key">Sentences, by what leaving each out does: '
        '<span class="raqa-why-strong">needed (P(answer) at least halves)</span> '
        '<span class="raqa-why-some">helps</span> <span class="raqa-why-none">no effect</span> '
        '<span class="raqa-why-against">against (P at least doubles)</span></div></div>'
    )


def line_html(line: InLine) -> str:
    """A waiting run's place in its model's line, when its turn should come, and the other model when it waits long."""
    ahead = f"{line.ahead} run{'s' if line.ahead != 1 else ''} ahead"
    text = (
        f'{badge("waiting")} <span class="raqa-line" data-place="{line.place}">Place {line.place} in line for '
        f"{esc(line.model)} ({esc(ahead)}): your first window in {esc(wait_text(line.eta_s))}.</span>"
    )
    if line.offer:
        text += (
            f'<div class="raqa-warning raqa-offer">A long wait: the reader <b>{esc(line.offer)}</b> reads now, faster '
            f'but far less well. <button type="button" class="raqa-take-offer" data-reader="{esc(line.offer)}">'
            "Ask it now</button></div>"
        )
    return text


def why_button(window: int) -> str:
    return (
        f'<button type="button" class="raqa-why" data-window="{window}" title="Leave out each sentence in turn and '
        'see how likely the model still finds its answer">Why this answer?</button>'
    )


@dataclass
class WindowCard:
    number: int
    of: int
    hits: tuple[Hit, ...]
    prompt_tokens: int
    reply: str = ""
    verdict: WindowVerdict | None = None


@dataclass
class RunView:
    """What the page shows for one run, updated event by event."""

    title: str = "Iterative"
    question: str = ""
    hits: tuple[Hit, ...] = ()
    windows: list[WindowCard] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    in_line: InLine | None = None  # the run's place while it waits for its model; None once it reads
    final: Final | None = None
    failure: str | None = None
    attributions: dict[int, Attribution] = field(default_factory=dict)  # window -> why it answered what it did
    explainable: bool = False  # offer "Why this answer?" on answered windows (the page's single runs)
    explaining: int | None = None  # the window whose attribution is being worked out

    def update(self, event: RunEvent) -> None:
        if isinstance(event, RunStarted):
            self.question = event.question
        elif isinstance(event, Retrieved):
            self.hits = event.hits
        elif isinstance(event, InLine):
            self.in_line = event
        elif isinstance(event, Notice):
            self.notices.append(event.message)
        elif isinstance(event, WindowStarted):
            self.in_line = None
            self.windows.append(WindowCard(event.window, event.of, event.hits, event.prompt_tokens))
        elif isinstance(event, ReplyDelta):
            self.windows[-1].reply += event.text
        elif isinstance(event, WindowVerdict):
            self.windows[-1].verdict = event
        elif isinstance(event, Final):
            self.final = event
        elif isinstance(event, RunFailed):
            self.failure = event.message
        elif isinstance(event, Attribution):
            self.attributions[event.window] = event

    # -- rendering -------------------------------------------------------------------------
    def answer_html(self) -> str:
        if self.failure:
            return f'<div class="raqa-answer raqa-failed"><b>{esc(self.title)}:</b> {esc(self.failure)}</div>'
        if self.final is None and self.in_line is not None:
            return f'<div class="raqa-answer raqa-in-line"><b>{esc(self.title)}:</b> {line_html(self.in_line)}</div>'
        if self.final is None:
            reading = f"window {len(self.windows)}" if self.windows else "retrieving"
            return f'<div class="raqa-answer"><b>{esc(self.title)}:</b> {badge("reading")} {esc(reading)}</div>'
        f = self.final
        stats = (
            f"{f.windows_read} window{'s' * (f.windows_read != 1)}, {f.pages_read} page{'s' * (f.pages_read != 1)}, "
            f"{f.prompt_tokens:,} prompt + {f.completion_tokens:,} completion tokens, {f.seconds:.1f} s"
        )
        if f.answer is None:
            return (
                f'<div class="raqa-answer raqa-none" data-question="{esc(self.question)}" data-verdict="not_found"><b>{esc(self.title)}:</b> '
                f"{badge('not_found')} "
                f'<span class="raqa-final-text">Answer not found</span> <span class="raqa-meta">{esc(stats)}</span></div>'
            )
        where = f" from page {esc(f.page_id)}" if f.page_id else ""
        evidence = f'<blockquote class="raqa-quote" dir="auto">{esc(f.passage)}</blockquote>' if f.passage else ""
        warning = ""
        if f.supported is False:
            warning = (
                '<div class="raqa-warning">The check could not confirm this answer on the page it cites: '
                "treat it as invented.</div>"
            )
        elif f.verdict == "weak":
            warning = (
                '<div class="raqa-warning raqa-unsure">The page seems to support this answer, but the check is not sure '
                "enough to vouch for it: unsure, check it yourself.</div>"
            )
        return (
            f'<div class="raqa-answer" data-question="{esc(self.question)}" data-verdict="{esc(f.verdict)}">'
            f"<b>{esc(self.title)}:</b> {badge(f.verdict)} "
            f'<span class="raqa-final-text" dir="auto">{esc(f.answer)}</span>{where} '
            f'<span class="raqa-meta">window {f.window} · {esc(stats)}</span>{warning}{evidence}</div>'
        )

    def windows_html(self) -> str:
        if not self.windows and not self.notices:
            return f'<div class="raqa-empty">{esc(self.title)}: windows appear here as they are read.</div>'
        notes = "".join(f'<div class="raqa-notice">{esc(n)}</div>' for n in self.notices)
        return notes + "".join(self._window_html(card) for card in reversed(self.windows))

    def _window_html(self, card: WindowCard) -> str:
        v = card.verdict
        head = f"Window {card.number} of {card.of}" if card.of > 1 else "All pages in one prompt"
        ranks = f"ranks {card.hits[0].rank}–{card.hits[-1].rank}" if len(card.hits) > 1 else f"rank {card.hits[0].rank}"
        confidence = ""
        if v is not None and v.p_answer is not None:
            confidence = f'<span class="raqa-meta" title="P(ANSWER) against P(NOT FOUND) for the first word">P(answer) {v.p_answer:.2f}</span>'
        if v is not None and v.grounding is not None and v.grounding.support is not None:
            confidence += (
                '<span class="raqa-meta raqa-support" title="P(the answer is right), from the answer judge and the '
                f'other retrieved pages (support.py)"> · support {v.grounding.support:.2f}</span>'
            )
        status = badge(v.verdict) if v else badge("reading")
        evidence_page = v.grounding.page_id if v and v.grounding else None
        evidence_sentence = v.grounding.sentence if v and v.grounding and v.grounding.supported else None
        why = self.attributions.get(card.number)
        effects: dict[str, Effects] = {}
        if why is not None:
            for e in why.sentences:
                effects.setdefault(e.page_id, {})[e.sentence] = (e.logprob, why.logprob)
        pages = "".join(
            page_details(
                h,
                evidence_sentence if h.page.id == evidence_page else None,
                open_=h.page.id == evidence_page or (why is not None and h.page.id in effects),
                effects=effects.get(h.page.id),
            )
            for h in card.hits
        )
        lines = [f'<pre class="raqa-reply" dir="auto">{esc(card.reply)}</pre>' if card.reply else ""]
        if v is not None:
            if v.reply.reason:
                lines.append(f'<div class="raqa-rationale" dir="auto">Reason: {esc(v.reply.reason)}</div>')
            if v.judge:
                lines.append(judge_html(v))
            if v.grounding is not None:
                label = "Answer check" if v.judge else "Grounding check"
                lines.append(f'<div class="raqa-grounding">{label}: {esc(v.grounding.note)}</div>')
            if v.verdict == "unparseable":
                lines.append(
                    '<div class="raqa-grounding">The reply did not follow the format; counted as no answer.</div>'
                )
            if why is not None:
                lines.append(why_html(why))
            elif self.explaining == card.number:
                lines.append(
                    '<div class="raqa-why-result raqa-why-pending">Why this answer? Leaving out each sentence '
                    "in turn and asking the model again (a few seconds a page)…</div>"
                )
            elif self.explainable and self.final is not None and can_attribute(v) is None:
                lines.append(why_button(card.number))
            tokens = f"{v.prompt_tokens:,} prompt + {v.completion_tokens:,} completion tokens · {v.seconds:.1f} s"
        else:
            tokens = f"{card.prompt_tokens:,} prompt tokens"
        return (
            f'<div class="raqa-window" data-window="{card.number}">'
            f'<div class="raqa-window-head">{status} <b>{esc(head)}</b> <span class="raqa-meta">{esc(ranks)} · {esc(tokens)}</span> {confidence}</div>'
            f'<div class="raqa-pages">{pages}</div>{"".join(lines)}</div>'
        )

    def pages_html(self) -> str:
        """Every retrieved page, readable in full."""
        if not self.hits:
            return '<div class="raqa-empty">Retrieved pages appear here.</div>'
        return "".join(page_details(h) for h in self.hits)
