"""LoRA training of the abstention-tuned reader, and the calibration of its answer threshold.

The model learns the demo's reply on windows from reader_data.py: the loss is on the reply tokens only,
and the first reply token (ANSWER vs NOT, from which the demo reads its verdict) gets its own share of
the loss (`verdict_weight`), because otherwise it is one token among ~20-60 and gets almost none of the
gradient. The system prompt and worked examples are the same for every window, so each optimiser step
runs them once without gradients and every window of the step continues from that cache: on a CPU this
roughly halves the cost of a step. The same code runs on a GPU when torch finds one.

A 135M model trained this way still leans towards one verdict (DATA.md: plain LoRA collapsed to always
"NOT FOUND" under greedy decoding), so the verdict threshold on P(ANSWER) is chosen afterwards on held-out
dev windows (`choose_threshold`) and stored with the adapter. Left out here: test questions (the
comparison is in experiments.reader_comparison) and any UI.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from raqa.evaluation.metrics import auc
from raqa.reading.readers import CARD_FILE
from raqa.training.reader_data import WindowExample, example_messages

LOG_FILE = "training_log.json"


@dataclass(frozen=True)
class LoraSettings:
    rank: int = 8  # r, as in the paper
    alpha: int = 16
    dropout: float = 0.05
    lr: float = 3e-4
    epochs: int = 1
    accumulation: int = 4  # windows per optimiser step
    warmup_steps: int = 4  # linear warm-up, then linear decay to 0
    verdict_weight: float = 0.5  # share of the loss on the first reply token; the rest is the mean over the reply
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    page_tokens: int = 200  # pages cut to this many tokens in training windows (shorter = faster)
    shots: int = 2  # worked examples in the prompt: the demo's default
    seed: int = 0


@dataclass
class Encoded:
    prefix: list[int]  # system prompt and worked examples (shared by every window)
    rest: list[int]  # the window's pages, question and the assistant header
    target: list[int]  # the reply, ending with the end-of-turn token


@dataclass
class TrainLog:
    steps: list[dict] = field(default_factory=list)  # per optimiser step: loss, verdict loss, seconds, tokens
    seconds: float = 0.0
    tokens: int = 0
    device: str = "cpu"


def _ids(value) -> list[int]:
    return list(value["input_ids"] if hasattr(value, "keys") else value)


def encode(example: WindowExample, tokenizer, page_tokens: int, shots: int) -> Encoded:
    """Token ids of one window: the chat prompt exactly as the demo sends it, then the target reply."""

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    messages = example_messages(example, page_tokens, count, shots)
    prompt = _ids(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True))
    prefix = _ids(tokenizer.apply_chat_template(messages[:-1], tokenize=True))
    if prompt[: len(prefix)] != prefix:  # a template that does not extend its prefix: no sharing
        prefix = []
    target = tokenizer(example.target, add_special_tokens=False)["input_ids"] + [
        tokenizer.convert_tokens_to_ids("<|im_end|>")
    ]
    return Encoded(prefix, prompt[len(prefix) :], list(target))


def reply_loss(logits, target, verdict_weight: float):
    """(1 - w) * mean cross-entropy over the reply + w * cross-entropy of its first token.

    logits: [len(target), vocab], the predictions for each target token.
    """
    import torch.nn.functional as F

    losses = F.cross_entropy(logits.float(), target, reduction="none")
    return (1 - verdict_weight) * losses.mean() + verdict_weight * losses[0], losses[0]


def _schedule(step: int, total: int, warmup: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def train_lora(
    model,
    encoded: Sequence[Encoded],
    settings: LoraSettings,
    progress: Callable[[int, dict], None] = lambda windows, stats: None,
):
    """Wrap model in a peft LoRA and train it on the encoded windows; returns (peft model, TrainLog).

    progress(windows done, stats) is called after each window.
    """
    import random

    import torch
    from peft import LoraConfig, get_peft_model

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
    order = [
        i
        for _ in range(settings.epochs)
        for i in random.Random(settings.seed).sample(range(len(encoded)), len(encoded))
    ]
    batches = [order[i : i + settings.accumulation] for i in range(0, len(order), settings.accumulation)]
    log = TrainLog(device=device)
    start = time.perf_counter()
    done = 0
    for step, batch in enumerate(batches):
        for group in optimiser.param_groups:
            group["lr"] = settings.lr * _schedule(step, len(batches), settings.warmup_steps)
        prefixes: dict[tuple, object] = {}
        total, verdict, tokens = 0.0, 0.0, 0
        for i in batch:
            item = encoded[i]
            key = tuple(item.prefix)
            if item.prefix and key not in prefixes:
                # subtle: the prefix is run in eval mode (no dropout) and without gradients; the window's own
                # tokens still attend to it through the current LoRA weights
                peft_model.eval()
                with torch.no_grad():
                    out = peft_model(input_ids=torch.tensor([item.prefix], device=device), use_cache=True)
                prefixes[key] = out.cache if hasattr(out, "cache") else out.past_key_values
                tokens += len(item.prefix)
            peft_model.train()
            ids = item.rest + item.target
            cache = copy.deepcopy(prefixes[key]) if item.prefix else None
            out = peft_model(input_ids=torch.tensor([ids], device=device), cache=cache, use_cache=bool(item.prefix))
            # the logit at position j predicts token j + 1: the reply starts after the last prompt token
            logits = out.logits[0, len(item.rest) - 1 : len(ids) - 1]
            loss, first = reply_loss(logits, torch.tensor(item.target, device=device), settings.verdict_weight)
            (loss / len(batch)).backward()
            total += float(loss.detach()) / len(batch)
            verdict += float(first.detach()) / len(batch)
            tokens += len(ids)
            done += 1
            progress(done, {"step": step + 1, "loss": round(float(loss.detach()), 3)})
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimiser.step()
        optimiser.zero_grad(set_to_none=True)
        log.tokens += tokens
        log.steps.append(
            {
                "step": step + 1,
                "windows": done,
                "loss": round(total, 4),
                "verdict_loss": round(verdict, 4),
                "lr": optimiser.param_groups[0]["lr"],
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
    log.seconds = time.perf_counter() - start
    peft_model.eval()
    return peft_model, log


# -- calibration -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Calibration:
    threshold: float
    rule: str  # which rule chose it (the target was met, or which fallback)
    false_answer_rate: float  # on the held-out negative windows, at the threshold
    exact_match: float  # on the held-out positive windows, at the threshold
    base_false_answer_rate: float  # the base model on the same windows at its default threshold 0.5
    base_exact_match: float
    auc: float  # how well P(ANSWER) separates positive from negative windows (0.5 = not at all)
    negatives: int
    positives: int


def _rates(t: float, p_neg, p_pos, exact_pos) -> tuple[float, float]:
    far = sum(p >= t for p in p_neg) / len(p_neg)
    em = sum(p >= t and e for p, e in zip(p_pos, exact_pos, strict=True)) / len(p_pos)
    return far, em


def choose_threshold(
    p_negative: Sequence[float],
    p_positive: Sequence[float],
    exact_positive: Sequence[bool],
    base_false_answer_rate: float,
    base_exact_match: float,
) -> tuple[float, str]:
    """The P(ANSWER) threshold that best meets the target on held-out windows.

    Target: at most half the base model's false-answer rate on negative windows, and exact match on
    positive windows (answering and right) at least the base model's. Among thresholds that meet it,
    the one with the highest exact match, then the lowest false-answer rate. If none does: the highest
    exact match among those that halve false answers; failing that, the largest gap between positive
    windows answered correctly and negative windows answered. Candidates lie halfway between observed
    scores, so the choice does not sit on one window's score.

    Example:
        >>> choose_threshold([0.2, 0.3], [0.6, 0.7], [True, False], 1.0, 0.5)
        (0.45, 'target met')
    """
    scores = sorted({0.0, 1.0, *p_negative, *p_positive})
    candidates = [round((a + b) / 2, 6) for a, b in zip(scores, scores[1:], strict=False)] or [0.5]
    rated = [(t, *_rates(t, p_negative, p_positive, exact_positive)) for t in candidates]
    halved = [r for r in rated if r[1] <= base_false_answer_rate / 2]
    met = [r for r in halved if r[2] >= base_exact_match]
    if met:
        best = max(met, key=lambda r: (r[2], -r[1], -r[0]))
        return best[0], "target met"
    if halved:
        best = max(halved, key=lambda r: (r[2], -r[1], -r[0]))
        return best[0], "false answers halved; exact match below the base model"
    best = max(rated, key=lambda r: (r[2] - r[1], -r[0]))
    return best[0], "target not reachable; best exact match minus false-answer rate"


def window_scores(windows, backend, settings, answer: bool) -> list[tuple[float, object]]:
    """(P(ANSWER), WindowVerdict) for each (item, window): forced to answer, or forced to decline (score only)."""
    from raqa.reading.engine import window_verdict

    forced = settings.replace(answer_threshold=0.0 if answer else 2.0)
    scored = []
    for item, window in windows:
        verdict = window_verdict(item.question, window, backend, forced)
        scored.append((verdict.p_answer if verdict.p_answer is not None else 0.0, verdict))
    return scored


def calibrate(positive_windows, negative_windows, base_scores: dict, backend, settings) -> Calibration:
    """Score the tuned backend on held-out windows and choose its threshold against the base model's scores.

    base_scores: {"p_negative", "p_positive", "exact_positive"} of the base model on the same windows.
    """
    from raqa.evaluation.metrics import exact_match

    neg = [p for p, _ in window_scores(negative_windows, backend, settings, answer=False)]
    pos = window_scores(positive_windows, backend, settings, answer=True)
    p_pos = [p for p, _ in pos]
    exact = [exact_match(v.reply.answer, item.answers) for (item, _), (_, v) in zip(positive_windows, pos, strict=True)]
    base_far, base_em = _rates(0.5, base_scores["p_negative"], base_scores["p_positive"], base_scores["exact_positive"])
    threshold, rule = choose_threshold(neg, p_pos, exact, base_far, base_em)
    far, em = _rates(threshold, neg, p_pos, exact)
    return Calibration(threshold, rule, far, em, base_far, base_em, auc(neg, p_pos), len(neg), len(pos))


def base_scores(positive_windows, negative_windows, backend, settings) -> dict:
    from raqa.evaluation.metrics import exact_match

    neg = [p for p, _ in window_scores(negative_windows, backend, settings, answer=False)]
    pos = window_scores(positive_windows, backend, settings, answer=True)
    exact = [exact_match(v.reply.answer, item.answers) for (item, _), (_, v) in zip(positive_windows, pos, strict=True)]
    return {"p_negative": neg, "p_positive": [p for p, _ in pos], "exact_positive": exact}


def write_reader(
    out: Path, peft_model, card: dict, log: TrainLog, readme: str, label: str = "Abstention-tuned reader"
) -> None:
    """Save the adapter in peft format, its raqa_reader.json, the training log and the README card."""
    out.mkdir(parents=True, exist_ok=True)
    peft_model.save_pretrained(out)
    (out / CARD_FILE).write_text(json.dumps({"label": label, **card}, indent=1) + "\n")
    (out / LOG_FILE).write_text(json.dumps(asdict(log), indent=1) + "\n")
    (out / "README.md").write_text(readme)


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


# -- the whole command ---------------------------------------------------------------------------------
CALIBRATION_PER_KIND = 20  # held-out dev windows of each kind per dataset


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
{lora["accumulation"]} windows per step, {loss["steps"]} steps. Loss on the reply tokens only:
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

    from raqa.config import RunSettings
    from raqa.evaluation.positives import PositiveIndex, sample_windows
    from raqa.models.local import TransformersBackend
    from raqa.retrieval.corpus import load_corpus
    from raqa.retrieval.index import load_or_build
    from raqa.training.reader_data import TRAIN_DATASETS, build_examples, dev_split, mix
    from raqa.training.reader_data import K as TRAIN_K

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
        backend.count_tokens,
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
    encoded = [encode(e, backend.tokenizer, settings.page_tokens, settings.shots) for e in examples]
    with tqdm(total=len(encoded) * settings.epochs, desc="train-reader", unit="window") as bar:

        def progress(done: int, stats: dict) -> None:
            bar.update(done - bar.n)
            bar.set_postfix(stats)

        peft_model, log = train_lora(backend.model, encoded, settings, progress)
    for s in log.steps:
        say(f"step {s['step']}: loss {s['loss']}, first-token loss {s['verdict_loss']}, {s['seconds']} s")
    merged = copy.deepcopy(peft_model).merge_and_unload().to("cpu").eval()
    tuned = TransformersBackend(merged, backend.tokenizer, "tuned")
    say("Calibrating the threshold on the held-out dev windows")
    calibration = calibrate(held_pos, held_neg, base, tuned, demo)
    card = {
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
            "lora": {**asdict(settings), "target_modules": list(settings.target_modules)},
            "device": log.device,
            "seconds": round(log.seconds, 1),
            "tokens": log.tokens,
            "loss": loss_summary(log),
        },
    }
    write_reader(out, peft_model, card, log, _readme(card, command))
    return card
