"""Runs with an answer judge, on a scripted model and a scripted judge: the badge is answer agreement, the
model + judge reader asks the model only where the judge finds an answer, and the judge alone answers itself."""

from __future__ import annotations

import json

import pytest
from scripted import ScriptedBackend

from raqa.config import AppConfig, RunForm, RunSettings, SettingsError
from raqa.loading import Lazy
from raqa.reading.agreement import check_agreement
from raqa.reading.engine import run
from raqa.reading.events import Final, WindowVerdict, to_json
from raqa.reading.judge import JudgeReading
from raqa.reading.prompts import parse_reply
from raqa.reading.readers import BASE_READER, JUDGE_READERS
from raqa.service import Service
from raqa.text import agrees, token_f1

QUESTION = "Who painted the Mona Lisa?"


class ScriptedJudge:
    """Reads the Mona Lisa page (p3) as stating `answer` with P = p_on_p3; every other page as 0.05."""

    threshold = 0.6
    support = None  # no support model: badges by agreement alone

    def gate(self, window: int) -> float:
        return 0.6 + window / 100

    def __init__(self, answer: str = "Leonardo da Vinci", p_on_p3: float = 0.9):
        self.answer, self.p_on_p3, self.calls = answer, p_on_p3, []

    def read(self, question, pages):
        self.calls.append([p.id for p in pages])
        return [
            JudgeReading(self.p_on_p3, self.answer, p.text.split(". ")[0] + ".")
            if p.id == "p3"
            else JudgeReading(0.05, p.title, None)
            for p in pages
        ]

    def read_ranked(self, question, hits):
        return self.read(question, [h.page for h in hits])


def verdicts(events) -> list[WindowVerdict]:
    return [e for e in events if isinstance(e, WindowVerdict)]


def reply_citing_p3(answer: str) -> str:
    return f"ANSWER: {answer}\nPAGE: p3\nSENTENCE: 1"


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("Leonardo da Vinci", "Leonardo", True),
        ("da Vinci", "Leonardo da Vinci", True),
        ("Osaka", "Tokyo", False),
        ("the Danube river", "Danube", True),
        ("1", "Leonardo da Vinci", False),
        ("", "Tokyo", False),
    ],
)
def test_answers_agree_by_containment_or_token_f1(a, b, same):
    assert agrees(a, b) is same


def test_token_f1_counts_shared_words():
    assert token_f1("New York City", "New York") == pytest.approx(0.8)
    assert token_f1("Paris", "Rome") == 0.0


def test_the_badge_is_answered_only_when_the_judge_reads_the_same_answer_on_the_cited_page(tiny_index, scripted):
    judge = ScriptedJudge()
    settings = RunSettings(window=3, k=8)
    right = list(run(QUESTION, tiny_index, scripted(reply_citing_p3("Leonardo da Vinci")), settings, judge))
    assert verdicts(right)[0].verdict == "answered" and "same answer" in verdicts(right)[0].grounding.note
    # a wrong name on the right page: the lexical check would pass "Salai" if a sentence mentioned it
    wrong = list(run(QUESTION, tiny_index, scripted(reply_citing_p3("Salai")), settings, ScriptedJudge()))
    first = verdicts(wrong)[0]
    assert first.verdict == "unsupported"
    assert "says 'Leonardo da Vinci', not 'Salai'" in first.grounding.note  # what the page does say
    assert first.grounding.passage and "Mona Lisa" in first.grounding.passage
    unsure = list(
        run(QUESTION, tiny_index, scripted(reply_citing_p3("Leonardo da Vinci")), settings, ScriptedJudge(p_on_p3=0.3))
    )
    assert verdicts(unsure)[0].verdict == "unsupported" and "finds no answer" in verdicts(unsure)[0].grounding.note


def test_every_window_carries_the_judges_reading_of_each_page(tiny_index, scripted):
    judge = ScriptedJudge()
    events = list(
        run(QUESTION, tiny_index, scripted("NOT FOUND", "NOT FOUND", "NOT FOUND"), RunSettings(window=3, k=8), judge)
    )
    for v in verdicts(events):
        assert v.judge is not None and len(v.judge) == len(v.hits)
    # one call a run: every retrieved page in rank order, so a page's support can weigh the other pages
    retrieved = next(e for e in events if type(e).__name__ == "Retrieved").hits
    assert judge.calls == [[h.page.id for h in retrieved]]
    line = json.loads(json.dumps(to_json(verdicts(events)[0])))
    assert set(line["judge"][0]) == {"p_answer", "answer", "sentence", "support"}


def test_model_and_judge_asks_the_model_only_where_the_judge_finds_an_answer(tiny_index, scripted):
    backend = scripted(reply_citing_p3("Leonardo da Vinci"))
    settings = RunSettings(window=1, k=8, reader_mode="model_judge", gate_threshold=0.6)
    events = list(run(QUESTION, tiny_index, backend, settings, ScriptedJudge()))
    windows = verdicts(events)
    p3_window = next(i for i, v in enumerate(windows) if v.hits[0].page.id == "p3")
    assert all(v.verdict == "not_found" and "the model was not asked" in v.reply.reason for v in windows[:p3_window])
    assert all(v.prompt_tokens == 0 for v in windows[:p3_window])
    assert len(backend.requests) == 1 and windows[p3_window].verdict == "answered"
    final = events[-1]
    assert isinstance(final, Final) and final.answer == "Leonardo da Vinci"


