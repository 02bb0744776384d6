"""Training windows for the abstention-tuned reader, built from dev-split questions only.

For each dev question (NQ-open dev, TriviaQA dev) the BM25 pages are split into windows exactly as the
demo splits them (engine.windows, forward or backward, sizes 1-3) and shown with the demo's prompt
(prompts.build_messages). A *positive* window shows, within its cut pages, a sentence that states a
normalised gold answer and is about the question (the grounding check's rule); its target cites that page
and sentence, gives the answer as it is written there, quotes the sentence and says why. A *negative*
window holds no page that mentions a gold answer anywhere; its target declines with a reason. Each
question gives at most one window of each kind, taken from the same ranking, so positives and negatives
come from the same questions and the model cannot tell them apart by the question alone.

Left out here: test questions (never read), model training (reader.py) and windows whose pages mention
an answer only outside the visible cut or only in sentences unrelated to the question: those are neither
clean positives nor clean negatives, so they are skipped.
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from lab.evaluation.positives import PositiveIndex
from lab.training import TRAIN_DATASETS
from raqa.config import RunSettings
from raqa.evaluation.questions import QAItem, load_questions
from raqa.reading.engine import windows
from raqa.reading.grounding import about_question
from raqa.reading.prompts import DEMONSTRATIONS, NOT_FOUND_WORD, build_messages, page_block
from raqa.retrieval.index import BM25Index, Hit
from raqa.text import normalize_for_matching, split_sentences

TRAINING_WINDOW_SIZES = (1, 2, 3)
PAGES_RETRIEVED = RunSettings.k  # pages retrieved per question: the demo's K
Kind = Literal["positive", "negative"]
CountTokens = Callable[[str], int]


@dataclass(frozen=True)
class WindowExample:
    dataset: str
    question_id: str
    question: str
    answers: tuple[str, ...]
    kind: Kind
    hits: tuple[Hit, ...]
    position: int | None  # 1-based place in the window of the page holding the answer; None for negatives
    target: str  # the reply the model should give, in the format prompts.parse_reply reads

    @property
    def size(self) -> int:
        return len(self.hits)


@dataclass(frozen=True)
class Evidence:
    position: int  # 1-based place of the page in the window
    hit: Hit
    sentence: int  # 1-based, as numbered in the prompt
    text: str  # the sentence
    span: str  # the gold answer as the sentence writes it


def dev_split(seed: int = 0) -> dict[str, tuple[list[QAItem], list[QAItem]]]:
    """Each training dataset's dev questions, shuffled (seeded) and halved: (for training, held out).

    The held-out half gives the windows on which the answer threshold is calibrated. Test splits are never read.
    """

    split = {}
    for dataset in TRAIN_DATASETS:
        items = load_questions(dataset, "dev")
        shuffled = random.Random(seed).sample(items, len(items))
        split[dataset] = (shuffled[: len(shuffled) // 2], shuffled[len(shuffled) // 2 :])
    return split


def visible_sentences(hit: Hit, page_tokens: int, count_tokens: CountTokens) -> list[str]:
    """The sentences of a page that the prompt shows after cutting it to page_tokens."""
    block, _ = page_block(hit, page_tokens, count_tokens)
    shown = block.count("\n")  # one numbered line per sentence below the header
    return split_sentences(hit.page.text)[:shown]


def answer_span(sentence: str, answer: str) -> str | None:
    """The words of the sentence that normalise to the answer, with outer punctuation trimmed.

    Example:
        >>> answer_span("It was painted by Leonardo da Vinci, in Florence.", "leonardo da vinci")
        'Leonardo da Vinci'
    """
    needle = normalize_for_matching(answer)
    if not needle:
        return None
    words = sentence.split()
    length = len(needle.split())
    for size in range(max(1, length - 1), length + 3):
        for start in range(len(words) - size + 1):
            piece = " ".join(words[start : start + size]).strip(" .,;:!?\"'()[]“”‘’")
            if normalize_for_matching(piece) == needle:
                return piece
    return None


def find_evidence(
    question: str, hits: Sequence[Hit], answers: Sequence[str], page_tokens: int, count_tokens: CountTokens
) -> Evidence | None:
    """The first visible sentence, in window order, that states a gold answer and is about the question."""
    for position, hit in enumerate(hits, start=1):
        for number, sentence in enumerate(visible_sentences(hit, page_tokens, count_tokens), start=1):
            if not about_question(question, hit.page.title, sentence):
                continue
            for answer in answers:
                span = answer_span(sentence, answer)
                if span:
                    return Evidence(position, hit, number, sentence, span)
    return None


def positive_target(evidence: Evidence) -> str:
    """ANSWER, PAGE and SENTENCE in the order the demo's guided reply forces, then the quote and a reason."""
    page = evidence.hit.page
    return (
        f"ANSWER: {evidence.span}\nPAGE: {page.id}\nSENTENCE: {evidence.sentence}\n"
        f"QUOTE: {evidence.text}\nREASON: Sentence {evidence.sentence} of page {page.id} ({page.title}) states it."
    )


