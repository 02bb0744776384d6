"""Mined negatives for the answer judge: answer-free pages that a trained judge wrongly passes.

The judge's worst mistakes are same-kind pages: for "Which is the largest of Earth's oceans?" the Atlantic page
("...the second largest of the world's five oceans") reads like an answer. Random negatives rarely look like that,
so training on them teaches "which ocean does this page name", not "does this page answer the question". Mining
reads each training question's answer-free pages among BM25's top `k` (judge_data's negative label) with a trained
judge and keeps the `per_question` it scores highest among those at or above its threshold: the pages it would
wrongly show as answers.

Reading costs ~28 ms a page on 2 cores, so every reading is cached in one JSON file per judge (named after a hash
of its weights and threshold) and the cache is written as the mining goes: a stopped mining resumes where it was,
and a second run with another `per_question` reads nothing again.
Left out here: the balanced pairs (judge_data.py) and training (judge.py).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from raqa.evaluation.positives import PositiveIndex
from raqa.evaluation.records import write_json
from raqa.reading.judge import AnswerJudge
from raqa.retrieval.index import BM25Index
from raqa.training.judge_data import JudgePair, K, label_page

SAVE_EVERY = 100  # questions between cache writes


def judge_fingerprint(folder: Path, threshold: float) -> str:
    """A short hash of a judge folder's weights and its threshold: the cache's name for that judge."""
    digest = hashlib.sha256(f"{threshold:.6f}".encode())
    for weights in sorted(folder.glob("*.safetensors")):
        with weights.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def _load_cache(path: Path) -> dict[str, list[list]]:
    """The readings cached so far; none when the file is missing or torn (the mining then reads those again)."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def mine_negatives(
    judge,
    pairs: Sequence[JudgePair],
    index: BM25Index,
    positives: PositiveIndex,
    per_question: int,
    cache_file: Path,
    k: int = K,
    progress: Callable[[Iterable], Iterable] = lambda items: items,
) -> tuple[list[JudgePair], dict]:
    """Up to per_question mined negatives for each question of `pairs`, and the counts the card reports.

    Example (a judge that passes every page; the tiny corpus of the tests):
        >>> mined, report = mine_negatives(judge, pairs, index, positives, 1, tmp / "mined.json")  # doctest: +SKIP
        >>> [p.positive for p in mined], report["passed"]  # doctest: +SKIP
        ([False], 1)
    """
    questions: dict[str, JudgePair] = {}
    for pair in pairs:
        questions.setdefault(pair.question_id, pair)
    cached = _load_cache(cache_file)
    mined: list[JudgePair] = []
    read = passed = 0
    for count, (key, first) in enumerate(progress(list(questions.items())), start=1):
        hits = index.search(first.question, k)
        negatives = [h for h in hits if label_page(first.question, first.answers, h.page, positives)[0] == "negative"]
        if key not in cached:
            readings = judge.read(first.question, negatives)
            cached[key] = [[h.page.id, round(r.p_answer, 4)] for h, r in zip(negatives, readings, strict=True)]
            read += len(negatives)
            if count % SAVE_EVERY == 0:
                write_json(cache_file, cached)
        by_id = {h.page.id: h for h in negatives}
        wrong = sorted(
            ((p, page_id) for page_id, p in cached[key] if p >= judge.threshold and page_id in by_id), reverse=True
        )
        passed += len(wrong)
        for _, page_id in wrong[:per_question]:
            hit = by_id[page_id]
            mined.append(JudgePair(first.dataset, key, first.question, first.answers, hit.page, hit.rank, None, None))
    write_json(cache_file, cached)
    report = {
        "questions": len(questions),
        "pages_read": read,
        "pages_from_cache": sum(len(cached[key]) for key in questions) - read,
        "passed": passed,
        "kept": len(mined),
        "per_question": per_question,
        "k": k,
        "threshold": judge.threshold,
        "cache": cache_file.name,
    }
    return mined, report


def with_mined_negatives(
    pairs: list[JudgePair], miner: Path, index, positives, per_question: int, seed: int, cache_dir: Path
) -> tuple[list[JudgePair], dict]:
    """The pairs plus up to per_question mined negatives per question, reshuffled (seeded); and the report."""
    from tqdm import tqdm

    judge = AnswerJudge.load(miner)
    cache_file = cache_dir / "judge-mining" / f"{judge_fingerprint(Path(miner), judge.threshold)}.json"
    bar = lambda items: tqdm(items, desc="mining", unit="q", mininterval=2)  # noqa: E731
    mined, report = mine_negatives(judge, pairs, index, positives, per_question, cache_file, progress=bar)
    report["judge"] = str(miner)
    combined = pairs + mined
    random.Random(seed).shuffle(combined)
    return combined, report