def test_model_and_judge_declines_everything_when_the_judge_finds_nothing(tiny_index, scripted):
    backend = scripted(reply_citing_p3("Leonardo da Vinci"))
    settings = RunSettings(window=3, k=8, reader_mode="model_judge", gate_threshold=0.6)
    events = list(run(QUESTION, tiny_index, backend, settings, ScriptedJudge(p_on_p3=0.2)))
    assert backend.requests == [] and events[-1].abstained and events[-1].answer is None


def test_the_judge_alone_answers_from_the_page_without_the_model(tiny_index, scripted):
    backend = scripted()
    settings = RunSettings(window=3, k=8, reader_mode="judge", gate_threshold=0.6)
    events = list(run(QUESTION, tiny_index, backend, settings, ScriptedJudge()))
    final = events[-1]
    assert backend.requests == [] and final.answer == "Leonardo da Vinci" and final.verdict == "answered"
    assert final.page_id == "p3" and final.completion_tokens == 0
    nothing = list(run(QUESTION, tiny_index, backend, settings, ScriptedJudge(p_on_p3=0.1)))
    assert nothing[-1].abstained


def test_a_judge_reader_without_a_judge_fails_clearly(tiny_index, scripted):
    events = list(run(QUESTION, tiny_index, scripted(), RunSettings(reader_mode="judge"), None))
    assert type(events[-1]).__name__ == "RunFailed" and "answer judge" in events[-1].message


def test_check_agreement_names_a_page_outside_the_window(tiny_index):
    hits = tuple(tiny_index.search(QUESTION, 2))
    readings = [JudgeReading(0.9, "x", None)] * len(hits)
    check = check_agreement(
        parse_reply("ANSWER: Leonardo\nPAGE: p99\nSENTENCE: 1"), hits, readings, RunSettings(judge_threshold=0.5)
    )
    assert not check.supported and "not in this window" in check.note


def test_the_service_plans_judge_readers_with_the_judges_threshold(tiny_pages, tiny_index, tmp_path):
    service = Service(AppConfig(cache_dir=tmp_path), tiny_pages, tiny_index, ScriptedBackend(["NOT FOUND"]), "tiny", {})
    service.readers = {BASE_READER.name: BASE_READER, **{r.name: r for r in JUDGE_READERS}}
    with pytest.raises(SettingsError, match="needs the answer judge"):
        service.plan(QUESTION, RunForm(reader="judge"))
    loads = []
    service.judge = Lazy(lambda: loads.append(1) or ScriptedJudge())
    plan = service.plan(QUESTION, RunForm(reader="base+judge"))
    assert plan.settings.reader_mode == "model_judge" and plan.settings.judge_threshold == ScriptedJudge.threshold
    assert plan.settings.gate_threshold == pytest.approx(0.6 + RunSettings.window / 100)  # the default w's gate
    assert plan.judge is service.plan(QUESTION).judge and loads == [1]  # loaded once, on first use


def test_model_and_judge_moves_on_when_the_judge_does_not_confirm_the_models_answer(tiny_index, scripted):
    """The gate passes on the Mona Lisa page, but the model names someone else: that window counts as declined."""
    from raqa.reading.readers import MODEL_JUDGE_READER

    settings = MODEL_JUDGE_READER.settings(RunSettings(window=1, k=8, gate_threshold=0.6))
    assert settings.grounded_only and settings.reader_mode == "model_judge"
    events = list(run(QUESTION, tiny_index, scripted(reply_citing_p3("Salai")), settings, ScriptedJudge()))
    p3 = next(v for v in verdicts(events) if v.hits[0].page.id == "p3")
    assert p3.verdict == "unsupported" and events[-1].abstained and events[-1].answer is None


def test_an_answer_that_only_repeats_the_question_is_never_answered(tiny_index):
    """'gold' for 'the chemical symbol for gold' agrees with a judge that read 'gold' too, and is still no answer."""
    question = "What is the chemical symbol for gold?"
    hits = tuple(tiny_index.search(QUESTION, 2))
    readings = [JudgeReading(0.9, "gold", "Gold is a metal.")] * len(hits)
    cited = hits[0].page.id
    check = check_agreement(
        parse_reply(f"ANSWER: Gold\nPAGE: {cited}\nSENTENCE: 1"),
        hits,
        readings,
        RunSettings(judge_threshold=0.5),
        question,
    )
    assert not check.supported and "repeats words of the question" in check.note
    right = [JudgeReading(0.9, "Au", "Its symbol is Au.")] * len(hits)
    assert check_agreement(
        parse_reply(f"ANSWER: Au\nPAGE: {cited}\nSENTENCE: 1"), hits, right, RunSettings(judge_threshold=0.5), question
    ).supported
