"""LoRA fine-tuning on (chat messages -> target reply) examples: the trainer behind train-adapt.

Each example is the chat prompt exactly as the model will see it at inference, followed by the target and
the end-of-turn token; the loss is the mean cross-entropy over target tokens only (the prompt is context,
not something to learn). An optimiser step sees `batch` examples (the effective batch), run as micro-batches
of similar length so little is spent on padding, with gradient accumulation in between. The learning rate
decays linearly to zero over the run, as transformers' Trainer does by default; the last step's weights are
kept. The same code runs on a GPU when torch finds one. Left out here: what the examples are
(adapt_data.py) and the abstention reader's window-specific trainer (training.py).

Example:
    >>> examples = [Example((({"role": "user", "content": "Q?"},)), "A")]  # doctest: +SKIP
    >>> peft_model, log = train(model, tokenizer, examples, LoraSettings(epochs=1))  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class LoraSettings:
    rank: int = 8  # r, as in the Adapt-LLM paper
    alpha: int = 16
    dropout: float = 0.05
    lr: float = 3e-4
    epochs: int = 3
    batch: int = 128  # examples per optimiser step (the effective batch)
    micro_batch: int = 8  # examples per forward pass; accumulation makes up the rest
    target_modules: tuple[str, ...] = ("q_proj", "v_proj")  # peft's default for Llama-style models
    seed: int = 0

    def check(self) -> None:
        for name in ("rank", "alpha", "epochs", "batch", "micro_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be 1 or more, got {getattr(self, name)}.")
        if not 0 < self.lr < 1:
            raise ValueError(f"lr must be between 0 and 1, got {self.lr}.")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be from 0 to below 1, got {self.dropout}.")


@dataclass(frozen=True)
class Example:
    messages: tuple[dict[str, str], ...]
    target: str


@dataclass
class TrainLog:
    steps: list[dict] = field(default_factory=list)  # per optimiser step: loss, lr, examples, seconds
    seconds: float = 0.0
    tokens: int = 0  # prompt + target tokens run through the model
    device: str = "cpu"


def encode(example: Example, tokenizer) -> tuple[list[int], list[int]]:
    """(prompt ids, target ids): the chat prompt with the assistant header, then the target and end of turn."""
    prompt = tokenizer.apply_chat_template(list(example.messages), add_generation_prompt=True, tokenize=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    end = tokenizer.eos_token_id if end is None or end == tokenizer.unk_token_id else end
    target = tokenizer(example.target, add_special_tokens=False)["input_ids"] + [end]
    return prompt, list(target)


def step_batches(n: int, settings: LoraSettings) -> list[list[int]]:
    """Example indices per optimiser step: each epoch a fresh seeded shuffle, cut into steps of `batch`."""
    rng = random.Random(settings.seed)
    steps = []
    for _ in range(settings.epochs):
        order = rng.sample(range(n), n)
        steps += [order[i : i + settings.batch] for i in range(0, n, settings.batch)]
    return steps


def micro_batches(step: list[int], lengths: Sequence[int], size: int) -> list[list[int]]:
    """The step's examples sorted by length and cut into micro-batches, so each pads little."""
    ordered = sorted(step, key=lambda i: lengths[i])
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def linear_lr(step: int, total: int, lr: float) -> float:
    return lr * (total - step) / total


def left_padded(rows: list[tuple[list[int], list[int]]], pad: int, device):
    """(ids, labels, attention mask, position ids) of a micro-batch, padded on the left.

    subtle: left padding puts every target at the end of its row, so the model need only compute logits for
    the last few positions (`logits_to_keep`): over a 49k vocabulary that is a large share of the work.
    Positions count from each row's first real token, so padding does not shift them.
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
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    return ids.to(device), labels.to(device), mask.to(device), positions.to(device)


def train(
    model,
    tokenizer,
    examples: Sequence[Example],
    settings: LoraSettings,
    progress: Callable[[int, dict], None] = lambda done, stats: None,
):
    """Wrap model in a fresh peft LoRA and train it; returns (peft model, TrainLog).

    The model is changed in place (peft injects its layers), so pass a copy to keep the base.
    progress(examples done, stats) is called after each micro-batch.
    """
    import torch
    import torch.nn.functional as F
    from peft import LoraConfig, get_peft_model

    settings.check()
    if not examples:
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
    trainable = [p for p in peft_model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(trainable, lr=settings.lr, weight_decay=0.0)
    encoded = [encode(e, tokenizer) for e in examples]
    lengths = [len(p) + len(t) for p, t in encoded]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    steps = step_batches(len(encoded), settings)
    log = TrainLog(device=device)
    start = time.perf_counter()
    done = 0
    peft_model.train()
    for number, step in enumerate(steps):
        lr = linear_lr(number, len(steps), settings.lr)
        for group in optimiser.param_groups:
            group["lr"] = lr
        targets = sum(len(encoded[i][1]) for i in step)
        total = 0.0
        for micro in micro_batches(step, lengths, settings.micro_batch):
            rows = [encoded[i] for i in micro]
            ids, labels, mask, positions = left_padded(rows, pad, device)
            keep = max(len(t) for _, t in rows) + 1
            logits = peft_model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=keep).logits
            # the logit at position j predicts token j + 1: the kept logits but the last predict the last keep - 1 tokens
            loss = F.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                labels[:, -(keep - 1) :].reshape(-1),
                reduction="sum",
            )
            (loss / targets).backward()
            total += float(loss.detach()) / targets
            log.tokens += int(mask.sum())
            done += len(micro)
            progress(done, {"step": f"{number + 1}/{len(steps)}", "loss": round(total, 3)})
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimiser.step()
        optimiser.zero_grad(set_to_none=True)
        log.steps.append(
            {
                "step": number + 1,
                "epoch": round((number + 1) * settings.epochs / len(steps), 3),
                "examples": len(step),
                "loss": round(total, 4),
                "lr": lr,
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
    log.seconds = time.perf_counter() - start
    peft_model.eval()
    return peft_model, log


def loss_curve(log: TrainLog) -> dict:
    """First and last step loss, and the mean loss of each epoch: the card's account of the curve."""
    by_epoch: dict[int, list[float]] = {}
    for s in log.steps:
        by_epoch.setdefault(max(1, math.ceil(s["epoch"] - 1e-9)), []).append(s["loss"])
    return {
        "first_step": log.steps[0]["loss"] if log.steps else None,
        "last_step": log.steps[-1]["loss"] if log.steps else None,
        "epoch_means": {str(e): round(sum(v) / len(v), 4) for e, v in sorted(by_epoch.items())},
        "steps": len(log.steps),
    }


def save(
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
    (out / "training_log.json").write_text(json.dumps(asdict(log), indent=1) + "\n")
    (out / "README.md").write_text(readme)
