"""Mined negatives: the answer-free pages a judge wrongly passes, highest first, never an answer-bearing page;
every reading cached, so a second mining (or one resumed after a stop) reads nothing again."""

from __future__ import annotations

import json

from raqa.evaluation.positives import PositiveIndex
from raqa.evaluation.questions import QAItem
from raqa.reading.judge import JudgeReading
from raqa.training.judge_data import build_pairs
from raqa.training.judge_mining import judge_fingerprint, mine_negatives

MONA = QAItem(
    "t-1", "Who painted the Mona Lisa that hangs in a museum, and is it older than chess?", ("Leonardo da Vinci",)
)


class ScriptedJudge:
    """Passes the pages named in `scores` with that p_answer; every other page reads 0.1. Counts the pages read."""

    def __init__(self, scores: dict[str, float], threshold: float = 0.5):
        self.scores, self.threshold, self.pages_read = scores, threshold, 0

    def read(self, question, pages):
        self.pages_read += len(pages)
        return [JudgeReading(self.scores.get(p.page.id, 0.1), "x", "x.") for p in pages]


def test_mining_keeps_the_wrongly_passed_answer_free_pages_highest_first_and_caches_every_reading(
    tmp_path, tiny_pages, tiny_index
) -> None:
    positives = PositiveIndex(tiny_pages)
    pairs, _ = build_pairs({"tiny": [MONA]}, tiny_index, positives, per_question=1, seed=0)
    # p3 (Mona Lisa) holds the answer: passing it is right, so it is never mined; p6 and p5 are wrong passes
    judge = ScriptedJudge({"p3": 0.99, "p6": 0.7, "p5": 0.9, "p1": 0.4})
    cache = tmp_path / "mined.json"
    mined, report = mine_negatives(judge, pairs, tiny_index, positives, 1, cache)
    assert [(p.page.id, p.positive, p.question_id) for p in mined] == [("p5", False, "t-1")]
    assert report["passed"] == 2 and report["kept"] == 1 and report["pages_read"] == 7 == judge.pages_read
    assert "p3" not in {pid for pid, _ in json.loads(cache.read_text())["t-1"]}

    again = ScriptedJudge({})  # a second mining with more per question reads nothing: the cache answers
    more, report = mine_negatives(again, pairs, tiny_index, positives, 5, cache)
    assert again.pages_read == 0 and report["pages_from_cache"] == 7
    assert [p.page.id for p in more] == ["p5", "p6"]  # the cached scores, highest first; p1 is below threshold


def test_a_torn_cache_is_read_again_not_trusted(tmp_path, tiny_pages, tiny_index) -> None:
    positives = PositiveIndex(tiny_pages)
    pairs, _ = build_pairs({"tiny": [MONA]}, tiny_index, positives, per_question=1, seed=0)
    cache = tmp_path / "mined.json"
    cache.write_text('{"t-1": [["p5", 0.')
    judge = ScriptedJudge({"p6": 0.8})
    mined, _ = mine_negatives(judge, pairs, tiny_index, positives, 2, cache)
    assert judge.pages_read == 7 and [p.page.id for p in mined] == ["p6"]


def test_the_cache_is_named_after_the_judge_s_weights_and_threshold(tmp_path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"weights one")
    first = judge_fingerprint(tmp_path, 0.5)
    assert judge_fingerprint(tmp_path, 0.5) == first and judge_fingerprint(tmp_path, 0.6) != first
    (tmp_path / "model.safetensors").write_bytes(b"weights two")
    assert judge_fingerprint(tmp_path, 0.5) != first


def test_per_question_the_run_ends_on_the_first_page_reaching_the_cut_and_is_scored_on_it(
    tiny_pages, tiny_index, monkeypatch
) -> None:
    from raqa.training import judge_eval

    class Reader:  # for the Mona Lisa: "Leonardo da Vinci" on its page (p = 0.6); else "chess" (p = 0.3)
        def read(self, question, hits):
            mona = question == MONA.question
            return [
                JudgeReading(0.6, "Leonardo da Vinci", "x.")
                if mona and h.page.id == "p3"
                else JudgeReading(0.3, "chess", "x.")
                for h in hits
            ]

    everest = QAItem("t-3", "Who first reached the summit of Mount Everest?", ("Edmund Hillary",))
    monkeypatch.setattr(judge_eval, "load_questions", lambda dataset, split, limit, seed: [MONA, everest])
    result = judge_eval.question_level(Reader(), tiny_index, "tiny", 2)
    assert result["questions"] == 2 and result["best_right"]["value"] == 0.5
    assert result["auc"]["value"] == 1.0  # the right best extraction (0.6) above the wrong one (0.3)
    assert result["first_at"]["0.5"]["answered"]["value"] == 0.5  # Everest: no page reaches 0.5
    assert result["first_at"]["0.5"]["precision"] == {**result["first_at"]["0.5"]["precision"], "value": 1.0}
    assert result["first_at"]["0.7"]["answered"]["value"] == 0.0 and result["first_at"]["0.7"]["precision"]["n"] == 0
