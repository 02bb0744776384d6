"""LoRA fine-tuning on (chat prompt -> target reply) examples: the one trainer behind train reader and train adapt.

One loop driven by one `LoraSettings`, with a config per use (`READER_LORA`, `ADAPT_LORA`). An optimiser step
sees `batch` examples, run as forward passes of `micro_batch` examples of similar length (left-padded) with
gradient accumulation in between. The loss is cross-entropy on target tokens only, averaged over the step's
target tokens (`average="tokens"`) or over its examples (`"replies"`); `verdict_weight` moves that share of it
onto each target's first token (the reader's ANSWER/NOT verdict, otherwise one token among ~20-60). With
`shared_prefix`, a prompt prefix common to examples (system prompt, worked examples) is run once per step
without gradients and the examples continue from its KV cache: on a CPU that roughly halves the reader's step.
The steps run in the one training loop (loop.py): the learning rate warms up over `warmup_steps`, then decays
linearly to zero; the last step's weights are kept.
The same code runs on a GPU when torch finds one. `save` writes the adapter in peft's format, its card,
README and training log.

Left out here: what the examples are (reader_data.py, when_to_retrieve_data.py), the reader's threshold
(calibration.py) and the commands around the trainer (reader.py, when_to_retrieve.py).

Example:
    >>> encoded = [encode_example(Example(({"role": "user", "content": "Q?"},), "A"), tokenizer)]  # doctest: +SKIP
    >>> peft_model, log = train_adapter(model, encoded, replace(ADAPT_LORA, epochs=1))  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lab.training.loop import Schedule, optimise

LOG_FILE = "training_log.json"


@dataclass(frozen=True)
class LoraSettings:
    """One training run. The defaults are the generic trainer's (ADAPT_LORA); READER_LORA is the reader's."""

    # the adapter
    rank: int = 8  # r, as in the Adapt-LLM paper
    alpha: int = 16
    dropout: float = 0.05
    target_modules: tuple[str, ...] = ("q_proj", "v_proj")  # peft's default for Llama-style models
    # the optimisation: AdamW without weight decay, gradients clipped to norm 1
    lr: float = 3e-4  # peak learning rate
    warmup_steps: int = 0  # linear warm-up over this many optimiser steps, then linear decay to 0
    epochs: int = 3  # each a fresh seeded shuffle of the examples
    batch: int = 128  # examples per optimiser step (the effective batch)
    micro_batch: int = 8  # examples per forward pass; gradient accumulation makes up the rest
    seed: int = 0  # LoRA initialisation, dropout and example order
    # the loss
    average: str = "tokens"  # "tokens": every target token of a step weighs the same; "replies": every example
    verdict_weight: float = 0.0  # share of the loss on each target's first token; the rest is the average
    shared_prefix: bool = False  # run the prompt prefix shared by examples once per step, without gradients
    # the reader's training windows (train reader only; None elsewhere)
    page_tokens: int | None = None  # pages cut to this many tokens (shorter = faster)
    shots: int | None = None  # worked examples in the prompt

    def check(self) -> None:
        for name in ("rank", "alpha", "epochs", "batch", "micro_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be 1 or more, got {getattr(self, name)}.")
        if not 0 < self.lr < 1:
            raise ValueError(f"lr must be between 0 and 1, got {self.lr}.")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be from 0 to below 1, got {self.dropout}.")
        if not 0 <= self.verdict_weight <= 1:
            raise ValueError(f"verdict_weight must be from 0 to 1, got {self.verdict_weight}.")
        if self.average not in ("tokens", "replies"):
            raise ValueError(f'average must be "tokens" or "replies", got {self.average!r}.')
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be 0 or more, got {self.warmup_steps}.")

    def card(self) -> dict:
        return {**asdict(self), "target_modules": list(self.target_modules)}


# Adapt-LLM, NR-LLM and AR-LLM (train adapt): the paper's r and batch, length-sorted micro-batches.
ADAPT_LORA = LoraSettings(epochs=3, batch=128, micro_batch=8, target_modules=("q_proj", "v_proj"))

# The abstention-tuned reader (train reader): one window per forward pass, continuing from the shared prefix.
READER_LORA = LoraSettings(
    target_modules=("q_proj", "k_proj", "v_proj", "o_proj"),
    warmup_steps=4,
    epochs=1,
    batch=4,
    micro_batch=1,
    average="replies",
    verdict_weight=0.5,
    shared_prefix=True,
    page_tokens=200,
    shots=2,
)


@dataclass(frozen=True)
class Example:
    messages: tuple[dict[str, str], ...]
    target: str


@dataclass
class Encoded:
    prefix: list[int]  # the prompt's shared start (system prompt, worked examples); empty when not shared
    rest: list[int]  # the rest of the prompt, ending with the assistant header
    target: list[int]  # the reply, ending with the end-of-turn token


@dataclass
class TrainLog:
    steps: list[dict] = field(default_factory=list)  # per optimiser step: loss, verdict loss, lr, seconds
    seconds: float = 0.0
    tokens: int = 0  # tokens run through the model (a shared prefix once per step)
    device: str = "cpu"


def _ids(value) -> list[int]:
    return list(value["input_ids"] if hasattr(value, "keys") else value)


def encode_example(example: Example, tokenizer, shared_prefix: bool = False) -> Encoded:
    """The chat prompt with the assistant header, then the target and end of turn.

    With shared_prefix, every message but the last goes into `prefix` when the template extends it.
    """
    prompt = _ids(tokenizer.apply_chat_template(list(example.messages), add_generation_prompt=True, tokenize=True))
    prefix: list[int] = []
    if shared_prefix and len(example.messages) > 1:
        prefix = _ids(tokenizer.apply_chat_template(list(example.messages[:-1]), tokenize=True))
        if prompt[: len(prefix)] != prefix:  # a template that does not extend its prefix: no sharing
            prefix = []
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    end = tokenizer.eos_token_id if end is None or end == tokenizer.unk_token_id else end
    target = tokenizer(example.target, add_special_tokens=False)["input_ids"] + [end]
    return Encoded(prefix, prompt[len(prefix) :], list(target))


def step_batches(n: int, epochs: int, batch: int, rng: random.Random) -> list[list[int]]:
    """Example indices per optimiser step: each epoch a fresh shuffle, cut into steps of `batch`."""
    steps = []
    for _ in range(epochs):
        order = rng.sample(range(n), n)
        steps += [order[i : i + batch] for i in range(0, n, batch)]
    return steps


def micro_batches(step: list[int], lengths: Sequence[int], size: int, prefixes: Sequence = ()) -> list[list[int]]:
    """The step's examples cut into forward passes of `size`, each of one prefix and of similar length.

    With passes of one there is no padding to save, so the step's own order is kept.
    """
    if size == 1:
        return [[i] for i in step]
    passes: list[list[int]] = []
    for i in sorted(step, key=lambda i: (prefixes[i] if prefixes else (), lengths[i])):
        if passes and len(passes[-1]) < size and (not prefixes or prefixes[passes[-1][0]] == prefixes[i]):
            passes[-1].append(i)
        else:
            passes.append([i])
    return passes


def token_weights(lengths: Sequence[int], settings: LoraSettings) -> list[list[float]]:
    """Each target token's weight in the loss of a step whose targets have these lengths (they sum to 1).

    "tokens": (1 - w) / (target tokens in the step) each; "replies": (1 - w) / (examples x its length) each;
    and w / examples more on each first token, w = verdict_weight.
    """
    w, total = settings.verdict_weight, sum(lengths)
    rows = []
    for n in lengths:
        row = [(1 - w) / (total if settings.average == "tokens" else len(lengths) * n)] * n
        row[0] += w / len(lengths)
        rows.append(row)
    return rows


def left_padded(rows: list[tuple[list[int], list[int]]], pad: int, device, past: int = 0):
    """(ids, labels, attention mask, position ids) of (prompt, target) rows, padded on the left.

    subtle: left padding puts every target at the end of its row, so the model need only compute logits for
    the last few positions (`logits_to_keep`): over a 49k vocabulary that is a large share of the work.
    Positions count from each row's first real token, so padding does not shift them; `past` tokens of a
    cached prefix come before every row (in the mask, and positions start after them).
    """
    import torch

    width = max(len(p) + len(t) for p, t in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, (prompt, target) in enumerate(rows):
        seq = prompt + target
        ids[r, width - len(seq) :] = torch.tensor(seq)
        labels[r, width - len(target) :] = torch.tensor(target)
        mask[r, width - len(seq) :] = 1
    positions = past + (mask.cumsum(dim=1) - 1).clamp(min=0)
    mask = torch.cat([torch.ones((len(rows), past), dtype=torch.long), mask], dim=1)
    return ids.to(device), labels.to(device), mask.to(device), positions.to(device)


def target_losses(model, rows: list[tuple[list[int], list[int]]], device, cache=None, past: int = 0):
    """Cross-entropy of every target token of (prompt, target) rows, run as one left-padded forward pass.

    Returns [rows, longest target]: each row's target in its last columns, zeros before. cache: the KV cache of
    `past` prefix tokens that every row continues (repeated to the rows' number here).
    """
    import torch.nn.functional as F

    ids, labels, mask, positions = left_padded(rows, 0, device, past)  # pads are masked out: any id will do
    if cache is not None and len(rows) > 1:
        cache.batch_repeat_interleave(len(rows))
    keep = max(len(t) for _, t in rows) + 1
    logits = model(
        input_ids=ids,
        attention_mask=mask,
        position_ids=positions,
        cache=cache,
        use_cache=cache is not None,
        logits_to_keep=keep,
    ).logits
    # the logit at position j predicts token j + 1: the kept logits but the last predict the last keep - 1 tokens
    flat = F.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(), labels[:, 1 - keep :].reshape(-1), reduction="none"
    )
    return flat.view(len(rows), keep - 1)


def train_adapter(
    model,
    encoded: Sequence[Encoded],
    settings: LoraSettings,
    progress: Callable[[int, dict], None] = lambda done, stats: None,
):
    """Wrap model in a fresh peft LoRA and train it; returns (peft model, TrainLog).

    The model is changed in place (peft injects its layers), so pass a copy to keep the base.
    progress(examples done, stats) is called after each forward pass.
    """
    import torch
    from peft import LoraConfig, get_peft_model

    settings.check()
    if not encoded:
        raise ValueError("No training examples.")
    torch.manual_seed(settings.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    config = LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=list(settings.target_modules),
        task_type="CAUSAL_LM",
    )
    peft_model = get_peft_model(model, config).to(device)
    lengths = [len(e.rest) + len(e.target) for e in encoded]
    keys = [tuple(e.prefix) for e in encoded]
    steps = step_batches(len(encoded), settings.epochs, settings.batch, random.Random(settings.seed))
    log = TrainLog(device=device)
    done = 0

    def run_step(number: int, step: list[int]) -> dict:
        nonlocal done
        weights = dict(zip(step, token_weights([len(encoded[i].target) for i in step], settings), strict=True))
        prefixes: dict[tuple[int, ...], object] = {}
        total, verdict = 0.0, 0.0
        for micro in micro_batches(step, lengths, settings.micro_batch, keys):
            key = keys[micro[0]]
            if key and key not in prefixes:
                # subtle: the prefix is run in eval mode (no dropout) and without gradients; the examples' own
                # tokens still attend to it through the current LoRA weights
                peft_model.eval()
                with torch.no_grad():
                    out = peft_model(input_ids=torch.tensor([key], device=device), use_cache=True)
                prefixes[key] = out.cache if hasattr(out, "cache") else out.past_key_values
                log.tokens += len(key)
            peft_model.train()
            rows = [(encoded[i].rest, encoded[i].target) for i in micro]
            cache = copy.deepcopy(prefixes[key]) if key else None
            losses = target_losses(peft_model, rows, device, cache, len(key))
            width = losses.shape[1]
            scale = torch.tensor([[0.0] * (width - len(weights[i])) + weights[i] for i in micro], device=device)
            loss = (losses * scale).sum()
            loss.backward()
            total += float(loss.detach())
            verdict += sum(float(losses[r, width - len(t)].detach()) for r, (_, t) in enumerate(rows)) / len(step)
            log.tokens += sum(len(p) + len(t) for p, t in rows)
            done += len(micro)
            progress(done, {"step": f"{number + 1}/{len(steps)}", "loss": round(total, 3)})
        return {
            "epoch": round((number + 1) * settings.epochs / len(steps), 3),
            "examples": len(step),
            "loss": round(total, 4),
            "verdict_loss": round(verdict, 4),  # mean loss of the targets' first tokens
        }

    start = time.perf_counter()
    log.steps = optimise(peft_model, steps, run_step, Schedule(settings.lr, settings.warmup_steps))
    log.seconds = time.perf_counter() - start
    peft_model.eval()
    return peft_model, log


def save_adapter(
    out: Path, peft_model, card: dict, log: TrainLog, readme: str, card_file: str, base_model: str | None = None
) -> None:
    """The adapter in peft's format, its card (JSON and README) and every step of the log.

    base_model names the base in adapter_config.json instead of the local folder it was loaded from.
    """
    out.mkdir(parents=True, exist_ok=True)
    if base_model:
        for config in peft_model.peft_config.values():
            config.base_model_name_or_path = base_model
    peft_model.save_pretrained(out)
    (out / card_file).write_text(json.dumps(card, indent=1) + "\n")
    (out / LOG_FILE).write_text(json.dumps(asdict(log), indent=1) + "\n")
    (out / "README.md").write_text(readme)
