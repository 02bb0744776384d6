"""A scripted stand-in for adapt_model.GreedyModel: replies chosen by a function of (prompt text, adapter)."""

from __future__ import annotations

from collections.abc import Callable

from raqa.when_to_retrieve.prompts import RET


class FakeAdaptModel:
    """Replies from `script(prompt, adapter, ban_ret)`; P(<RET>) is 0.9 when the scripted reply holds <RET>."""

    name = "fake adapt model"

    def __init__(self, script: Callable[[str, str, bool], str]):
        self.script = script
        self.calls: list[tuple[str, str, bool]] = []

    def generate(self, messages, adapter: str = "base", ban_ret: bool = False) -> str:
        prompt = messages[-1]["content"]
        self.calls.append((prompt, adapter, ban_ret))
        reply = self.script(prompt, adapter, ban_ret)
        assert not (ban_ret and RET in reply), "a banned <RET> was written"
        return reply

    def ret_probability(self, messages, adapter: str = "adapt") -> float:
        return 0.9 if RET in self.script(messages[-1]["content"], adapter, False) else 0.1

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def scored_generate(self, messages, adapter: str = "base", ban_ret: bool = False, first_sentence: bool = False):
        """The scripted reply, each word a token: sure (0.9, low entropy) of an answer it knows, else unsure."""
        from raqa.when_to_retrieve.model import ScoredReply

        text = self.generate(messages, adapter, ban_ret)
        sure = "Paris" in text
        words = text.split()
        return ScoredReply(text, tuple([0.9 if sure else 0.2] * len(words)), tuple([0.3 if sure else 2.5] * len(words)))

    def next_token_probabilities(self, messages, words, adapter: str = "base") -> list[float]:
        """P(True) prompts: "True" likelier for an answer it knows."""
        sure = "Proposed answer: Paris" in messages[-1]["content"]
        return [0.8, 0.2] if sure else [0.3, 0.6]


def knows_paris(prompt: str, adapter: str, ban_ret: bool) -> str:
    """Knows capitals from memory; for anything else Adapt-LLM asks for <RET>; with a context it reads it."""
    if "given the context" in prompt:
        context = prompt.split(", C: ", 1)[1]
        return context.split(":", 1)[0]  # the page title: what a reader of that page would answer here
    if "capital of France" in prompt:
        return "Paris"
    if adapter == "adapt" and not ban_ret:
        return RET
    return "I think it is Mont Blanc"
