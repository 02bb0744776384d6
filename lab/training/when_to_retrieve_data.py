"""Adapt-LLM's training data (the paper's Algorithm 1), and the NR-LLM and AR-LLM sets from the same questions.

Each training question is asked zero-shot to the base model with the plain question prompt. It counts as
known when a normalised gold answer is contained in the normalised reply (as the authors' code scores it;
strict exact match almost never holds for a chat model's sentences). Then:

    Adapt-LLM  known:   parametric prompt -> gold answer
               unknown: parametric prompt -> <RET>   and   context prompt -> gold answer
    NR-LLM     every question: plain question prompt -> gold answer
    AR-LLM     every question: context prompt -> gold answer

The paper's context is the dataset's gold passage; our corpus has none, so the context is the best-ranked of
BM25's top CONTEXT_K pages whose shown text contains a gold answer, else the top page, and which one is
recorded. The gold answer taught is the first listed. Questions come from dev splits only (the evaluation
reads test splits). Left out here: training itself (lora.py) and evaluation (lab.evaluation.when_to_retrieve).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass

from lab.training.lora import Example
from raqa.evaluation.metrics import answer_contained, is_positive
from raqa.evaluation.questions import QAItem
from raqa.retrieval.index import BM25Index
from raqa.when_to_retrieve.prompts import (
    RET,
    closed_book_messages,
    context_messages,
    context_text,
    parametric_messages,
)

CONTEXT_K = 20  # pages searched for one holding the answer
ADAPTER_KINDS = ("adapt", "never", "always")


@dataclass(frozen=True)
class Labelled:
    dataset: str
    id: str
    question: str
    answers: tuple[str, ...]
    base_reply: str  # the base model's zero-shot reply
    known: bool  # a gold answer is contained in that reply
    context: str  # the page text the context prompt shows
    context_title: str
    context_rank: int | None  # BM25 rank of that page; None when BM25 found nothing
    context_has_answer: bool  # the shown text contains a gold answer (else it is simply the top page)

    def as_dict(self) -> dict:
        return asdict(self)


def choose_context(
    item: QAItem, index: BM25Index, count_tokens: Callable[[str], int]
) -> tuple[str, str, int | None, bool]:
    """(context, title, rank, has answer): the best-ranked page whose shown text holds a gold answer, else the top."""
    hits = index.search(item.question, CONTEXT_K)
    if not hits:
        return "", "", None, False
    shown = [(hit, context_text(hit, count_tokens)) for hit in hits]
    for hit, text in shown:
        if is_positive(text, item.answers):
            return text, hit.page.title, hit.rank, True
    hit, text = shown[0]
    return text, hit.page.title, hit.rank, False


def label_questions(
    items: Iterable[tuple[str, QAItem]],
    generate: Callable[[list[dict]], str],
    index: BM25Index,
    count_tokens: Callable[[str], int],
) -> Iterable[Labelled]:
    """Ask the base model each (dataset, question) closed-book; yield it labelled, with its context."""
    for dataset, item in items:
        reply = generate(closed_book_messages(item.question))
        context, title, rank, has_answer = choose_context(item, index, count_tokens)
        yield Labelled(
            dataset,
            item.id,
            item.question,
            answers=tuple(item.answers),
            base_reply=reply,
            known=answer_contained(reply, item.answers),
            context=context,
            context_title=title,
            context_rank=rank,
            context_has_answer=has_answer,
        )


def known_repeats(labelled: Sequence[Labelled]) -> int:
    """How often each known question's answer example is repeated so that the parametric prompt's two targets
    (the answer, <RET>) are taught about equally often: unknown / known, rounded, at least 1.

    Example:
        >>> rows = [Labelled("nq", str(i), "q", ("a",), "r", i < 2, "", "", None, False) for i in range(10)]
        >>> known_repeats(rows)
        4
    """
    known = sum(x.known for x in labelled)
    return max(1, round((len(labelled) - known) / known)) if known else 1


def examples(labelled: Sequence[Labelled], kind: str, balance: bool = False) -> list[Example]:
    """The training examples of one adapter: 'adapt' (Algorithm 1), 'never' or 'always'. With balance, Adapt-LLM's
    known questions are repeated (known_repeats) so that <RET> does not drown them (the examples stay in order:
    the trainer shuffles)."""
    if kind not in ADAPTER_KINDS:
        raise ValueError(f"Invalid adapter kind: {kind!r}. Choose from: {', '.join(ADAPTER_KINDS)}.")
    repeats = known_repeats(labelled) if balance and kind == "adapt" else 1
    out = []
    for x in labelled:
        gold = x.answers[0]
        if kind == "never":
            out.append(Example(tuple(closed_book_messages(x.question)), gold))
        elif kind == "always":
            out.append(Example(tuple(context_messages(x.question, x.context)), gold))
        elif x.known:
            out += [Example(tuple(parametric_messages(x.question)), gold)] * repeats
        else:
            out.append(Example(tuple(parametric_messages(x.question)), RET))
            out.append(Example(tuple(context_messages(x.question, x.context)), gold))
    return out


def read_labelled(path) -> list[Labelled]:
    """The labelled questions train adapt wrote (training_data.jsonl), to train again without labelling again."""
    import json
    from pathlib import Path

    rows = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        try:
            data = json.loads(line)
            rows.append(Labelled(**{**data, "answers": tuple(data["answers"])}))
        except (json.JSONDecodeError, TypeError, KeyError) as e:
            raise ValueError(f"{path}, line {n}: not a labelled question ({type(e).__name__}: {e}).") from None
    return rows


def data_summary(labelled: Sequence[Labelled]) -> dict:
    """Counts for the cards: questions, known answers and the share of <RET> targets per dataset."""
    by_dataset: dict[str, dict] = {}
    for dataset in sorted({x.dataset for x in labelled}):
        rows = [x for x in labelled if x.dataset == dataset]
        known = sum(x.known for x in rows)
        by_dataset[dataset] = {
            "questions": len(rows),
            "known_zero_shot": known,
            "ret_target_share": round(1 - known / len(rows), 4),
            "context_has_answer": sum(x.context_has_answer for x in rows),
        }
    known = sum(x.known for x in labelled)
    ranks = Counter(str(x.context_rank) for x in labelled if x.context_has_answer)
    return {
        "questions": len(labelled),
        "known_zero_shot": known,
        "ret_target_share": round(1 - known / len(labelled), 4) if labelled else None,
        "by_dataset": by_dataset,
        "context_has_answer": sum(x.context_has_answer for x in labelled),
        "context_rank_when_it_has_the_answer": dict(sorted(ranks.items(), key=lambda kv: int(kv[0]))),
        "examples": {kind: len(examples(labelled, kind)) for kind in ADAPTER_KINDS},
    }
