"""The wire format of an OpenAI-compatible chat-completions stream, as pure functions: server-sent events,
first-token log-probabilities, the reply's pieces from its chunks, Retry-After, and the token estimates used where the
server's tokenizer is unknown. Both backends that speak this format use them: a server over HTTP (endpoint.py) and
llama.cpp in-process (llamacpp.py).

Left out: the HTTP client, retries and the Backend interface.
"""

from __future__ import annotations

import email.utils
import math
import re
from collections.abc import Callable, Generator, Iterable, Iterator

from raqa.models.base import Choice, Piece, ReplyPlan, Step, pick_choice

PREFILL_TOKENS = 8  # budget for a step's forced words when the step's text is a function of the reply


def estimate_tokens(text: str) -> int:
    """An estimate that errs high for English: words and punctuation marks, or one token per 4 characters,
    whichever is more (BPE tokenizers give about 0.75 words per token).

    Example:
        >>> estimate_tokens("Hello, world!")
        4
    """
    return max(len(re.findall(r"\w+|[^\w\s]", text)), math.ceil(len(text) / 4))


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After header: a number of seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def sse_data(lines: Iterator[str]) -> Iterator[str]:
    """The data of each server-sent event: data lines joined by newlines, dispatched at a blank line or at the end.

    Comments (":" lines, used as keep-alives) and event/id/retry fields are skipped.

    Example:
        >>> list(sse_data(iter([": ping", "data: {}", "", "data:[DONE]"])))
        ['{}', '[DONE]']
    """
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


def choice_probabilities(logprobs: object, words: list[str]) -> dict[str, float] | None:
    """P(word) over the plan's words from the first non-blank token's top alternatives, or None if unknown.

    A token counts for a word when one is a prefix of the other ("ANS" for "ANSWER:"); a token that fits
    several words counts for none.
    """
    entries = (logprobs or {}).get("content") if isinstance(logprobs, dict) else None
    if not isinstance(entries, list):
        return None
    first = next((e for e in entries if isinstance(e, dict) and str(e.get("token", "")).strip()), None)
    if first is None or not isinstance(first.get("top_logprobs"), list):
        return None
    mass = dict.fromkeys(words, 0.0)
    for alt in first["top_logprobs"]:
        token = str(alt.get("token", "")).lstrip() if isinstance(alt, dict) else ""
        fits = [w for w in words if token and (w.startswith(token) or token.startswith(w))]
        if len(fits) == 1 and isinstance(alt.get("logprob"), (int, float)):
            mass[fits[0]] += math.exp(alt["logprob"])
    total = sum(mass.values())
    return {w: p / total for w, p in mass.items()} if total > 0 else None


def plan_budget(plan: ReplyPlan, count: Callable[[str], int]) -> int:
    """Tokens the longest branch of a plan may take: its forced words and its generated steps."""

    def cost(step: Step) -> int:
        forced = PREFILL_TOKENS if callable(step.prefill) else count(step.prefill)
        return forced + step.max_tokens

    return max(sum(cost(step) for step in steps) for steps in plan.values())


def first_word(head: str, words: list[str], probabilities, threshold: float) -> tuple[list, bool]:
    """The Choice (if the reply starts with a plan word) and the text so far; True when the threshold cut an answer
    to the likeliest other word (a server cannot be steered after its first token, so it can only make it decline)."""
    written = next((w for w in words if head.lstrip().startswith(w)), None)
    if written is None:
        return [head], False
    if probabilities is None:
        return [Choice({w: float(w == written) for w in words}, written, measured=False), head], False
    picked = pick_choice(probabilities, threshold)
    if written == words[0] and picked != written:
        return [Choice(probabilities, picked), picked], True
    return [Choice(probabilities, written), head], False


def reply_pieces(
    chunks: Iterable[dict], words: list[str], threshold: float, shown: list[bool]
) -> Generator[Piece, None, tuple[bool, dict | None, int]]:
    """Choice and text pieces from chat-completion chunks; the Choice waits until the first word is known.

    shown[0] is set once a piece was yielded. Returns (whether a choice finished, the last usage report, the number
    of text chunks): the caller decides what an unfinished stream means and yields the Usage.
    """
    head, probabilities, decided, finished, usage, count = "", None, not words, False, None, 0
    cut = False  # the threshold turned an answer into a decline: the rest of the text is not shown
    for chunk in chunks:
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            finished = finished or bool(choice.get("finish_reason"))
            if probabilities is None and words:
                probabilities = choice_probabilities(choice.get("logprobs"), words)
            text = (choice.get("delta") or {}).get("content") or ""
            if not text:
                continue
            count += 1
            if cut:
                continue
            if decided:
                shown[0] = True
                yield text
                continue
            head += text
            start = head.lstrip()
            if any(w.startswith(start) for w in words) and not any(start.startswith(w) for w in words):
                continue  # not yet enough text to know the first word
            decided = True
            pieces, cut = first_word(head, words, probabilities, threshold)
            shown[0] = True
            yield from pieces
    if not decided and head:  # a reply shorter than every first word
        shown[0] = True
        yield from first_word(head, words, probabilities, threshold)[0]
    return finished, usage, count
