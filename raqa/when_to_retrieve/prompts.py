"""The Adapt-LLM paper's prompts and its <RET> token, and the retrieved page as the context prompt shows it.

Left out here: the policies that use them (policies.py) and the model (model.py).
"""

from __future__ import annotations

from collections.abc import Callable

from raqa.models.base import Messages
from raqa.retrieval.index import Hit

RET = "<RET>"
CONTEXT_TOKENS = 160  # the retrieved page is cut to this many tokens (the paper's passages are ~100 words)


def parametric_messages(question: str) -> Messages:
    """Adapt-LLM's parametric prompt: answer from memory, or ask for context with <RET>."""
    return [
        {
            "role": "user",
            "content": f"Answer the question Q. If you need help answer {RET} to get the context. Q: {question}",
        }
    ]


def closed_book_messages(question: str) -> Messages:
    """The plain question prompt: NR-LLM's, and the zero-shot probe of the base model."""
    return [{"role": "user", "content": f"Answer the question Q. Q: {question}"}]


def context_messages(question: str, context: str) -> Messages:
    """Adapt-LLM's context prompt."""
    return [{"role": "user", "content": f"Answer the question Q given the context C. Q: {question}, C: {context}"}]


def asks_retrieval(reply: str) -> bool:
    """Whether a reply asks for retrieval: it holds <RET> anywhere, as the authors' code checks."""
    return RET in reply


def context_text(hit: Hit, count_tokens: Callable[[str], int], max_tokens: int = CONTEXT_TOKENS) -> str:
    """The page as the context prompt shows it: 'Title: text', cut at a word to at most max_tokens tokens."""
    text = f"{hit.page.title}: {' '.join(hit.page.text.split())}"
    if count_tokens(text) <= max_tokens:
        return text
    words = text.split(" ")
    lo, hi = 1, len(words)
    while lo < hi:  # the most words that fit
        mid = (lo + hi + 1) // 2
        if count_tokens(" ".join(words[:mid])) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])
