"""The support probability and the three badges: features among the retrieved pages, the model file, the fit and
its threshold rules, and runs whose green badge needs the support to reach the Answered threshold."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from lab.training.support_fit import QuestionRows, choose_thresholds, fit, fit_logistic, out_of_fold, summary
from raqa.config import RunSettings
from raqa.reading.engine import run
from raqa.reading.events import Final, WindowVerdict, from_json, to_json
from raqa.reading.judge import JudgeReading
from raqa.reading.support import FEATURES, SupportError, SupportModel, page_features, type_match, with_support
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import Hit
from raqa.web.page_text import badge_legend
from raqa.web.render import RunView

QUESTION = "Who painted the Mona Lisa?"


def hits_of(*texts: str) -> tuple[Hit, ...]:
    return tuple(Hit(i + 1, 10.0 - i, Page(f"p{i + 1}", f"Title {i + 1}", text)) for i, text in enumerate(texts))


def model(answered: float | None = 0.8, weak: float = 0.2, weights=None) -> SupportModel:
    """A support model that reads only logit_p (support = the judge's P), unless weights say otherwise."""
    weights = weights or (1.0,) + (0.0,) * (len(FEATURES) - 1)
    return SupportModel(tuple(weights), 0.0, (0.0,) * len(FEATURES), (1.0,) * len(FEATURES), weak, answered, {})


def test_features_weigh_what_the_other_pages_say():
    hits = hits_of("Leonardo da Vinci painted it.", "A painting by Leonardo da Vinci.", "Nothing here.")
    features = page_features(QUESTION, hits, [0.9, 0.6, 0.1], ["Leonardo da Vinci", "da Vinci", None], [None] * 3)
    first, second, third = features
    assert third is None  # no span: nothing to judge
    assert first["agreement"] == pytest.approx(math.log1p(0.6))  # page 2 reads an agreeing answer at P 0.6
    assert first["mentions"] == pytest.approx(math.log1p(1))  # page 2's text names "Leonardo da Vinci"
    assert second["mentions"] == pytest.approx(math.log1p(1))  # page 1 names "da Vinci"
    assert first["lead"] == pytest.approx(0.3) and second["lead"] == pytest.approx(-0.3)
    assert first["log_rank"] == 0.0 and second["score_ratio"] == pytest.approx(0.9)


def test_an_answer_that_repeats_the_question_or_is_the_pages_title_is_marked():
    hits = hits_of("The Mona Lisa is a painting.", "x")
    features = page_features(QUESTION, hits, [0.9, 0.9], ["Mona Lisa", "Title 2"], [None, None])
    assert features[0] is None  # only the question's own words
    assert features[1]["title_answer"] == 1.0


def test_cross_page_features_count_only_the_top_fifteen_ranks():
    texts = ["Paris"] * 20
    hits = hits_of(*texts)
    features = page_features("Capital of France?", hits, [0.5] * 20, ["Paris"] * 20, [None] * 20)
    assert features[0]["mentions"] == pytest.approx(math.log1p(14))
    assert features[19]["mentions"] == pytest.approx(math.log1p(15))  # rank 20 weighs the top 15, not itself


@pytest.mark.parametrize(
    ("question", "answer", "expected"),
    [
        ("When was it built?", "in 1436", 1.0),
        ("How many moons has Mars?", "two", -1.0),
        ("Who built it?", "Brunelleschi", 0.0),
    ],
)
def test_type_match(question, answer, expected):
    assert type_match(question, answer) == expected


def test_levels_and_a_model_that_never_vouches():
    assert [model().level(s) for s in (0.9, 0.8, 0.5, 0.19)] == ["answered", "answered", "weak", "unsupported"]
    assert model(answered=None).level(0.999) == "weak"


def test_the_model_file_round_trips_and_bad_files_name_the_field(tmp_path):
    good = model(answered=None)
    assert SupportModel.from_dict(json.loads(json.dumps(good.to_dict()))) == good
    for key, value, word in [
        ("features", ["logit_p"], "features"),
        ("weights", [1.0], "weights"),
        ("scale", [0.0] * len(FEATURES), "scale"),
        ("weak", "high", "weak"),
        ("answered", float("nan"), "answered"),
        ("bias", None, "bias"),
    ]:
        with pytest.raises(SupportError, match=word):
            SupportModel.from_dict({**good.to_dict(), key: value})
    broken = tmp_path / "support.json"
    broken.write_text("{not json")
    with pytest.raises(SupportError, match="not readable JSON"):
        SupportModel.load(broken)


def test_with_support_sets_one_probability_per_answer():
    hits = hits_of("Leonardo da Vinci painted it.", "x")
    readings = [JudgeReading(0.9, "Leonardo da Vinci", None), JudgeReading(0.2, None, None)]
    scored = with_support(QUESTION, hits, readings, model())
    assert scored[0].support == pytest.approx(1 / (1 + math.exp(-math.log(9))), abs=1e-3) and scored[1].support is None
    assert scored[0].score == scored[0].support and scored[1].score == 0.2


def test_fit_logistic_finds_the_direction_and_the_rate():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4000, 2))
    y = rng.random(4000) < 1 / (1 + np.exp(-(2 * x[:, 0] - 1)))
    w, b = fit_logistic(x, y, ridge=1e-3)
    assert w[0] == pytest.approx(2, abs=0.25) and abs(w[1]) < 0.2 and b == pytest.approx(-1, abs=0.2)


