"""Greedy decoding of a guided reply over a cursor (a request's key/value cache), with prompt-lookup speculation.

A cursor holds one request's position in the model: `feed(ids)` appends tokens and returns the next logits,
`truncate(n)` forgets positions from n on. Two kinds: `TransformersCursor` (transformers' own forward and a
DynamicCache, the baseline) and `LeanCursor` (llama_runner's forward, optionally through the shared batcher).

`guided_reply` is the reply loop every local model runs: read the verdict from the first words' probabilities,
then force and generate the plan's steps. With lookahead > 0 it guesses the next tokens by finding the last few
generated tokens in the prompt (an answer is mostly copied from a page) and checks all the guesses in one pass;
it keeps the guesses the model would have produced itself and forgets the rest, so the reply is the greedy one
(Saxena's prompt lookup decoding; transformers' `prompt_lookup_num_tokens`). Left out: sampling, and drafts from
a second model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import torch

from raqa.models.base import Choice, ReplyPlan, Step, Usage, pick_choice
from raqa.models.llama_runner import Request
from raqa.models.torch_thread import on_torch_thread

NGRAM_SIZES = (3, 2)  # the longest tail of the reply looked up in the prompt first


class TransformersCursor:
    """transformers' forward over a DynamicCache (the cache objects transformers' generate uses)."""

    def __init__(self, model, cache=None, length: int = 0):
        self.model, self.cache, self.length = model, cache, length

    @on_torch_thread
    def feed(self, ids: list[int], all_logits: bool = False) -> torch.Tensor:
        with torch.inference_mode():
            out = self.model(input_ids=torch.tensor([ids]), cache=self.cache, use_cache=True)
        self.cache, self.length = out.cache, self.length + len(ids)
        return out.logits[0] if all_logits else out.logits[0, -1]

    def truncate(self, length: int) -> None:
        if length < self.length:
            self.cache.crop(length - self.length)  # transformers 5: a negative count of positions to remove
            self.length = length

    def close(self) -> None:
        self.cache = None


class LeanCursor:
    """llama_runner's forward over one preallocated sequence; through the batcher when runs share the model."""

    def __init__(self, runner, sequence, batcher=None):
        self.runner, self.sequence, self.batcher = runner, sequence, batcher
        if batcher is not None:
            batcher.open()

    @property
    def length(self) -> int:
        return self.sequence.length

    def feed(self, ids: list[int], all_logits: bool = False) -> torch.Tensor:
        request = Request(self.sequence, list(ids), all_logits)
        if self.batcher is not None:
            return self.batcher.forward(request)
        return self.runner.forward([request])[0]

    def truncate(self, length: int) -> None:
        self.sequence.truncate(min(length, self.sequence.length))

    def close(self) -> None:
        if self.batcher is not None:
            self.batcher.close()
            self.batcher = None


def lookup_proposals(context: Sequence[int], source: Sequence[int], count: int) -> list[int]:
    """Up to count tokens that followed the latest earlier occurrence, in source, of context's last 3 (else 2)
    tokens: a guess of what comes next when the reply copies from the prompt.

    Example:
        >>> lookup_proposals([7, 1, 2], [5, 1, 2, 3, 4, 9], 2)
        [3, 4]
        >>> lookup_proposals([7, 8], [5, 1, 2], 2)
        []
    """
    if count <= 0:
        return []
    for n in NGRAM_SIZES:
        if len(context) < n:
            continue
        tail = list(context[-n:])
        for start in range(len(source) - n - 1, -1, -1):
            if list(source[start : start + n]) == tail:
                return list(source[start + n : start + n + count])
    return []


def guided_reply(
    cursor,
    logits: torch.Tensor,
    prompt: list[int],
    plan: ReplyPlan | None,
    threshold: float,
    max_new_tokens: int,
    room: int,
    encode: Callable[[str], list[int]],
    decode: Callable[[list[int]], str],
    stop_ids: frozenset[int],
    lookahead: int = 0,
) -> Iterator[Choice | str | Usage]:
    """The reply's pieces (base.Piece) after the prompt's logits: Choice, text as it is decoded, Usage last."""
    completion = 0
    if plan:
        # the verdict is read from the probability of each first word's first token
        firsts = {word: encode(word)[0] for word in plan}
        probs = torch.softmax(logits.float(), dim=-1)
        raw = {word: float(probs[token]) for word, token in firsts.items()}
        total = sum(raw.values()) or 1.0
        chosen = pick_choice({w: p / total for w, p in raw.items()}, threshold)
        yield Choice({w: p / total for w, p in raw.items()}, chosen)
        steps: tuple[Step, ...] = plan[chosen]
    else:
        steps = (Step("", max_new_tokens, stop_at_newline=False),)
    reply = ""
    for step in steps:
        prefill = step.prefill(reply) if callable(step.prefill) else step.prefill
        if prefill:
            forced = encode(prefill)
            yield prefill
            reply += prefill
            completion += len(forced)
            if step.max_tokens == 0 and step is steps[-1]:
                break
            logits = cursor.feed(forced)
        fed_before = cursor.length
        generated: list[int] = []
        shown = ""
        ahead: list[torch.Tensor] = []  # logits already computed for the next tokens (accepted guesses)
        for _ in range(min(step.max_tokens, room - completion)):
            token = int(torch.argmax(logits))
            if token in stop_ids:
                break
            text = decode(generated + [token])
            if step.stop_at_newline and "\n" in text[len(shown) :] and text.strip():
                break
            generated.append(token)
            completion += 1
            # subtle: a multi-byte character spans tokens; wait until it decodes whole
            if not text.endswith("\ufffd"):
                yield text[len(shown) :]
                reply += text[len(shown) :]
                shown = text
            if ahead:
                logits = ahead.pop(0)
                continue
            cursor.truncate(fed_before + len(generated) - 1)  # forget the guesses that were not taken
            guesses = lookup_proposals(prompt + generated, prompt, min(lookahead, room - completion - 1))
            if not guesses:
                logits = cursor.feed([token])
                continue
            rows = cursor.feed([token, *guesses], all_logits=True)
            kept = 0
            while kept < len(guesses) and int(torch.argmax(rows[kept])) == guesses[kept]:
                kept += 1
            logits, ahead = rows[0], list(rows[1 : kept + 1])
        # subtle: the cache must hold exactly the tokens taken: unchecked or unused guesses are forgotten, and a
        # token that ended the step (a stop token, a newline) was never fed; the next prefill brings its own
        cursor.truncate(fed_before + len(generated))
    yield Usage(len(prompt), completion)
