"""The default model with the three Adapt-LLM adapters loaded side by side (policies.AdaptModel).

One copy of the base weights holds all three LoRA adapters as named peft adapters; each request switches
to its adapter ("base" disables them all), so the page pays for one model, not four. Decoding is greedy
and short (answers, not essays). Special-token strings in questions and pages are defused exactly as the
demo's reader does (models.local.defuse_special_tokens), so a page cannot forge chat turns. Requests are
serialised by the caller. Left out here: policies (policies.py) and training (lora.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from raqa.config import ASSETS_DIR
from raqa.models.base import ModelError
from raqa.models.local import (
    TransformersBackend,
    defuse_special_tokens,
    peft_loading,
    require_chat_template,
    special_token_strings,
    stop_token_ids,
)
from raqa.models.torch_thread import on_torch_thread
from raqa.when_to_retrieve.policies import ADAPTERS
from raqa.when_to_retrieve.prompts import RET, Messages

ADAPT_DIR = ASSETS_DIR / "adapt"
ANSWER_TOKENS = 32  # greedy tokens per answer: enough for the answer sentence a chat model writes first
ADAPTER_CARD = "raqa_adapter.json"


def adapter_dirs(root: Path = ADAPT_DIR) -> dict[str, Path]:
    """The three adapter folders under root, or ModelError naming what is missing."""
    found = {name: Path(root) / name for name in ADAPTERS}
    missing = [str(p) for p in found.values() if not (p / "adapter_config.json").is_file()]
    if missing:
        raise ModelError(f"Adapt-LLM needs trained adapters at {', '.join(missing)} (python -m lab train adapt).")
    return found


def adapter_card(folder: Path) -> dict:
    try:
        return json.loads((Path(folder) / ADAPTER_CARD).read_text())
    except (OSError, json.JSONDecodeError):
        return {}


class ScoredReply(NamedTuple):
    text: str
    probabilities: tuple[float, ...]  # each greedy token's probability (the maximum of its distribution)
    entropies: tuple[float, ...]  # the entropy (nats) of each token's distribution


def _ends_sentence(piece: str) -> bool:
    return "\n" in piece or piece.rstrip().endswith((".", "!", "?"))


def _cache(output):
    # subtle: transformers 5 names the KV cache `cache`; older releases call it past_key_values
    return output.cache if hasattr(output, "cache") else output.past_key_values


class GreedyModel:
    """Greedy replies and <RET> probabilities from a causal LM (optionally a PeftModel with named adapters)."""

    def __init__(self, model, tokenizer, name: str, answer_tokens: int = ANSWER_TOKENS):
        import torch

        self.torch = torch
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.answer_tokens = answer_tokens
        require_chat_template(tokenizer, name)
        self.stop_ids = stop_token_ids(model, tokenizer)  # the same stop tokens and specials as the reader's
        self.specials = special_token_strings(tokenizer)
        self._ret_ids = tokenizer(RET, add_special_tokens=False)["input_ids"]

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: Messages) -> list[int]:
        safe = [{**m, "content": defuse_special_tokens(m["content"], self.specials)} for m in messages]
        ids = self.tokenizer.apply_chat_template(safe, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)

    def _use(self, adapter: str):
        """A context in which the model runs with the named adapter ("base": none)."""
        import contextlib

        # subtle: transformers models have a set_adapter of their own; only a PeftModel has disable_adapter
        if not hasattr(self.model, "disable_adapter"):
            if adapter != "base":
                raise ModelError(f"This model has no adapters; asked for {adapter!r}.")
            return contextlib.nullcontext()
        if adapter == "base":
            return self.model.disable_adapter()
        self.model.set_adapter(adapter)
        return contextlib.nullcontext()

    def generate(self, messages: Messages, adapter: str = "base", ban_ret: bool = False) -> str:
        return self.scored_generate(messages, adapter, ban_ret).text

    @on_torch_thread
    def scored_generate(
        self, messages: Messages, adapter: str = "base", ban_ret: bool = False, first_sentence: bool = False
    ) -> ScoredReply:
        """The greedy reply with each token's probability and the entropy of the distribution it was drawn from;
        first_sentence stops at the end of the first sentence (the answer a chat model writes first)."""
        torch = self.torch
        prompt = self.prompt_ids(messages)
        generated: list[int] = []
        probabilities: list[float] = []
        entropies: list[float] = []
        with self._use(adapter), torch.inference_mode():
            out = self.model(input_ids=torch.tensor([prompt]), use_cache=True)
            for _ in range(self.answer_tokens):
                logits = out.logits[0, -1]
                token = self._without_ret(generated, logits) if ban_ret else int(torch.argmax(logits))
                if token in self.stop_ids:
                    break
                logp = torch.log_softmax(logits.float(), dim=-1)
                probabilities.append(float(torch.exp(logp[token])))
                entropies.append(float(-(torch.exp(logp) * logp).sum()))
                generated.append(token)
                if first_sentence and _ends_sentence(self.tokenizer.decode([token])) and len(generated) > 1:
                    break
                out = self.model(input_ids=torch.tensor([[token]]), cache=_cache(out), use_cache=True)
        text = self.tokenizer.decode(generated, skip_special_tokens=True).strip()
        return ScoredReply(text, tuple(probabilities), tuple(entropies))

    @on_torch_thread
    def next_token_probabilities(self, messages: Messages, words: Sequence[str], adapter: str = "base") -> list[float]:
        """P(the reply starts with each word's first token), e.g. ("True", "False") for P(True)."""
        torch = self.torch
        prompt = self.prompt_ids(messages)
        with self._use(adapter), torch.inference_mode():
            logits = self.model(input_ids=torch.tensor([prompt])).logits[0, -1]
        probabilities = torch.softmax(logits.float(), dim=-1)
        ids = [self.tokenizer(word, add_special_tokens=False)["input_ids"][0] for word in words]
        return [float(probabilities[i]) for i in ids]

    def _without_ret(self, generated: list[int], logits) -> int:
        """The most likely next token whose text, after the reply so far, does not spell <RET>."""
        # subtle: token-level bans miss merged spellings: "<RET><RET>" tokenises as "<", "RET", "><", "RET", ">"
        for token in self.torch.topk(logits, min(64, logits.numel())).indices.tolist():
            if token in self.stop_ids or RET not in self.tokenizer.decode(generated + [token]):
                return token
        return next(iter(self.stop_ids))

    def ret_probability(self, messages: Messages, adapter: str = "adapt") -> float:
        """P(the reply starts with <RET>): the product of its tokens' probabilities, teacher-forced."""
        return self.sequence_probability(messages, self._ret_ids, adapter)

    @on_torch_thread
    def sequence_probability(self, messages: Messages, target: Sequence[int], adapter: str) -> float:
        torch = self.torch
        prompt = self.prompt_ids(messages)
        with self._use(adapter), torch.inference_mode():
            logits = self.model(input_ids=torch.tensor([prompt + list(target)])).logits[0]
        logp = torch.log_softmax(logits[len(prompt) - 1 : len(prompt) - 1 + len(target)].float(), dim=-1)
        return float(torch.exp(logp[torch.arange(len(target)), torch.tensor(list(target))].sum()))


def load_adapt_model(
    cache_dir: Path | None,
    root: Path = ADAPT_DIR,
    progress=lambda message: None,
    base: TransformersBackend | None = None,
) -> GreedyModel:
    """The embedded model with the adapt / never / always adapters from root loaded as named adapters.

    Given the already loaded base backend, its weights are copied (peft changes a model in place, and the
    base reader must stay as it is) instead of loaded again.
    """
    import copy

    from peft import PeftModel

    folders = adapter_dirs(root)
    if base is None:
        base = TransformersBackend.load(None, None, cache_dir, progress)
        weights = base.model
    else:
        weights = copy.deepcopy(base.model)
    progress("Loading the Adapt-LLM, NR-LLM and AR-LLM adapters")
    try:
        with peft_loading():  # hides the FutureWarning peft causes on every load (see peft_loading)
            model = PeftModel.from_pretrained(weights, str(folders["adapt"]), adapter_name="adapt")
            for name in ("never", "always"):
                model.load_adapter(str(folders[name]), adapter_name=name)
    except Exception as e:
        raise ModelError(f"Could not load the Adapt-LLM adapters from {root}: {type(e).__name__}: {e}") from e
    return GreedyModel(model, base.tokenizer, f"{base.name} + Adapt-LLM adapters")
