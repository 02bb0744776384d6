"""The answer judge's training examples: (question, page) pairs encoded as the runtime reads them, in batches.

Each pair from judge_data.py is encoded exactly as reading.judge.encode reads a page (question + "title\\ntext",
cut to max_tokens): an answer-bearing page points start/end at its answer's tokens, an answer-free page at [CLS]
(index 0), the SQuAD-2 convention. Batches are of similar length, padded to their longest, in a seeded order.
Left out here: the labels (judge_data.py) and the training loop (judge.py).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from raqa.reading.judge import page_context
from raqa.training.judge_data import JudgePair


@dataclass
class Feature:
    input_ids: list[int]
    token_type_ids: list[int]
    start: int  # token index of the answer's first token; 0 ([CLS]) for no answer
    end: int


def features(tokenizer, pairs: Sequence[JudgePair], max_tokens: int) -> tuple[list[Feature], int]:
    """The training examples of the pairs, and how many positives were dropped (their answer cut off)."""
    encoding = tokenizer(
        [p.question for p in pairs],
        [page_context(p.page)[0] for p in pairs],
        truncation="only_second",
        max_length=max_tokens,
        return_offsets_mapping=True,
    )
    out, dropped = [], 0
    for row, pair in enumerate(pairs):
        ids, types = encoding["input_ids"][row], encoding["token_type_ids"][row]
        start = end = 0
        if pair.positive:
            first = page_context(pair.page)[1] + pair.start
            last = first + len(pair.answer)
            offsets, segments = encoding["offset_mapping"][row], encoding.sequence_ids(row)
            inside = [i for i, (s, e) in enumerate(offsets) if segments[i] == 1 and e > first and s < last]
            if not inside:
                dropped += 1
                continue
            start, end = inside[0], inside[-1]
        out.append(Feature(ids, types, start, end))
    return out, dropped


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
