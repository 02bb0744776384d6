"""The When-to-retrieve evaluation with a model server: the never- and always-retrieve answers from the server.

A model server holds one model and none of the LoRA adapters trained here (assets/adapt), so through `experiment
when_to_retrieve --endpoint NAME` the two baselines are the served model itself: never retrieve = it answers from memory
(the closed-book prompt), always retrieve = it answers with BM25's top page (the context prompt), as NR-LLM and AR-LLM
do with their adapters. Adapt-LLM's decision (P(<RET>)) and its answers need the trained adapter, so they stay on the
local model, one call at a time under a lock while the server answers several questions at once.
"""

from __future__ import annotations

import threading

from raqa.models.base import Backend, Messages
from raqa.when_to_retrieve.model import ANSWER_TOKENS

SERVED_POLICIES = ("never", "always")  # answered by the served model; "adapt" needs the local adapter


class ServedBaselines:
    """The policies' model (policies.AdaptModel): the baselines' answers from the server, Adapt-LLM local."""

    def __init__(self, local, server: Backend, answer_tokens: int = ANSWER_TOKENS):
        self.local, self.server, self.answer_tokens = local, server, answer_tokens
        self.name = f"{server.name} (never, always); {local.name} (Adapt-LLM)"
        self._local_lock = threading.Lock()  # the local model switches adapters per call: one call at a time

    def generate(self, messages: Messages, adapter: str, ban_ret: bool = False) -> str:
        if adapter in SERVED_POLICIES:  # the served model knows no <RET>: nothing to ban
            pieces = self.server.reply(messages, None, max_new_tokens=self.answer_tokens)
            return "".join(p for p in pieces if isinstance(p, str)).strip()
        with self._local_lock:
            return self.local.generate(messages, adapter, ban_ret)

    def ret_probability(self, messages: Messages, adapter: str) -> float:
        with self._local_lock:
            return self.local.ret_probability(messages, adapter)

    def count_tokens(self, text: str) -> int:
        return self.local.count_tokens(text)
