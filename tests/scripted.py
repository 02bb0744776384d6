"""ScriptedBackend: a fake model that replies from a script, for the tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from raqa.models.base import Backend, Choice, Messages, Usage


class ScriptedBackend(Backend):
    """Replies from a script: a list consumed in order, or a function of the messages.

    Words of the reply stream one at a time. A reply that begins with one of the plan's first words
    counts as choosing it with probability 1; any other reply is yielded whole, with no Choice,
    exactly as a model that ignored the format would be read. Step budgets are not applied.
    """

    name = "scripted"

    def __init__(
        self,
        script: Sequence[str] | Callable[[Messages], str],
        scorer: Callable[[Messages, str], float] | None = None,
    ):
        self._script = script if callable(script) else iter(list(script))
        self.requests: list[Messages] = []
        self._scorer = scorer  # (messages, answer) -> log P(answer): scripted attribution; None: cannot score
        self.can_score = scorer is not None

    def _next(self, messages: Messages) -> str:
        self.requests.append(messages)
        if callable(self._script):
            return self._script(messages)
        try:
            return next(self._script)
        except StopIteration:
            raise AssertionError("The scripted backend ran out of replies.") from None

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def count_prompt_tokens(self, messages: Messages) -> int:
        return sum(self.count_tokens(m["content"]) + 2 for m in messages)

    def answer_logprobs(self, prompts, forced, answer):
        if self._scorer is None:
            return super().answer_logprobs(prompts, forced, answer)
        return [float(self._scorer(messages, answer)) for messages in prompts]

    def reply(self, messages, plan=None, threshold=0.5, max_new_tokens=64):
        text = self._next(messages)
        chosen = next((c for c in plan or {} if text.startswith(c)), None)
        if chosen is not None:
            yield Choice({c: float(c == chosen) for c in plan}, chosen)
        words = text.split(" ")
        for i, word in enumerate(words):
            yield word if i == 0 else " " + word
        yield Usage(self.count_prompt_tokens(messages), len(words))
