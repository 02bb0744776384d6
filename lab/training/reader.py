"""`python -m lab train reader`: train the abstention-tuned reader with LoRA and calibrate its threshold.

The model learns the demo's reply on windows from reader_data.py, with the one LoRA trainer (lora.py) under
`READER_LORA`: loss on the reply tokens only, each window's reply weighing the same, half of it on the first
reply token (ANSWER vs NOT, from which the demo reads its verdict), and the system prompt and worked examples
run once per step as a shared prefix. Then the threshold on P(ANSWER) is chosen on held-out dev windows
(calibration.py), and the adapter is written with its card (raqa_reader.json, README.md) and training log.
Left out here: the training loop (lora.py), the threshold rule (calibration.py), test questions (the
comparison is in experiments.reader_comparison) and any UI.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from lab.evaluation.positives import PositiveIndex, sample_windows
from lab.training.calibration import base_scores, calibrate
from lab.training.lora import (
    LOG_FILE,
    Encoded,
    Example,
    LoraSettings,
    TrainLog,
    encode_example,
    save_adapter,
    train_adapter,
)
from lab.training.reader_data import PAGES_RETRIEVED as TRAIN_K
from lab.training.reader_data import TRAIN_DATASETS, WindowExample, build_examples, dev_split, example_messages, mix
from raqa.config import RunSettings
from raqa.reading.readers import READER_CARD
from raqa.retrieval.corpus import load_corpus
from raqa.retrieval.index import load_or_build

READER_LABEL = "Abstention-tuned reader"
CALIBRATION_PER_KIND = 20  # held-out dev windows of each kind per dataset


def encode_window(example: WindowExample, tokenizer, page_tokens: int, shots: int) -> Encoded:
    """Token ids of one window: the chat prompt exactly as the demo sends it (system prompt and worked examples
    as the shared prefix), then the target reply."""

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    messages = example_messages(example, page_tokens, count, shots)
    return encode_example(Example(tuple(messages), example.target), tokenizer, shared_prefix=True)


def loss_summary(log: TrainLog, tail: int = 5) -> dict:
    """Mean loss of the first and last few steps: the card's one-line account of the loss curve."""
    losses = [s["loss"] for s in log.steps]
    verdicts = [s["verdict_loss"] for s in log.steps]
    n = min(tail, len(losses)) or 1

    def mean(values):
        return round(sum(values) / len(values), 4) if values else math.nan

    return {
        "first_steps_loss": mean(losses[:n]),
        "last_steps_loss": mean(losses[-n:]),
        "first_steps_verdict_loss": mean(verdicts[:n]),
        "last_steps_verdict_loss": mean(verdicts[-n:]),
        "steps": len(losses),
    }


def _readme(card: dict, command: str) -> str:
    t, c, data, lora = card["training"], card["calibration"], card["training"]["data"], card["training"]["lora"]
    loss = t["loss"]
    rows = "\n".join(
        f"| {k} | {v} |" for k, v in {**data["by_dataset_and_kind"], **data["by_window_size_and_kind"]}.items()
    )
    positions = ", ".join(f"{k}: {v}" for k, v in data["answer_page_position"].items())
    return f"""# Abstention-tuned reader (LoRA on SmolLM2-135M-Instruct)

A peft LoRA adapter for the demo's default model, trained to reply "NOT FOUND" on windows whose pages do not
state the answer, and to cite page, sentence and answer on windows that do. Made by:

    {command}

## Data (dev questions only: NQ-open dev and TriviaQA dev from the pyserini 0.17.0 jar)
{data["windows"]} windows from {data["questions"]} questions: for each question one positive window (a visible
sentence states a gold answer and is about the question) and one negative window (no page mentions a gold
answer), over the question's top-{t["k"]} BM25 pages, window sizes 1-3, forward or backward order, the demo's
prompt with {lora["shots"]} worked examples, pages cut to {lora["page_tokens"]} tokens.

| windows | count |
|---|---|
{rows}

Place of the answer page in positive windows: {positions}.

## Training
LoRA r={lora["rank"]}, alpha={lora["alpha"]}, dropout={lora["dropout"]}, on {", ".join(lora["target_modules"])};
AdamW lr={lora["lr"]} (warm-up {lora["warmup_steps"]} steps, then linear decay), {lora["epochs"]} epoch(s),
{lora["batch"]} windows per step, {loss["steps"]} steps. Loss on the reply tokens only:
{1 - lora["verdict_weight"]:.2f} x mean over the reply + {lora["verdict_weight"]:.2f} x the first reply token
(ANSWER vs NOT, the token the demo reads its verdict from).
Device {t["device"]}, {t["seconds"]:.0f} s of training ({t["tokens"]:,} tokens, {t["tokens"] / max(t["seconds"], 1e-9):.0f} tokens/s),
{card["wall_seconds"]:.0f} s for the whole command.
Loss: {loss["first_steps_loss"]} over the first steps, {loss["last_steps_loss"]} over the last
(first-token loss {loss["first_steps_verdict_loss"]} -> {loss["last_steps_verdict_loss"]}); every step is in `{LOG_FILE}`.

## Threshold
`answer_threshold` = {card["answer_threshold"]} on P(ANSWER) / (P(ANSWER) + P(NOT)), chosen on held-out dev windows
({c["negatives"]} negative, {c["positives"]} positive; windows of 3 over the top 15 pages, pages cut to
{card["page_tokens"]} tokens, {card["shots"]} worked examples, as the demo reads them) by this rule: {c["rule"]}.
At that threshold, on those windows: false answers on negative windows {c["false_answer_rate"]:.1%} (base model at
0.5: {c["base_false_answer_rate"]:.1%}), exact match on positive windows {c["exact_match"]:.1%} (base:
{c["base_exact_match"]:.1%}); P(ANSWER) separates the two kinds with AUC {c["auc"]:.2f}.
{_separation_note(c)}
The comparison on test questions is `assets/results/reader_comparison-triviaqa.json`.
"""


