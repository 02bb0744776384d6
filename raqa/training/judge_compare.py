"""`python -m raqa compare-judges`: two or more answer judges measured in one run on the same test questions.

Each judge reads the same NQ-open and TriviaQA test pairs (judge_eval.measure: answer-bearing vs answer-free pages,
each judge at its own card's threshold) and the same seeded test questions' top 15 pages
(judge_eval.question_level: the judge alone as a run meets it). The judges take turns question by question, so the
machine's load falls on each alike. The record (`assets/results/judges-nq+triviaqa.json`) names each judge's folder,
the command that made it and a hash of its weights; the Experiments tab draws it.
Left out here: training (judge.py) and the badge built on a judge (support_fit.py, eval-badges).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from raqa.evaluation.positives import PositiveIndex
from raqa.evaluation.questions import load_questions
from raqa.reading.judge import AnswerJudge
from raqa.retrieval.corpus import corpus_name, load_corpus
from raqa.retrieval.index import load_or_build
from raqa.training.judge_data import measurement_pairs
from raqa.training.judge_eval import measure, question_outcome, summarise_questions
from raqa.training.judge_mining import judge_fingerprint

DATASETS = ("nq", "triviaqa")


def compare(
    folders: Sequence[Path], cache_dir: Path, n: int, seed: int = 0, say: Callable[[str], None] = print
) -> dict:
    """Each judge's window and per-question measurement on the same pairs and questions, keyed by dataset, then
    by folder; and what each judge is."""
    pages = load_corpus(None)
    index = load_or_build(pages, cache_dir, progress=lambda message, fraction: say(message))
    positives = PositiveIndex(pages)
    judges = {str(folder): AnswerJudge.load(folder) for folder in folders}
    results: dict = {}
    for dataset in DATASETS:
        say(f"{dataset}: {n} answer-bearing and {n} answer-free test pages, each judge")
        pairs = measurement_pairs(index, positives, dataset, n, seed)
        results[dataset] = {name: {"window": measure(judge, pairs, judge.threshold)} for name, judge in judges.items()}
        say(f"{dataset}: {n} test questions' top 15 pages, the judges taking turns")
        outcomes: dict[str, list[dict]] = {name: [] for name in judges}
        for item in load_questions(dataset, "test", limit=n, seed=seed):
            for name, judge in judges.items():
                if (outcome := question_outcome(judge, index, item)) is not None:
                    outcomes[name].append(outcome)
        for name in judges:
            results[dataset][name]["per_question"] = summarise_questions(outcomes[name])
    about = {
        name: {
            "command": judge.card.get("command"),
            "weights": judge_fingerprint(Path(name), 0.0),
            "threshold": judge.threshold,
        }
        for name, judge in judges.items()
    }
    return {"judges": about, "results": results, "corpus": f"{corpus_name(None)} ({len(pages):,} pages)"}
