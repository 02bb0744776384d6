"""How sure the model is of its own closed-book answer: the signals the uncertainty policies threshold.

Each signal is a *confidence* (higher = surer), so every policy reads the same way: answer from memory when the
confidence is at or above the threshold, retrieve below it. From the greedy answer's tokens (one generation):

    sequence_probability   the product of the answer's token probabilities (maximum sequence probability)
    token_probability      the lowest of its tokens' probabilities (each token's maximum probability: the answer
                           is as sure as its least sure token)
    mean_entropy           minus the mean entropy of the tokens' distributions
    max_entropy            minus the largest of those entropies

and from extra forward passes: p_true, the model asked whether its own answer is true (Kadavath et al. 2022):
P("True") / (P("True") + P("False")) for its first reply token; not_ret, 1 - P(the Adapt-LLM adapter's reply
starts with <RET>). Left out here: which threshold (evaluation/when_to_retrieve_scores.py) and the run (pipeline.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from raqa.when_to_retrieve.prompts import Messages, closed_book_messages, parametric_messages

Signal = Literal["sequence_probability", "token_probability", "mean_entropy", "max_entropy", "p_true", "not_ret"]
SIGNALS: tuple[Signal, ...] = (
    "sequence_probability",
    "token_probability",
    "mean_entropy",
    "max_entropy",
    "p_true",
    "not_ret",
)
SIGNAL_TITLES = {
    "sequence_probability": "Sequence probability",
    "token_probability": "Lowest token probability",
    "mean_entropy": "Mean token entropy",
    "max_entropy": "Max token entropy",
    "p_true": "P(True)",
    "not_ret": "1 - P(<RET>)",
}


def token_signals(probabilities: Sequence[float], entropies: Sequence[float]) -> dict[str, float]:
    """The four signals of one generation (an empty answer is as unsure as can be).

    Example:
        >>> s = token_signals([0.5, 0.8], [1.0, 0.2])
        >>> round(s["sequence_probability"], 2), s["token_probability"], s["mean_entropy"], s["max_entropy"]
        (0.4, 0.5, -0.6, -1.0)
    """
    if not probabilities:
        return {
            "sequence_probability": 0.0,
            "token_probability": 0.0,
            "mean_entropy": -math.inf,
            "max_entropy": -math.inf,
        }
    return {
        "sequence_probability": math.exp(sum(math.log(max(p, 1e-300)) for p in probabilities)),
        "token_probability": min(probabilities),
        "mean_entropy": -sum(entropies) / len(entropies),
        "max_entropy": -max(entropies),
    }


def p_true_messages(question: str, answer: str) -> Messages:
    """The P(True) prompt: the question, the model's own answer, and a one-word verdict asked for."""
    return [
        {
            "role": "user",
            "content": f"Question: {question}\nProposed answer: {answer}\n"
            "Is the proposed answer true or false? Reply with one word: True or False.",
        }
    ]


def p_true(model, question: str, answer: str) -> float:
    """P(True) for the answer, normalised over the two words (0.5 when the model favours neither)."""
    yes, no = model.next_token_probabilities(p_true_messages(question, answer), ("True", "False"))
    return yes / (yes + no) if yes + no > 0 else 0.5


def closed_book(model, question: str, with_ret: bool = True) -> tuple[str, dict[str, float]]:
    """The base model's closed-book answer (its first sentence: what a chat model says the answer is, not the
    rambling after it) and every signal of it (not_ret needs the Adapt-LLM adapter)."""
    reply = model.scored_generate(closed_book_messages(question), "base", first_sentence=True)
    signals = token_signals(reply.probabilities, reply.entropies)
    signals["p_true"] = p_true(model, question, reply.text)
    if with_ret:
        signals["not_ret"] = 1.0 - model.ret_probability(parametric_messages(question), "adapt")
    return reply.text, signals
