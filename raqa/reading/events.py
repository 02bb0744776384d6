"""The typed events of a run, the union type of them, and the one JSON form every event family shares.

A strategy in engine.py yields these in order:

    RunStarted, InLine*, Retrieved, [Notice], (WindowStarted, ReplyDelta*, WindowVerdict)+, Final

or RunFailed in place of what could not be done. An Attribution of an answered window may follow, when asked for
(`ask --why`, the page's "Why this answer?"). The UI renders them, the CLI prints them as JSON
lines, and the evaluation scores them: all three see the same stream.

Every event, these and the When-to-retrieve stream's (when_to_retrieve/pipeline.py), is a frozen
dataclass deriving from `Event`, and `to_json` turns any of them into one JSON convention: a snake_case
"type" (the class name: WindowVerdict -> "window_verdict"), the fields by name, nested dataclasses as
dicts, and each retrieved page (a Hit) reduced to {"rank", "score", "page_id", "title"}.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, fields, is_dataclass
from typing import Literal, Union

from raqa.config import RunSettings
from raqa.reading.grounding import Grounding
from raqa.reading.judge import JudgeReading
from raqa.reading.prompts import ParsedReply
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import Hit

Verdict = Literal["answered", "weak", "unsupported", "not_found", "unparseable"]


@dataclass(frozen=True)
class Event:
    """The base of every event a run or a policy yields; `type_name()` is its JSON "type"."""

    @classmethod
    def type_name(cls) -> str:
        """The class name in snake_case.

        Example:
            >>> WindowVerdict.type_name()
            'window_verdict'
        """
        return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()


@dataclass(frozen=True)
class RunStarted(Event):
    question: str
    settings: RunSettings
    model: str


@dataclass(frozen=True)
class Retrieved(Event):
    hits: tuple[Hit, ...]
    seconds: float


@dataclass(frozen=True)
class Notice(Event):
    message: str  # something the viewer should know, e.g. that not all K pages fit the context


@dataclass(frozen=True)
class InLine(Event):
    """The run waits its turn for its model (reading/line.py): its place, and when its first window should start."""

    place: int  # 1 = next to read
    ahead: int  # runs reading now or waiting before this one
    eta_s: float  # seconds until this run starts reading, from the model's recent runs
    model: str
    offer: str | None = None  # another model that would read at once, when the wait is long


@dataclass(frozen=True)
class WindowStarted(Event):
    window: int  # 1-based position in reading order
    of: int  # how many windows the run may read
    hits: tuple[Hit, ...]
    prompt_tokens: int


@dataclass(frozen=True)
class ReplyDelta(Event):
    window: int
    text: str  # the newly generated text, to append


@dataclass(frozen=True)
class WindowVerdict(Event):
    window: int
    hits: tuple[Hit, ...]
    verdict: Verdict
    reply: ParsedReply
    grounding: Grounding | None  # set for answers; None for declines and unparseable replies
    p_answer: float | None  # P(ANSWER) / (P(ANSWER) + P(NOT FOUND)) for the first word, if the backend reports it
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    judge: tuple[JudgeReading, ...] | None = None  # the answer judge's reading of each page, in window order

    @property
    def judge_best(self) -> int | None:
        """The position of the page the judge finds most likely to state the answer; None without a judge."""
        if not self.judge:
            return None
        return max(range(len(self.judge)), key=lambda i: self.judge[i].p_answer)


@dataclass(frozen=True)
class Final(Event):
    question: str
    strategy: str
    order: str
    answer: str | None  # None when the run ends in "answer not found"
    abstained: bool
    verdict: Verdict  # of the window that gave the answer, or "not_found"
    supported: bool | None  # the grounding check of the answer; None when there is no answer
    window: int | None  # the window that answered
    page_id: str | None
    passage: str | None
    windows_read: int
    pages_read: int
    prompt_tokens: int
    completion_tokens: int
    topk_prompt_tokens: int  # what one Top-K prompt over the same K pages costs, for comparison
    seconds: float


@dataclass(frozen=True)
class RunFailed(Event):
    message: str


Finding = Literal["sentence", "page", "memory", "spread"]


@dataclass(frozen=True)
class SentenceEffect:
    page_id: str
    sentence: int  # 1-based, as numbered in the prompt
    logprob: float  # log P(the answer) with this sentence left out of the window


@dataclass(frozen=True)
class Attribution(Event):
    """Why the model answered what it did in one window: log P(its answer) with the window as read, with each sentence
    left out, without the cited page and without any page (attribution.py). Asked for after a run, not during it."""

    window: int
    answer: str
    logprob: float  # log P(the answer) with the window as the model read it
    sentences: tuple[SentenceEffect, ...]  # every sentence the model was shown, in prompt order
    without_page: float | None  # with the cited page left out (None: the reply cited no page of the window)
    without_pages: float  # with no page at all: the answer from memory
    cited_page: str | None
    cited_sentence: int | None
    finding: Finding  # what the answer depends on (the rules in attribution.py)
    summary: str  # one plain sentence for the viewer
    seconds: float


RunEvent = Union[
    RunStarted,
    Retrieved,
    InLine,
    Notice,
    WindowStarted,
    ReplyDelta,
    WindowVerdict,
    Final,
    RunFailed,
    Attribution,
]


def hit_json(hit: Hit) -> dict:
    data = {"rank": hit.rank, "score": round(hit.score, 4), "page_id": hit.page.id, "title": hit.page.title}
    if hit.similarity is not None:
        data["similarity"] = round(hit.similarity, 4)
    return data


def _value_json(value: object) -> object:
    if isinstance(value, Hit):
        return hit_json(value)
    if isinstance(value, (tuple, list)):
        return [_value_json(v) for v in value]
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return value


def to_json(event: Event) -> dict:
    """A JSON-ready dict: {"type": snake_case class name, field: value, ...}; pages as rank, score, id, title."""
    return {"type": event.type_name(), **{f.name: _value_json(getattr(event, f.name)) for f in fields(event)}}


EVENT_CLASSES = {cls.type_name(): cls for cls in RunEvent.__args__}
_NESTED = {"settings": RunSettings, "reply": ParsedReply, "grounding": Grounding}


def from_json(
    data: dict, page_of: Callable[[str], Page | None], classes: Mapping[str, type[Event]] = EVENT_CLASSES
) -> Event:
    """The event to_json made `data` from (a recorded run read back), of one of `classes` by its type name (a run's
    events by default; the When-to-retrieve stream passes its own and the run's). Pages are looked up by id with
    page_of; a page the corpus no longer has comes back with its title and no text. A list the fields above do not
    name comes back as a tuple of tuples (ClosedBookAnswered's signals). ValueError on a dict that is none of them.

    Example:
        >>> from_json({"type": "notice", "message": "hi"}, lambda page_id: None)
        Notice(message='hi')
    """
    cls = classes.get(data.get("type")) if isinstance(data, dict) else None
    if cls is None:
        raise ValueError(f"Not a run event: {str(data)[:80]!r}.")

    def hit(item: dict) -> Hit:
        page = page_of(item["page_id"]) or Page(item["page_id"], item["title"], "")
        return Hit(item["rank"], item["score"], page, item.get("similarity"))

    values = {}
    try:
        for f in fields(cls):
            if f.name not in data and f.default is MISSING and f.default_factory is MISSING:
                raise KeyError(f.name)  # a field with a default may be missing: a recording older than the field
            value = data.get(f.name)
            if f.name == "hits":
                value = tuple(hit(item) for item in value)
            elif f.name == "judge" and value is not None:
                value = tuple(JudgeReading(**item) for item in value)
            elif f.name == "sentences":
                value = tuple(SentenceEffect(**item) for item in value)
            elif f.name == "settings" and value is not None:  # a run recorded before hybrid retrieval read BM25's
                value = RunSettings(**{"retrieval": "bm25", **value})
            elif f.name in _NESTED and value is not None:
                value = _NESTED[f.name](**value)
            elif isinstance(value, list):
                value = tuple(tuple(item) if isinstance(item, list) else item for item in value)
            values[f.name] = value
        return cls(**values)
    except (KeyError, TypeError) as e:
        raise ValueError(f"A {data['type']} event with missing or unexpected fields: {e}.") from e