def synthetic_rows(n: int = 300, clean_band: bool = True) -> list[QuestionRows]:
    """Questions whose first page's logit_p says how likely its extraction is right; a third are unanswerable."""
    rng = np.random.default_rng(1)
    rows = []
    for q in range(n):
        z = rng.normal()
        right = bool(rng.random() < (0.97 if (clean_band and z > 1.0) else 0.15))
        anywhere = q % 3 != 0
        features = dict.fromkeys(FEATURES, 0.0) | {"logit_p": z + (0 if anywhere else -1.5)}
        rows.append(QuestionRows("nq", ((features, right and anywhere), (None, False)), anywhere))
    return rows


def test_the_answered_threshold_is_chosen_for_precision_and_none_when_unreachable():
    rows = synthetic_rows()
    oof = out_of_fold(rows, folds=5)
    weak, answered = choose_thresholds(rows, oof, precision=0.9, max_unanswerable=0.2)
    figures = summary(rows, oof, weak, answered)
    assert answered is not None and answered >= weak
    assert figures["answered_precision"]["value"] >= 0.9 and figures["answered_precision"]["n"] >= 10
    assert figures["unanswerable_with_answer"]["value"] <= 0.2
    noisy = synthetic_rows(clean_band=False)
    assert choose_thresholds(noisy, out_of_fold(noisy), precision=0.9)[1] is None


def test_fit_reports_its_rows_auc_and_dev_figures():
    support = fit(synthetic_rows(), folds=3)
    assert support.card["rows"]["questions"] == 300 and support.card["rules"]["precision"] == 0.9
    assert 0.5 < support.card["auc"]["support_out_of_fold"] <= 1
    assert SupportModel.from_dict(json.loads(json.dumps(support.to_dict()))).weak == support.weak


class SupportJudge:
    """Reads p3 (the Mona Lisa page) as "Leonardo da Vinci" at P = p_on_p3, every other page as nothing; its
    support model reads P alone, so a page's support is its P."""

    threshold = 0.6

    def __init__(self, p_on_p3: float, answered: float | None = 0.8):
        self.p_on_p3, self.support = p_on_p3, model(answered=answered, weak=0.3)

    def gate(self, window: int) -> float:
        return self.support.weak

    def read(self, question, pages):
        return [
            JudgeReading(self.p_on_p3, "Leonardo da Vinci", "Leonardo da Vinci painted it.")
            if p.id == "p3"
            else JudgeReading(0.05, None, None)
            for p in pages
        ]

    def read_ranked(self, question, hits):
        return list(with_support(question, hits, self.read(question, [h.page for h in hits]), self.support))


def run_with(judge: SupportJudge, tiny_index, scripted) -> list:
    settings = RunSettings(
        window=1,
        k=8,
        reader_mode="model_judge",
        grounded_only=True,
        judge_threshold=0.3,
        gate_threshold=0.3,
        answered_threshold=judge.support.answered,
    )
    backend = scripted(lambda messages: "ANSWER: Leonardo da Vinci\nPAGE: p3\nSENTENCE: 1")
    return list(run(QUESTION, tiny_index, backend, settings, judge))


@pytest.mark.parametrize(
    ("p", "answered", "verdict"), [(0.9, 0.8, "answered"), (0.6, 0.8, "weak"), (0.99, None, "weak")]
)
def test_a_run_is_green_only_at_the_answered_support(tiny_index, scripted, p, answered, verdict):
    events = run_with(SupportJudge(p, answered), tiny_index, scripted)
    final = events[-1]
    assert isinstance(final, Final) and final.answer == "Leonardo da Vinci" and final.verdict == verdict
    last = [e for e in events if isinstance(e, WindowVerdict)][-1]
    assert last.grounding.support == pytest.approx(p, abs=1e-3) and last.grounding.weak == (verdict == "weak")
    assert "support" in last.grounding.note


def test_below_weak_support_the_model_is_never_asked(tiny_index, scripted):
    events = run_with(SupportJudge(0.2), tiny_index, scripted)
    assert events[-1].answer is None and all(e.prompt_tokens == 0 for e in events if isinstance(e, WindowVerdict))


def test_a_weak_answer_is_amber_unsure_and_survives_a_recording(tiny_index, scripted, tiny_pages):
    events = run_with(SupportJudge(0.6), tiny_index, scripted)
    pages = {p.id: p for p in tiny_pages}
    replayed = [from_json(json.loads(json.dumps(to_json(e))), pages.get) for e in events]
    view = RunView("Iterative")
    for event in replayed:
        view.update(event)
    answer, windows = view.answer_html(), view.windows_html()
    assert 'class="raqa-badge raqa-weak">Weak support<' in answer and "unsure" in answer
    assert "support 0.60" in windows and "raqa-answered" not in answer


def test_the_legend_quotes_the_measured_precision_or_says_it_vouches_for_nothing():
    dev = {
        "answered_precision": {"value": 0.92, "low": 0.8, "high": 0.97, "n": 25},
        "weak_precision": {"value": 0.2, "low": 0.1, "high": 0.3, "n": 80},
    }
    base = model()
    with_green = SupportModel(base.weights, 0.0, base.mean, base.scale, 0.3, 0.85, {"dev": dev})
    legend = badge_legend(True, with_green)
    assert "at least 0.85" in legend and "92%" in legend and "Weak support" in legend and "20%" in legend
    never = SupportModel(with_green.weights, 0.0, with_green.mean, with_green.scale, 0.3, None, {"dev": dev})
    assert "never shown" in badge_legend(True, never)
    assert "Weak support" not in badge_legend(True, None)


def test_the_command_line_says_weak_support_and_the_support(tiny_index, scripted, capsys):
    from raqa.cli.output import print_human

    for event in run_with(SupportJudge(0.6), tiny_index, scripted):
        print_human(event)
    out, err = capsys.readouterr()
    assert "Leonardo da Vinci (weak support: the grader or judge is unsure)" in out
    assert "=> weak" in err and "support 0.600" in err