def negative_target(hits: Sequence[Hit]) -> str:
    titles = [h.page.title for h in hits]
    about = titles[0] if len(titles) == 1 else ", ".join(titles[:-1]) + " and " + titles[-1]
    return f"{NOT_FOUND_WORD}\nREASON: The pages are about {about}; none of them states the answer."


def question_windows(
    item: QAItem,
    dataset: str,
    hits: Sequence[Hit],
    positives: PositiveIndex,
    rng: random.Random,
    page_tokens: int,
    count_tokens: CountTokens,
) -> tuple[WindowExample | None, WindowExample | None]:
    """At most one positive and one negative window of one question, with a random size and reading order."""
    size = rng.choice(TRAINING_WINDOW_SIZES)
    chunks = windows(hits, size, rng.choice(("forward", "backward")))
    rng.shuffle(chunks)
    positive = negative = None
    example = functools.partial(WindowExample, dataset, item.id, item.question, answers=item.answers)
    for chunk in chunks:
        mentions = any(positives.is_positive(h.page, item.answers) for h in chunk)
        if not mentions and negative is None:
            negative = example(kind="negative", hits=chunk, position=None, target=negative_target(chunk))
        elif mentions and positive is None:
            evidence = find_evidence(item.question, chunk, item.answers, page_tokens, count_tokens)
            if evidence:
                target = positive_target(evidence)
                positive = example(kind="positive", hits=chunk, position=evidence.position, target=target)
    return positive, negative


def build_examples(
    questions: dict[str, Sequence[QAItem]],
    index: BM25Index,
    positives: PositiveIndex,
    count_tokens: CountTokens,
    per_kind: int,
    page_tokens: int,
    seed: int = 0,
    progress: Callable[[Iterable], Iterable] = lambda items: items,
) -> list[WindowExample]:
    """per_kind positive and per_kind negative windows from each dataset's questions, paired by question.

    Questions are read in the given order; only questions that yield both kinds are kept, so each kind
    comes from the same questions. The result is shuffled (seeded).
    """
    rng = random.Random(seed)
    chosen: list[WindowExample] = []
    for dataset, items in questions.items():
        kept = 0
        for item in progress(items):
            if kept >= per_kind:
                break
            hits = index.search(item.question, PAGES_RETRIEVED)
            positive, negative = question_windows(
                item, dataset, hits, positives=positives, rng=rng, page_tokens=page_tokens, count_tokens=count_tokens
            )
            if positive and negative:
                chosen += [positive, negative]
                kept += 1
    rng.shuffle(chosen)
    return chosen


def example_messages(
    example: WindowExample, page_tokens: int, count_tokens: CountTokens, shots: int
) -> list[dict[str, str]]:
    """The chat messages the demo would send for this window."""
    return build_messages(example.question, example.hits, page_tokens, count_tokens, DEMONSTRATIONS[:shots])


def mix(examples: Sequence[WindowExample]) -> dict:
    """Counts per kind, dataset, window size and place of the answer page: what the card reports."""
    return {
        "windows": len(examples),
        "questions": len({e.question_id for e in examples}),
        "by_kind": dict(Counter(e.kind for e in examples)),
        "by_dataset_and_kind": {
            f"{d}/{k}": n for (d, k), n in sorted(Counter((e.dataset, e.kind) for e in examples).items())
        },
        "by_window_size_and_kind": {
            f"w{s}/{k}": n for (s, k), n in sorted(Counter((e.size, e.kind) for e in examples).items())
        },
        "answer_page_position": {
            f"{p} of {s}": n
            for (p, s), n in sorted(Counter((e.position, e.size) for e in examples if e.kind == "positive").items())
        },
    }
