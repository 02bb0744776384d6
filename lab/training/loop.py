"""The one optimisation loop every trainer runs: the LoRA reader, the Adapt-LLM adapters and the answer judge.

AdamW over the model's trainable weights; the learning rate warms up linearly over `warmup_steps` optimiser
steps and then decays linearly to zero at the end of the plan; gradients are clipped to norm 1; one optimiser
step per planned step. What a step computes is the trainer's: `run_step(number, step)` runs its forward and
backward passes and returns the step's figures (its loss, ...), which join the step's number, learning rate and
seconds in the returned log. With a checkpoint file and `every`, the model, the optimiser and the log are saved
every that many steps; a checkpoint found there at the start is resumed and the steps already done are skipped,
so a stopped run ends where an unbroken one does (dropout draws after the restart differ).

Left out here: the examples, the loss and the model (lora.py, judge.py), saving the result.

Example:
    >>> log = optimise(model, plan, run_step, Schedule(lr=3e-4, warmup_steps=4))  # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Schedule:
    lr: float  # peak learning rate
    warmup_steps: int = 0  # linear warm-up over this many optimiser steps, then linear decay to 0
    weight_decay: float = 0.0
    every: int = 0  # steps between resumable checkpoints (0: none)


def learning_rate(step: int, total: int, schedule: Schedule) -> float:
    """The rate of optimiser step `step` (from 0) of `total`: (step + 1) / warm-up of the peak while warming up,
    then falling linearly to 0 after the last step."""
    lr, warmup = schedule.lr, schedule.warmup_steps
    if step < warmup:
        return lr * (step + 1) / warmup
    return lr * max(0, total - step) / max(1, total - warmup)


def optimise(
    model,
    plan: Sequence,
    run_step: Callable[[int, object], dict],
    schedule: Schedule,
    checkpoint: Path | None = None,
) -> list[dict]:
    """Run every step of plan; returns one record per step ({"step", the step's figures, "lr", "seconds"}),
    those of a resumed checkpoint first. Sets nothing else on the model: train/eval modes are the caller's."""
    import torch

    trainable = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(trainable, lr=schedule.lr, weight_decay=schedule.weight_decay)
    log: list[dict] = []
    if checkpoint is not None and checkpoint.is_file():
        state = torch.load(checkpoint, weights_only=False)
        if state["steps_planned"] != len(plan):
            raise ValueError(
                f"{checkpoint} is from another run ({state['steps_planned']} steps planned, not {len(plan)})"
            )
        model.load_state_dict(state["model"])
        optimiser.load_state_dict(state["optimiser"])
        log = state["log"]
    started = time.perf_counter() - (log[-1]["seconds"] if log else 0.0)
    for number in range(len(log), len(plan)):
        lr = learning_rate(number, len(plan), schedule)
        for group in optimiser.param_groups:
            group["lr"] = lr
        figures = run_step(number, plan[number])
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimiser.step()
        optimiser.zero_grad(set_to_none=True)
        log.append({"step": number + 1, **figures, "lr": lr, "seconds": round(time.perf_counter() - started, 1)})
        if checkpoint is not None and schedule.every and (number + 1) % schedule.every == 0:
            _save_checkpoint(
                checkpoint, {"model": model.state_dict(), "optimiser": optimiser.state_dict()}, log, len(plan)
            )
    return log


def _save_checkpoint(path: Path, state: dict, log: list[dict], steps_planned: int) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    torch.save({**state, "log": log, "steps_planned": steps_planned}, partial)
    partial.replace(path)  # atomic: a run stopped while saving keeps the previous checkpoint
