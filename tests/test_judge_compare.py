"""compare-judges: judges measured in one run on the same test pages and questions, taking turns question by
question; its record names each judge; the Experiments figure draws one bar series a judge; bad folders are refused."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

from raqa.evaluation.questions import QAItem
from raqa.reading.judge import JudgeReading
from raqa.training import judge_compare
from raqa.training.judge_data import build_pairs
from raqa.web.figures_experiments import FIGURES
from raqa.web.figures_judge import judges_figure

ROOT = Path(__file__).resolve().parent.parent
MONA = QAItem(
    "t-1", "Who painted the Mona Lisa that hangs in a museum, and is it older than chess?", ("Leonardo da Vinci",)
)
EVEREST = QAItem("t-3", "Who first reached the summit of Mount Everest?", ("Edmund Hillary",))


class Judge:
    """Reads "Leonardo da Vinci" on the Mona Lisa page at p_mona, "chess" at 0.3 elsewhere; logs whose turn it is."""

    def __init__(self, name: str, p_mona: float, log: list):
        self.name, self.p_mona, self.log, self.threshold = name, p_mona, log, 0.5
        self.scale, self.bias = 1.0, 0.0  # p_answer = sigmoid(margin)
        self.card = {"command": f"python -m raqa train-judge --out {name}"}

    def read(self, question, pages):
        self.log.append((self.name, question))
        return [
            JudgeReading(self.p_mona, "Leonardo da Vinci", "x.")
            if getattr(p, "page", p).id == "p3"
            else JudgeReading(0.3, "chess", "x.")
            for p in pages
        ]

    def spans(self, question, pages):
        return [(math.log(r.p_answer / (1 - r.p_answer)), r.answer, r.sentence) for r in self.read(question, pages)]


def test_the_judges_take_turns_on_the_same_questions_and_each_gets_its_own_figures(
    tmp_path, tiny_pages, tiny_index, monkeypatch
) -> None:
    from raqa.evaluation.positives import PositiveIndex

    log: list = []
    judges = {"old": Judge("old", 0.6, log), "new": Judge("new", 0.95, log)}
    for name in judges:
        (tmp_path / name).mkdir()
    monkeypatch.setattr(judge_compare, "load_corpus", lambda path: tiny_pages)
    monkeypatch.setattr(judge_compare, "load_or_build", lambda pages, cache, progress: tiny_index)
    monkeypatch.setattr(judge_compare.AnswerJudge, "load", lambda folder: judges[Path(folder).name])
    pairs, _ = build_pairs({"tiny": [MONA]}, tiny_index, PositiveIndex(tiny_pages), per_question=1, seed=0)
    monkeypatch.setattr(judge_compare, "measurement_pairs", lambda index, positives, dataset, n, seed: pairs)
    monkeypatch.setattr(judge_compare, "load_questions", lambda dataset, split, limit, seed: [MONA, EVEREST])
    measured = judge_compare.compare([tmp_path / "old", tmp_path / "new"], tmp_path, 2, say=lambda message: None)

    turns = [name for name, question in log if question == EVEREST.question]  # the pairs are Mona Lisa's only
    assert turns == ["old", "new", "old", "new"]  # per dataset, each question read by both before the next
    old, new = (measured["results"]["nq"][str(tmp_path / name)] for name in ("old", "new"))
    assert old["per_question"]["best_right"]["value"] == new["per_question"]["best_right"]["value"] == 0.5
    assert old["per_question"]["first_at"]["0.9"]["answered"]["value"] == 0.0
    # the new judge passes the Mona Lisa page for both questions: right for one, wrong for Everest
    assert new["per_question"]["first_at"]["0.9"]["answered"]["value"] == 1.0
    assert new["per_question"]["first_at"]["0.9"]["precision"]["value"] == 0.5
    assert old["window"]["pairs"] == {"positive": 1, "negative": 1, "questions": 1}
    assert measured["judges"][str(tmp_path / "new")]["command"].endswith("--out new")

    record = {"sample": {"questions_per_set": 2}, "results": measured["results"]}
    assert FIGURES["judges"] is judges_figure
    figure = judges_figure(record)
    assert [trace.name for trace in figure.data] == [str(tmp_path / "old"), str(tmp_path / "new")] * 2
    assert all(len(trace.x) == 5 for trace in figure.data)


def test_compare_judges_refuses_missing_or_repeated_folders_before_loading_anything(tmp_path) -> None:
    for arguments in (["/nonexistent"], ["assets/judge", "assets/judge"], ["assets/judge", "--limit", "5"]):
        run = subprocess.run(
            [sys.executable, "-m", "raqa", "compare-judges", *arguments], capture_output=True, text=True, cwd=ROOT
        )
        assert run.returncode == 2 and run.stderr.startswith("error: "), (arguments, run.stderr)


def test_every_panel_of_the_judges_figure_reads_as_shares_on_one_scale() -> None:
    estimate = {"value": 0.5, "low": 0.4, "high": 0.6, "n": 10}
    result = {
        "window": {"auc": {"value": 0.8, "low": 0.7, "high": 0.9, "n_positive": 10}},
        "per_question": {
            "best_right": estimate,
            "first_at": {c: {"answered": estimate, "precision": estimate} for c in ("0.7", "0.9")},
        },
    }
    figure = judges_figure({"results": {"nq": {"a": result}, "triviaqa": {"a": result}}})
    axes = [figure.layout.yaxis, figure.layout.yaxis2]
    assert [a.tickformat for a in axes] == [".0%", ".0%"] and [tuple(a.range) for a in axes] == [(0, 1.1)] * 2
