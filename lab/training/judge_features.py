"""The answer judge's training examples: (question, page) pairs encoded as the runtime reads them, in batches.

Each pair from judge_data.py is encoded exactly as reading.judge.encode reads a page (question + "title\\ntext"
in rows of max_tokens, a long page continued in overlapping rows): an answer-bearing page is the first row that
holds its whole answer, start/end at the answer's tokens; an answer-free page is its first row, pointing at [CLS]
(index 0), the SQuAD-2 convention. Batches are of similar length, padded to their longest, in a seeded order.
Left out here: the labels (judge_data.py) and the training loop (judge.py).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from lab.training.judge_data import JudgePair
from raqa.reading.judge import encode, page_context


@dataclass
class Feature:
    input_ids: list[int]
    token_type_ids: list[int]
    start: int  # token index of the answer's first token; 0 ([CLS]) for no answer
    end: int


def features(tokenizer, pairs: Sequence[JudgePair], max_tokens: int) -> tuple[list[Feature], int]:
    """The training examples of the pairs, and how many positives were dropped (no row holds their whole answer:
    only an answer longer than a row's overlap, cut by every row)."""
    by_question: dict[str, list[JudgePair]] = {}
    for pair in pairs:  # encoded a question at a time: encode strides only if the call's longest question leaves room
        by_question.setdefault(pair.question, []).append(pair)
    examples: dict[int, Feature | None] = {}  # id(pair) -> its example, so the output keeps the pairs' order
    for question, asked in by_question.items():
        encoding = encode(
            tokenizer,
            [question] * len(asked),
            [p.page for p in asked],
            max_tokens=max_tokens,
            padding=False,
            return_tensors=None,
        )
        rows: dict[int, list[int]] = {}
        for row, pair_at in enumerate(encoding["overflow_to_sample_mapping"]):
            rows.setdefault(pair_at, []).append(row)
        for pair_at, pair in enumerate(asked):
            examples[id(pair)] = _example(encoding, rows[pair_at], pair)
    out = [examples[id(p)] for p in pairs if examples[id(p)] is not None]
    return out, len(pairs) - len(out)


def _example(encoding, rows: Sequence[int], pair: JudgePair) -> Feature | None:
    """A pair's training row: its first row for a negative, the first row holding the whole answer for a positive."""
    if not pair.positive:
        return Feature(encoding["input_ids"][rows[0]], encoding["token_type_ids"][rows[0]], 0, 0)
    first = page_context(pair.page)[1] + pair.start
    last = first + len(pair.answer)
    for row in rows:
        offsets, segments = encoding["offset_mapping"][row], encoding.sequence_ids(row)
        page_tokens = [i for i, segment in enumerate(segments) if segment == 1]
        if not page_tokens or offsets[page_tokens[0]][0] > first or offsets[page_tokens[-1]][1] < last:
            continue  # the answer starts before this row or runs past it
        inside = [i for i in page_tokens if offsets[i][1] > first and offsets[i][0] < last]
        return Feature(encoding["input_ids"][row], encoding["token_type_ids"][row], inside[0], inside[-1])
    return None


def batches(items: list[Feature], size: int, rng: random.Random) -> list[list[Feature]]:
    """Shuffled batches of similar length: shuffle, sort within chunks of 50 batches, shuffle the batches."""
    order = rng.sample(items, len(items))
    chunk = size * 50
    out = []
    for at in range(0, len(order), chunk):
        group = sorted(order[at : at + chunk], key=lambda f: len(f.input_ids))
        out += [group[i : i + size] for i in range(0, len(group), size)]
    rng.shuffle(out)
    return out


def collate(batch: Sequence[Feature], pad_id: int) -> dict:
    import torch

    width = max(len(f.input_ids) for f in batch)

    def padded(rows, value):
        return torch.tensor([r + [value] * (width - len(r)) for r in rows])

    return {
        "input_ids": padded([f.input_ids for f in batch], pad_id),
        "token_type_ids": padded([f.token_type_ids for f in batch], 0),
        "attention_mask": padded([[1] * len(f.input_ids) for f in batch], 0),
        "start_positions": torch.tensor([f.start for f in batch]),
        "end_positions": torch.tensor([f.end for f in batch]),
    }
