"""Teacher-forced scoring: how likely a model finds a given continuation after each of several prompts.

Attribution (reading/attribution.py) asks one question many times: how likely is the model's own answer when one
sentence of the window is left out? The prompts differ only from some point on, so the part a prompt shares with the
first one is computed once and copied; what follows is computed for a few prompts together, packed into one forward
pass (the lean forward of llama_runner), or one after the other over transformers' cache for other models.

Left out: scoring through a remote server (an OpenAI-compatible API does not score given text reliably).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch

from raqa.models.decoding import TransformersCursor
from raqa.models.llama_runner import Request

CHUNK = 4  # prompts packed into one forward pass: enough to fill the cores, small enough for their caches


def common_prefix(sequences: Sequence[Sequence[int]]) -> int:
    """The length of the longest prefix every sequence shares, short of each sequence's last token.

    Example:
        >>> common_prefix([[1, 2, 3, 4], [1, 2, 5]])
        2
        >>> common_prefix([[1, 2], [1, 2]])
        1
    """
    n = min(len(s) for s in sequences) - 1
    first = sequences[0]
    for i in range(max(n, 0)):
        if any(s[i] != first[i] for s in sequences):
            return i
    return max(n, 0)


def _target_logprob(first: torch.Tensor, rest: torch.Tensor | None, target: Sequence[int]) -> float:
    """log P(target) from the logits before its first token and (for longer targets) those of its tokens but the last."""
    total = float(torch.log_softmax(first.float(), dim=-1)[target[0]])
    if rest is not None:
        rows = torch.log_softmax(rest.float(), dim=-1)
        total += float(sum(rows[i, target[i + 1]] for i in range(len(target) - 1)))
    return total


def branch_points(prompts: Sequence[Sequence[int]]) -> list[int]:
    """Where each prompt leaves the first one: the length of the prefix it shares with prompts[0] (short of its
    last token). A prompt that leaves a sentence out shares everything before that sentence.

    Example:
        >>> branch_points([[1, 2, 3, 4], [1, 2, 4], [9]])
        [3, 2, 0]
    """
    return [common_prefix([prompts[0], ids]) for ids in prompts]


def lean_logprobs(runner, prompts: Sequence[Sequence[int]], target: Sequence[int], start=None) -> list[float]:
    """log P(target | prompt) for each prompt (token ids), with llama_runner's packed forward.

    One sequence walks along the first prompt; each chunk of prompts (taken in order of where they leave it) starts
    from a copy of it at the earliest of their branch points, so each prompt computes only what differs and after.
    start: a sequence already holding a prefix every prompt shares (the backend's cached system prompt), or None.
    """
    points = branch_points(prompts)
    order = sorted(range(len(prompts)), key=points.__getitem__)
    walker = runner.new_sequence(capacity=len(prompts[0]))
    if start is not None and start.length <= min(points):
        walker.copy_from(start)
    out: dict[int, float] = {}
    for at in range(0, len(order), CHUNK):
        chunk = order[at : at + CHUNK]
        point = min(points[i] for i in chunk)
        if point > walker.length:
            runner.forward([Request(walker, list(prompts[0][walker.length : point]))])
        sequences = []
        for i in chunk:
            sequence = runner.new_sequence(capacity=len(prompts[i]) + len(target))
            sequence.copy_from(walker)
            sequences.append(sequence)
        requests = [Request(s, list(prompts[i][point:])) for s, i in zip(sequences, chunk, strict=True)]
        firsts = runner.forward(requests)
        rests: list[torch.Tensor | None] = [None] * len(chunk)
        if len(target) > 1:
            rests = runner.forward([Request(s, list(target[:-1]), all_logits=True) for s in sequences])
        for i, first, rest in zip(chunk, firsts, rests, strict=True):
            out[i] = _target_logprob(first, rest, target)
    return [out[i] for i in range(len(prompts))]


def plain_logprobs(model, prompts: Sequence[Sequence[int]], target: Sequence[int]) -> list[float]:
    """log P(target | prompt) for each prompt, with transformers' forward (any causal LM), one prompt at a time,
    each from a copy of the cache of the first prompt at its branch point."""
    points = branch_points(prompts)
    walker = TransformersCursor(model)
    out: dict[int, float] = {}
    for i in sorted(range(len(prompts)), key=points.__getitem__):
        if points[i] > walker.length:
            walker.feed(list(prompts[0][walker.length : points[i]]))
        cursor = TransformersCursor(model, copy.deepcopy(walker.cache), walker.length)
        first = cursor.feed(list(prompts[i][points[i] :]))
        rest = cursor.feed(list(target[:-1]), all_logits=True) if len(target) > 1 else None
        out[i] = _target_logprob(first, rest, target)
    return [out[i] for i in range(len(prompts))]