def _separation_note(calibration: dict) -> str:
    """What the AUC means for the threshold, in one paragraph of the card."""
    if calibration["auc"] >= 0.6:
        return "The threshold trades false answers against answers on positive windows along that separation."
    return (
        f"Caution: with an AUC of {calibration['auc']:.2f}, P(ANSWER) hardly tells the two kinds of window apart, so the "
        "threshold mostly sets how often the reader answers at all, not which windows it answers; fewer false answers "
        "then come with fewer answers on positive windows too, and a target met on "
        f"{calibration['positives']} + {calibration['negatives']} windows may not hold on others."
    )


def train_reader(
    out: Path,
    windows_total: int,
    settings: LoraSettings,
    cache_dir: Path,
    command: str,
    calibration_per_kind: int = CALIBRATION_PER_KIND,
    say: Callable[[str], None] = print,
) -> dict:
    """Build the data, measure the base model on held-out windows, train, calibrate, write the reader folder."""
    from tqdm import tqdm

    from raqa.models.local import TransformersBackend  # lazy: imports torch

    wall = time.perf_counter()
    pages = load_corpus(None)
    index = load_or_build(pages, cache_dir, progress=lambda message, fraction: say(message))
    positives = PositiveIndex(pages)
    backend = TransformersBackend.load(None, None, cache_dir, say)
    split = dev_split(settings.seed)
    say("Building training windows from dev questions")
    examples = build_examples(
        {d: train for d, (train, _) in split.items()},
        index,
        positives,
        count_tokens=backend.count_tokens,
        per_kind=max(1, windows_total // (2 * len(TRAIN_DATASETS))),
        page_tokens=settings.page_tokens,
        seed=settings.seed,
    )
    data_mix = mix(examples)
    say(f"Training windows: {json.dumps(data_mix)}")
    demo = RunSettings(shots=settings.shots)
    held_neg, held_pos = [], []
    for dataset in TRAIN_DATASETS:
        negative, positive = sample_windows(split[dataset][1], index, positives, demo, calibration_per_kind)
        held_neg += negative
        held_pos += positive
    say(f"Scoring the base model on {len(held_neg)} negative and {len(held_pos)} positive held-out dev windows")
    base = base_scores(held_pos, held_neg, backend, demo)
    encoded = [encode_window(e, backend.tokenizer, settings.page_tokens, settings.shots) for e in examples]
    with tqdm(total=len(encoded) * settings.epochs, desc="train reader", unit="window") as bar:

        def progress(done: int, stats: dict) -> None:
            bar.update(done - bar.n)
            bar.set_postfix(stats)

        peft_model, log = train_adapter(backend.model, encoded, settings, progress)
    for s in log.steps:
        say(f"step {s['step']}: loss {s['loss']}, first-token loss {s['verdict_loss']}, {s['seconds']} s")
    merged = copy.deepcopy(peft_model).merge_and_unload().to("cpu").eval()
    tuned = TransformersBackend(merged, backend.tokenizer, "tuned")
    say("Calibrating the threshold on the held-out dev windows")
    calibration = calibrate(held_pos, held_neg, base, tuned, demo)
    card = {
        "label": READER_LABEL,
        "answer_threshold": calibration.threshold,
        "shots": settings.shots,
        "page_tokens": demo.page_tokens,
        "base_model": backend.name,
        "command": command,
        "wall_seconds": round(time.perf_counter() - wall, 1),
        "calibration": asdict(calibration),
        "training": {
            "data": data_mix,
            "k": TRAIN_K,
            "lora": settings.card(),
            "device": log.device,
            "seconds": round(log.seconds, 1),
            "tokens": log.tokens,
            "loss": loss_summary(log),
        },
    }
    save_adapter(out, peft_model, card, log=log, readme=_readme(card, command), card_file=READER_CARD)
    return card
