"""What every model backend shares: the reply pieces, the reply plan, the error, and the Backend interface.

A backend answers one request: given chat messages and the allowed first words of the reply
(e.g. "ANSWER:" / "NOT FOUND"), it yields

    Choice   the probability of each first word and the one taken,
    str      the generated text after it, a token at a time,
    Usage    prompt and completion token counts, last.

Reading the verdict from first-word probabilities makes the format hold even for a 135M model
and gives the viewer a confidence for free. A backend that cannot score words (a remote API)
yields no Choice and generates the whole reply; the parser then reads the verdict.

The backends: `local.TransformersBackend` (a transformers model on this machine), `llamacpp.LlamaCppBackend`
(a GGUF in llama.cpp, in process) and `endpoint.EndpointBackend` (an OpenAI-compatible server); the tests'
`ScriptedBackend` replies from a script.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One stretch of a guided reply: text forced into the reply, then up to max_tokens generated."""

    prefill: str | Callable[[str], str]  # fixed text, or a function of the reply so far
    max_tokens: int = 0
    stop_at_newline: bool = True  # end the step at the first generated line break


ReplyPlan = dict[str, tuple[Step, ...]]  # first word of the reply -> the steps that follow from it


@dataclass(frozen=True)
class Choice:
    probabilities: dict[str, float]  # normalised over the allowed first words
    chosen: str
    measured: bool = True  # False: a server that reports no log-probabilities; read from how the reply starts


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


Piece = Choice | str | Usage
Messages = Sequence[dict[str, str]]


class ModelError(RuntimeError):
    """The model or adapter could not be loaded or used; the message says what was tried."""


class Backend(ABC):
    name: str = "backend"
    context_tokens: int = 8192
    can_score: bool = False  # answer_logprobs works: the model is on this machine (attribution needs it)
    requests_at_once: int = 1  # whole questions a caller may send at once (a model server: its entry's concurrency)
    runs_at_once: int = 1  # runs its line lets read at once (reading/line.py; a model server: its entry's concurrency)

    @abstractmethod
    def count_tokens(self, text: str) -> int: ...

    @abstractmethod
    def count_prompt_tokens(self, messages: Messages) -> int: ...

    @abstractmethod
    def reply(
        self,
        messages: Messages,
        plan: ReplyPlan | None = None,
        threshold: float = 0.5,
        max_new_tokens: int = 64,
    ) -> Iterator[Piece]:
        """Stream a reply. With a plan, score its first words, take the first one when its share of
        probability reaches threshold (else the likeliest other), then follow that word's steps.
        Without a plan, generate up to max_new_tokens freely."""

    def answer_logprobs(self, prompts: Sequence[Messages], forced: str, answer: str) -> list[float]:
        """log P(answer) after each prompt and the forced text (e.g. "ANSWER:"), teacher-forced: the model is shown
        the answer's tokens, not asked for them. Attribution needs it; a backend that cannot score raises ModelError."""
        raise ModelError(f"{self.name} cannot score a given answer: attribution needs a model on this machine.")


def pick_choice(probabilities: dict[str, float], threshold: float) -> str:
    """The first choice if its probability reaches threshold, else the likeliest of the others."""
    choices = list(probabilities)
    if probabilities[choices[0]] >= threshold or len(choices) == 1:
        return choices[0]
    return max(choices[1:], key=lambda c: probabilities[c])
