"""The committed Adapt-LLM adapters: their cards agree with their data, and (slow) they load and behave."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.training.when_to_retrieve_data import Labelled, data_summary, examples
from raqa.models.base import ModelError
from raqa.when_to_retrieve.model import ADAPT_DIR, ADAPTER_CARD, adapter_dirs
from raqa.when_to_retrieve.prompts import RET, closed_book_messages, parametric_messages

ROOT = Path(__file__).resolve().parent.parent


def _rows() -> list[Labelled]:
    lines = (ADAPT_DIR / "training_data.jsonl").read_text(encoding="utf-8").splitlines()
    return [Labelled(**{**json.loads(line), "answers": tuple(json.loads(line)["answers"])}) for line in lines]


def test_each_card_reports_the_data_it_was_trained_on():
    rows = _rows()
    summary = data_summary(rows)
    for kind, folder in adapter_dirs().items():
        card = json.loads((folder / ADAPTER_CARD).read_text())
        assert card["kind"] == kind and card["data"] == summary
        assert card["training"]["examples"] == len(examples(rows, kind, balance=bool(card.get("class_balance"))))
        assert card["lora"]["rank"] == 8 and card["lora"]["alpha"] == 16 and card["lora"]["lr"] == 3e-4
        assert card["lora"]["epochs"] == 3 and card["command"].startswith("python -m lab train adapt")
        log = json.loads((folder / "training_log.json").read_text())
        assert len(log["steps"]) == card["training"]["loss"]["steps"] > 0
        assert (folder / "adapter_model.safetensors").stat().st_size < 10_000_000
    # dev questions only: nothing from the test splits experiment when_to_retrieve reads
    assert all("-dev-" in r.id for r in rows)


def test_missing_adapters_are_named(tmp_path):
    (tmp_path / "adapt").mkdir()
    with pytest.raises(ModelError, match="never.*always.*train adapt"):
        adapter_dirs(tmp_path)


@pytest.fixture(scope="module")
def adapt_model():
    from raqa.config import default_cache_dir
    from raqa.when_to_retrieve.model import load_adapt_model

    return load_adapt_model(default_cache_dir())


@pytest.mark.slow
def test_the_adapt_adapter_learned_to_ask_for_retrieval(adapt_model):
    """P(<RET>) under Adapt-LLM is far above the base model's on dev questions it was taught <RET> for."""
    unknown = [r for r in _rows() if not r.known][:5]
    for row in unknown:
        messages = parametric_messages(row.question)
        base, tuned = adapt_model.ret_probability(messages, "base"), adapt_model.ret_probability(messages, "adapt")
        assert 0 <= base < 0.05 and tuned > 10 * base


@pytest.mark.slow
def test_ret_can_be_forbidden_and_adapters_switch(adapt_model):
    question = _rows()[0].question
    banned = adapt_model.generate(parametric_messages(question), "adapt", ban_ret=True)
    assert RET not in banned and banned.strip()
    replies = {a: adapt_model.generate(closed_book_messages(question), a) for a in ("base", "never")}
    # NR-LLM was trained to reply with the bare answer; the base model writes sentences
    assert len(replies["never"]) < len(replies["base"])


class _PieceTokenizer:
    """Decodes ids by joining pieces, like a BPE tokenizer whose vocabulary merges '><'."""

    pieces = ["<", "RET", ">", "><", " Paris", "<|end|>"]

    def decode(self, ids, **_):
        return "".join(self.pieces[i] for i in ids)


def _greedy_on_pieces():
    import torch

    from raqa.when_to_retrieve.model import GreedyModel

    model = object.__new__(GreedyModel)  # only the ban's fields: no weights needed
    model.torch, model.tokenizer, model.stop_ids = torch, _PieceTokenizer(), {5}
    return model, torch


def test_the_ret_ban_catches_merged_spellings():
    model, torch = _greedy_on_pieces()
    prefer = lambda *order: torch.tensor([10.0 - order.index(i) if i in order else -5.0 for i in range(6)])  # noqa: E731
    # after "<RET" the most likely tokens are ">" and the merged "><"; both would spell <RET>
    assert model._without_ret([0, 1], prefer(2, 3, 4)) == 4
    # "<" then "RET" is fine on its own; only completing the tag is banned
    assert model._without_ret([0], prefer(1, 4)) == 1
    assert model._without_ret([3], prefer(1, 4)) == 1  # "><" + "RET" is not yet "<RET>"
    assert model._without_ret([3, 1], prefer(2, 5)) == 5  # the end token is always allowed


def test_greedy_model_takes_stop_tokens_and_specials_from_the_public_helpers(tmp_path):
    from test_llm import tiny_model_folder
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from raqa.models.local import TransformersBackend
    from raqa.when_to_retrieve.model import GreedyModel

    folder = tiny_model_folder(tmp_path / "m", eos=[2, 11])
    lm, tokenizer = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    greedy, reader = GreedyModel(lm, tokenizer, "tiny", answer_tokens=3), TransformersBackend(lm, tokenizer, "tiny")
    assert greedy.stop_ids == reader.stop_ids == {1, 2, 11}
    assert greedy.specials == reader.specials and "\n\n" not in greedy.specials
    assert isinstance(greedy.generate([{"role": "user", "content": "bees make"}]), str)

    tokenizer.chat_template = None
    with pytest.raises(ModelError, match="tiny has no chat template"):
        GreedyModel(lm, tokenizer, "tiny")
